package sqlite_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acpgate/acpgate/internal/store"
	"github.com/acpgate/acpgate/internal/store/sqlite"
	"github.com/acpgate/acpgate/internal/store/storetest"
)

func TestSQLite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openSQLite(t, t.TempDir()) })
}

func openSQLite(t *testing.T, dir string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(dir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func TestSQLiteFile(t *testing.T) {
	ctx := context.Background()

	t.Run("session records survive closing and opening again", func(t *testing.T) {
		dir := t.TempDir()
		s := openSQLite(t, dir)
		want := storetest.NewSession("s1", 0)
		want.Mode = "architect"
		want.ConfigOptions = map[string]string{"model": "large"}
		if err := s.PutSession(ctx, want); err != nil {
			t.Fatalf("PutSession: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		s = openSQLite(t, dir)
		defer s.Close()
		got, err := s.Sessions(ctx)
		if err != nil {
			t.Fatalf("Sessions: %v", err)
		}
		storetest.AssertSessions(t, got, []store.Session{want})
	})

	t.Run("what was written survives closing and opening again", func(t *testing.T) {
		dir := t.TempDir()
		s := openSQLite(t, dir)
		ended := storetest.NewTurn("t1", "r1", 1, 0)
		running := storetest.NewTurn("t2", "r2", 1, 1)
		for _, tr := range []store.Turn{ended, running} {
			if _, _, err := s.Begin(ctx, tr); err != nil {
				t.Fatalf("Begin: %v", err)
			}
			if err := s.Started(ctx, tr.ID, "s1", storetest.Events(1, 1)[0]); err != nil {
				t.Fatalf("Started: %v", err)
			}
			if err := s.Append(ctx, tr.ID, storetest.Events(2, 50)); err != nil {
				t.Fatalf("Append: %v", err)
			}
		}
		endedAt := time.Date(2026, 3, 1, 13, 0, 0, 1, time.UTC)
		if err := s.End(ctx, "t1", nil, store.Event{Seq: 51, Data: []byte("ended")}, endedAt); err != nil {
			t.Fatalf("End: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}

		s = openSQLite(t, dir)
		defer s.Close()
		got, err := s.Get(ctx, "t1")
		if err != nil {
			t.Fatalf("Get after reopening: %v", err)
		}
		if got.SessionID != "s1" || got.LastSeq != 51 || !got.EndedAt.Equal(endedAt) || string(got.Terminal) != "ended" ||
			!got.StartedAt.Equal(ended.StartedAt) || !bytes.Equal(got.PromptHash, ended.PromptHash) {
			t.Errorf("t1 after reopening = %+v", got)
		}
		events, err := s.Events(ctx, "t2", 0, 1000, 0)
		if err != nil || len(events) != 50 || string(events[49].Data) != "event 50" {
			t.Errorf("t2's journal after reopening: %d events, %v", len(events), err)
		}
		runningNow, err := s.Running(ctx)
		if err != nil || len(runningNow) != 1 || runningNow[0].ID != "t2" {
			t.Errorf("Running after reopening = %v, %v; want t2", runningNow, err)
		}
		if _, created, err := s.Begin(ctx, storetest.NewTurn("t3", "r1", 1, 2)); created || err != nil {
			t.Errorf("a resubmission after reopening: created %v, %v; want the existing turn", created, err)
		}
	})

	t.Run("a second open of a directory in use fails and names it", func(t *testing.T) {
		dir := t.TempDir()
		s := openSQLite(t, dir)
		_, err := sqlite.Open(dir)
		if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "in use by another acpgate process") {
			t.Fatalf("second Open: %v; want in use, naming %s", err, dir)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		s = openSQLite(t, dir)
		s.Close()
	})

	t.Run("another process cannot open a directory in use", func(t *testing.T) {
		dir := t.TempDir()
		s := openSQLite(t, dir)
		defer s.Close()
		cmd := exec.Command(os.Args[0], "-test.run=^TestSQLiteOpenInChild$")
		cmd.Env = append(os.Environ(), "ACPGATE_STORE_CHILD_DIR="+dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "in use by another acpgate process") {
			t.Errorf("child's Open did not report the directory in use:\n%s", out)
		}
	})

	t.Run("a file that is not a database fails the open and names it", func(t *testing.T) {
		dir := t.TempDir()
		db := filepath.Join(dir, "acpgate.db")
		if err := os.WriteFile(db, bytes.Repeat([]byte("not a database "), 1000), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := sqlite.Open(dir)
		if err == nil || !strings.Contains(err.Error(), db) || !strings.Contains(err.Error(), "not a usable database") {
			t.Fatalf("Open of garbage: %v; want not a usable database, naming %s", err, db)
		}
		// The failed open must not keep the directory locked.
		if _, err := sqlite.Open(dir); err == nil || strings.Contains(err.Error(), "in use") {
			t.Errorf("a second open after a failed one: %v", err)
		}
	})

	t.Run("a damaged database fails the open and names it", func(t *testing.T) {
		dir := t.TempDir()
		s := openSQLite(t, dir)
		ctx := context.Background()
		for i := range 200 {
			id := fmt.Sprintf("t%d", i)
			s.Begin(ctx, storetest.NewTurn(id, "", 1, i))
			s.Started(ctx, id, "s1", store.Event{Seq: 1, Data: bytes.Repeat([]byte("x"), 1000)})
		}
		s.Close()
		db := filepath.Join(dir, "acpgate.db")
		f, err := os.OpenFile(db, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		// Past the header and the schema's first pages: the tables' b-trees.
		if _, err := f.WriteAt(bytes.Repeat([]byte{0xa5}, 8192), 8192); err != nil {
			t.Fatal(err)
		}
		f.Close()
		_, err = sqlite.Open(dir)
		if err == nil || !strings.Contains(err.Error(), db) || !strings.Contains(err.Error(), "not a usable database") {
			t.Fatalf("Open of a damaged database: %v; want not a usable database, naming %s", err, db)
		}
	})

	t.Run("a directory that cannot be created fails the open and names it", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(file, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(file, "state")
		_, err := sqlite.Open(dir)
		if err == nil || !strings.Contains(err.Error(), dir) {
			t.Fatalf("Open(%s): %v; want an error naming it", dir, err)
		}
	})

	t.Run("a database from a newer acpgate is refused", func(t *testing.T) {
		dir := t.TempDir()
		s := openSQLite(t, dir)
		s.Close()
		raw, err := sqlOpen(filepath.Join(dir, "acpgate.db"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := raw.Exec("PRAGMA user_version = 999"); err != nil {
			t.Fatal(err)
		}
		raw.Close()
		_, err = sqlite.Open(dir)
		if err == nil || !strings.Contains(err.Error(), "newer") || !strings.Contains(err.Error(), "acpgate.db") {
			t.Fatalf("Open of a newer schema: %v; want a refusal naming the file", err)
		}
	})

	t.Run("a full database fails the end and keeps the turn running", func(t *testing.T) {
		s, err := sqlite.OpenWith(t.TempDir(), sqlite.Options{MaxPageCount: 24})
		if err != nil {
			t.Fatalf("OpenWith: %v", err)
		}
		defer s.Close()
		if _, _, err := s.Begin(ctx, storetest.NewTurn("t1", "r1", 1, 0)); err != nil {
			t.Fatalf("Begin: %v", err)
		}
		if err := s.Started(ctx, "t1", "s1", storetest.Events(1, 1)[0]); err != nil {
			t.Fatalf("Started: %v", err)
		}
		// A terminal this small lives in the record: 60 KB does not fit
		// in what 24 pages leave after the schema.
		err = s.End(ctx, "t1", nil, store.Event{Seq: 2, Data: bytes.Repeat([]byte("y"), 60<<10)}, time.Now())
		if err == nil || !strings.Contains(err.Error(), "full") || !strings.Contains(err.Error(), "acpgate.db") {
			t.Fatalf("End on a full database: %v; want it to say the database is full, naming it", err)
		}
		if got, err := s.Get(ctx, "t1"); err != nil || !got.Running() || got.LastSeq != 1 {
			t.Errorf("after the failed End: running %v, last seq %d, %v; want running at 1", got.Running(), got.LastSeq, err)
		}
		if err := s.Append(ctx, "t1", storetest.Events(2, 3)); err != nil {
			t.Errorf("Append after the failed End: %v", err)
		}
	})

	t.Run("a file size limit fails the append and keeps the journal as it was", func(t *testing.T) {
		// A real limit on a real file (RLIMIT_FSIZE), set in a child
		// process so that it binds nothing else: the kernel refuses the
		// write past it with EFBIG, as a full disk refuses with ENOSPC.
		cmd := exec.Command(os.Args[0], "-test.run=^TestSQLiteJournalUnderAFileSizeLimitInChild$", "-test.v")
		cmd.Env = append(os.Environ(), "ACPGATE_STORE_FSIZE_DIR="+t.TempDir())
		out, err := cmd.CombinedOutput()
		t.Logf("child:\n%s", out)
		if err != nil || !strings.Contains(string(out), "--- PASS: TestSQLiteJournalUnderAFileSizeLimitInChild") {
			t.Fatalf("the child failed (%v)", err)
		}
	})

	t.Run("journals written before version 3 are moved to files and read back whole", func(t *testing.T) {
		dir := t.TempDir()
		raw, err := sqlOpen(filepath.Join(dir, "acpgate.db"))
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range sqlite.MigrationsBeforeFiles() {
			if _, err := raw.Exec(q); err != nil {
				t.Fatalf("schema version 2: %v", err)
			}
		}
		// An ended turn (its terminal in the events table and in the
		// record, as version 2 kept it) and a running one.
		for _, q := range []string{
			`INSERT INTO turns (id, request_id, attempt, agent, session_id, target, started_at, ended_at, last_seq, terminal) VALUES ('ended', '', 1, 'a', 's', 't', 1, 2, 4, 'the end')`,
			`INSERT INTO turns (id, request_id, attempt, agent, session_id, target, started_at, last_seq) VALUES ('running', '', 1, 'a', 's', 't', 1, 2)`,
			`INSERT INTO events (turn_id, seq, data) VALUES ('ended', 1, 'event 1'), ('ended', 2, 'event 2'), ('ended', 3, 'event 3'), ('ended', 4, 'the end'), ('running', 1, 'event 1'), ('running', 2, 'event 2')`,
			`PRAGMA user_version = 2`,
		} {
			if _, err := raw.Exec(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		raw.Close()
		s := openSQLite(t, dir)
		defer s.Close()
		events, err := s.Events(ctx, "ended", 0, 100, 0)
		if want := append(storetest.Events(1, 3), store.Event{Seq: 4, Data: []byte("the end")}); err != nil || !equalEvents(events, want) {
			t.Errorf("the ended turn's journal: %v, %v; want %v", events, err, want)
		}
		if events, err := s.Events(ctx, "running", 0, 100, 0); err != nil || !equalEvents(events, storetest.Events(1, 2)) {
			t.Errorf("the running turn's journal: %v, %v", events, err)
		}
		if err := s.Append(ctx, "running", storetest.Events(3, 3)); err != nil {
			t.Fatalf("Append to the moved journal: %v", err)
		}
		if events, err := s.Events(ctx, "running", 1, 100, 0); err != nil || !equalEvents(events, storetest.Events(2, 3)) {
			t.Errorf("the running turn's journal after an append: %v, %v", events, err)
		}
	})

	t.Run("session records of version 4 read back as open, with no suspension time", func(t *testing.T) {
		dir := t.TempDir()
		openSQLite(t, dir).Close()
		raw, err := sqlOpen(filepath.Join(dir, "acpgate.db"))
		if err != nil {
			t.Fatal(err)
		}
		// Back to version 4, with one record as version 4 wrote it; an
		// acpgate of version 4 kept the version in user_version alone.
		for _, q := range []string{
			`DROP TABLE acpgate_schema_versions`,
			`DROP TRIGGER turns_notify`,
			`DROP TABLE notifications`,
			`ALTER TABLE turns DROP COLUMN notify_url`,
			`ALTER TABLE turns DROP COLUMN reserved_seq`,
			`ALTER TABLE turns DROP COLUMN skipped`,
			`ALTER TABLE sessions DROP COLUMN suspended_at`,
			`INSERT INTO sessions (id, agent, acp_session_id, cwd, owner, created_at, mode, config_options) VALUES ('s1', 'echo', 'acp-s1', '.', 'alice', 1000, '', '{}')`,
			`PRAGMA user_version = 4`,
		} {
			if _, err := raw.Exec(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		raw.Close()
		s := openSQLite(t, dir)
		defer s.Close()
		got, err := s.Sessions(ctx)
		if err != nil || len(got) != 1 || got[0].ID != "s1" || !got[0].SuspendedAt.IsZero() {
			t.Fatalf("Sessions after the migration = %+v, %v; want s1 with a zero SuspendedAt", got, err)
		}
		got[0].SuspendedAt = time.Unix(0, 5000)
		if err := s.PutSession(ctx, got[0]); err != nil {
			t.Fatal(err)
		}
		if again, err := s.Sessions(ctx); err != nil || !again[0].SuspendedAt.Equal(time.Unix(0, 5000)) {
			t.Errorf("Sessions after recording the suspension = %+v, %v", again, err)
		}
	})

	t.Run("journal files of deleted turns are swept at open", func(t *testing.T) {
		dir := t.TempDir()
		s := openSQLite(t, dir)
		startedTurn(t, s, "kept")
		s.Close()
		// What a crash between a deletion's commit and its unlink leaves.
		stray := filepath.Join(dir, "journals", "0123456789abcdef0123456789abcdef.events")
		if err := os.WriteFile(stray, []byte("old"), 0o600); err != nil {
			t.Fatal(err)
		}
		s = openSQLite(t, dir)
		defer s.Close()
		if _, err := os.Stat(stray); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the stray journal file is still there: %v", err)
		}
		if events, err := s.Events(ctx, "kept", 0, 10, 0); err != nil || !equalEvents(events, storetest.Events(1, 1)) {
			t.Errorf("the kept turn's journal: %v, %v", events, err)
		}
	})

	t.Run("a journal file shorter than its record is reported damaged, not read short", func(t *testing.T) {
		dir := t.TempDir()
		s := openSQLite(t, dir)
		defer s.Close()
		startedTurn(t, s, "t1")
		if err := s.Append(ctx, "t1", storetest.Events(2, 10)); err != nil {
			t.Fatal(err)
		}
		files, _ := filepath.Glob(filepath.Join(dir, "journals", "*.events"))
		if len(files) != 1 {
			t.Fatalf("journal data files: %v", files)
		}
		if err := os.Truncate(files[0], 20); err != nil {
			t.Fatal(err)
		}
		_, err := s.Events(ctx, "t1", 0, 10, 0)
		if err == nil || !strings.Contains(err.Error(), "damaged") || !errors.Is(err, store.ErrDamaged) {
			t.Errorf("Events of a truncated journal: %v; want an error saying it is damaged (ErrDamaged)", err)
		}
	})

	t.Run("a journal whose index was overwritten, or whose data is missing, is ErrDamaged", func(t *testing.T) {
		for _, damage := range []struct {
			name string
			do   func(data, index string) error
		}{
			{"index overwritten", func(_, index string) error { return os.WriteFile(index, bytes.Repeat([]byte{0xff}, 80), 0o600) }},
			{"data missing", func(data, _ string) error { return os.Remove(data) }},
		} {
			dir := t.TempDir()
			s := openSQLite(t, dir)
			startedTurn(t, s, "t1")
			if err := s.Append(ctx, "t1", storetest.Events(2, 10)); err != nil {
				t.Fatal(err)
			}
			data, _ := filepath.Glob(filepath.Join(dir, "journals", "*.events"))
			index, _ := filepath.Glob(filepath.Join(dir, "journals", "*.index"))
			if len(data) != 1 || len(index) != 1 {
				t.Fatalf("journal files: %v %v", data, index)
			}
			if err := damage.do(data[0], index[0]); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Events(ctx, "t1", 0, 10, 0); !errors.Is(err, store.ErrDamaged) {
				t.Errorf("%s: Events: %v; want ErrDamaged", damage.name, err)
			}
			s.Close()
		}
	})
}

// TestSQLiteJournalUnderAFileSizeLimitInChild is the child of "a file
// size limit fails the append": it limits its own file size, fills a
// journal past it, and checks what the store kept.
func TestSQLiteJournalUnderAFileSizeLimitInChild(t *testing.T) {
	dir := os.Getenv("ACPGATE_STORE_FSIZE_DIR")
	if dir == "" {
		t.Skip("run by TestSQLiteFile in a child process")
	}
	ctx := context.Background()
	s := openSQLite(t, dir)
	defer s.Close()
	if _, _, err := s.Begin(ctx, storetest.NewTurn("t1", "r1", 1, 0)); err != nil {
		t.Fatalf("Begin: %v", err)
	}
	if err := s.Started(ctx, "t1", "s1", storetest.Events(1, 1)[0]); err != nil {
		t.Fatalf("Started: %v", err)
	}
	const limit = 256 << 10
	if err := limitFileSize(limit); err != nil {
		t.Fatalf("setting RLIMIT_FSIZE: %v", err)
	}
	big := bytes.Repeat([]byte("y"), 1000)
	var seq uint64 = 1
	var full error
	for full == nil {
		batch := make([]store.Event, 16)
		for i := range batch {
			batch[i] = store.Event{Seq: seq + 1 + uint64(i), Data: big}
		}
		if full = s.Append(ctx, "t1", batch); full == nil {
			seq += 16
		}
		if seq > 2*limit/1000 {
			t.Fatalf("journaled %d KB under a %d KB file size limit without an error", seq, limit>>10)
		}
	}
	t.Logf("Append past the limit: %v", full)
	if !strings.Contains(full.Error(), "full") || !strings.Contains(full.Error(), "acpgate.db") {
		t.Errorf("Append past the limit: %v; want it to say the disk is full, naming the store", full)
	}
	events, err := s.Events(ctx, "t1", 0, 1<<20, 0)
	if err != nil {
		t.Fatalf("Events: %v", err)
	}
	if uint64(len(events)) != seq || events[len(events)-1].Seq != seq {
		t.Errorf("journal after the failed batch: %d events, want %d (the failed batch kept in part?)", len(events), seq)
	}
	if got, err := s.Get(ctx, "t1"); err != nil || got.LastSeq != seq {
		t.Errorf("LastSeq = %d, %v; want %d", got.LastSeq, err, seq)
	}
	// A smaller batch that fits is journaled after the failed one, with
	// no trace of it.
	small := []store.Event{{Seq: seq + 1, Data: []byte("small")}}
	if err := s.Append(ctx, "t1", small); err != nil {
		t.Fatalf("a small Append after the failed one: %v", err)
	}
	if got, err := s.Events(ctx, "t1", seq, 10, 0); err != nil || !equalEvents(got, small) {
		t.Errorf("after the small Append: %v, %v", got, err)
	}
}

// TestSQLiteOpenInChild is the child of "another process cannot open a
// directory in use": it opens the directory its parent holds and prints
// the result.
func TestSQLiteOpenInChild(t *testing.T) {
	dir := os.Getenv("ACPGATE_STORE_CHILD_DIR")
	if dir == "" {
		t.Skip("run by TestSQLiteFile in a child process")
	}
	s, err := sqlite.Open(dir)
	if err == nil {
		s.Close()
		fmt.Println("opened")
		return
	}
	fmt.Println(err)
}

// startedTurn begins turn id in s and journals its started event.
func startedTurn(t *testing.T, s store.Store, id string) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := s.Begin(ctx, storetest.NewTurn(id, "", 1, 0)); err != nil {
		t.Fatal(err)
	}
	if err := s.Started(ctx, id, "s1", storetest.Events(1, 1)[0]); err != nil {
		t.Fatal(err)
	}
}

func TestSQLiteKeepsAnEventsRepeatedBytesOnce(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openSQLite(t, dir)
	defer s.Close()
	if _, _, err := s.Begin(ctx, storetest.NewTurn("t1", "", 1, 0)); err != nil {
		t.Fatalf("Begin: %v", err)
	}
	if err := s.Started(ctx, "t1", "s1", storetest.Events(1, 1)[0]); err != nil {
		t.Fatalf("Started: %v", err)
	}
	text := bytes.Repeat([]byte("x"), 64<<10)
	var events []store.Event
	for seq := uint64(2); seq <= 11; seq++ {
		data := slices.Concat([]byte("head"), text, []byte("mid"), text)
		events = append(events, store.Event{Seq: seq, Data: data, Echo: store.Echo{From: 4, At: 4 + len(text) + 3, Len: len(text)}})
	}
	if err := s.Append(ctx, "t1", events); err != nil {
		t.Fatalf("Append: %v", err)
	}
	var kept int64
	entries, err := os.ReadDir(filepath.Join(dir, "journals"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if info, err := e.Info(); err == nil && strings.HasSuffix(e.Name(), ".events") {
			kept += info.Size()
		}
	}
	// Ten events of 128 KiB and a bit: 64 KiB and a bit each in the files.
	if whole := int64(10 * events[0].Len()); kept <= 0 || kept > whole/2+1024 {
		t.Errorf("the journal files hold %d bytes of events whose encodings are %d; want about half", kept, whole)
	}
	got, err := s.Events(ctx, "t1", 1, 100, 0)
	if err != nil || len(got) != 10 || !bytes.Equal(got[9].Flat(), events[9].Data) {
		t.Errorf("Events: %d events, %v; want the ten whole", len(got), err)
	}
}
