package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acpgate/acpgate/internal/store"
	"github.com/acpgate/acpgate/internal/store/sqlite"
	"github.com/acpgate/acpgate/internal/store/storetest"
)

// openJournalFiles counts this process's descriptors open on files in a
// SQLite store's journal directory.
func openJournalFiles(t *testing.T, dir string) int {
	t.Helper()
	journals := filepath.Join(dir, "journals") + string(filepath.Separator)
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd to count descriptors: %v", err)
	}
	n := 0
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(target, journals) {
			n++
		}
	}
	return n
}

func TestSQLiteRunningJournals(t *testing.T) {
	ctx := context.Background()

	t.Run("a running turn's files stay open between its commits and close at its end", func(t *testing.T) {
		dir := t.TempDir()
		s := openSQLite(t, dir)
		defer s.Close()
		startedTurn(t, s, "t1")
		for seq := uint64(2); seq < 20; seq += 6 {
			if err := s.Append(ctx, "t1", storetest.Events(seq, seq+5)); err != nil {
				t.Fatal(err)
			}
			if n := openJournalFiles(t, dir); n != 2 {
				t.Fatalf("after the commit up to seq %d, %d journal files are open; want its 2", seq+5, n)
			}
		}
		if err := s.End(ctx, "t1", nil, store.Event{Seq: 20, Data: []byte("ended")}, time.Now()); err != nil {
			t.Fatal(err)
		}
		if n := openJournalFiles(t, dir); n != 0 {
			t.Errorf("after the turn's end, %d journal files are open; want none", n)
		}
		events, err := s.Events(ctx, "t1", 0, 100, 0)
		if err != nil || !equalEvents(events[:19], storetest.Events(1, 19)) || string(events[19].Data) != "ended" {
			t.Errorf("the journal read back: %d events, %v", len(events), err)
		}
	})

	t.Run("closing the store closes the files of its running turns", func(t *testing.T) {
		dir := t.TempDir()
		s := openSQLite(t, dir)
		startedTurn(t, s, "t1")
		startedTurn(t, s, "t2")
		if n := openJournalFiles(t, dir); n != 4 {
			t.Fatalf("%d journal files open for two running turns; want 4", n)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if n := openJournalFiles(t, dir); n != 0 {
			t.Errorf("after Close, %d journal files are open; want none", n)
		}
	})

	t.Run("a begun turn's files are made ahead of its started event and closed with the store", func(t *testing.T) {
		dir := t.TempDir()
		s := openSQLite(t, dir)
		if _, _, err := s.Begin(ctx, storetest.NewTurn("t1", "", 1, 0)); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for openJournalFiles(t, dir) != 2 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if n := openJournalFiles(t, dir); n != 2 {
			t.Fatalf("%d journal files open for a begun turn; want its 2, made ahead", n)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if n := openJournalFiles(t, dir); n != 0 {
			t.Errorf("after Close, %d journal files are open; want none", n)
		}
	})

	t.Run("a begun turn's journal takes its started event and events as any other", func(t *testing.T) {
		dir := t.TempDir()
		s := openSQLite(t, dir)
		defer s.Close()
		startedTurn(t, s, "t1")
		if err := s.Append(ctx, "t1", storetest.Events(2, 3)); err != nil {
			t.Fatal(err)
		}
		events, err := s.Events(ctx, "t1", 0, 10, 0)
		if err != nil || !equalEvents(events, storetest.Events(1, 3)) {
			t.Errorf("the journal read back: %d events, %v", len(events), err)
		}
		if got, err := s.Get(ctx, "t1"); err != nil || got.LastSeq != 3 || got.SessionID != "s1" || got.Reserved != 3+store.ReserveAhead {
			t.Errorf("the record: %+v, %v", got, err)
		}
	})

	t.Run("turns past the bound of open journals are journaled whole, their files closed after each commit", func(t *testing.T) {
		dir := t.TempDir()
		s := openSQLite(t, dir)
		defer s.Close()
		turns := sqlite.MaxRunningJournals + 3
		for i := range turns {
			startedTurn(t, s, fmt.Sprintf("t%d", i))
		}
		for i := range turns {
			if err := s.Append(ctx, fmt.Sprintf("t%d", i), storetest.Events(2, 4)); err != nil {
				t.Fatal(err)
			}
		}
		if n := openJournalFiles(t, dir); n != 2*sqlite.MaxRunningJournals {
			t.Errorf("%d journal files open for %d running turns; want the bound's %d", n, turns, 2*sqlite.MaxRunningJournals)
		}
		for i := range turns {
			events, err := s.Events(ctx, fmt.Sprintf("t%d", i), 0, 10, 0)
			if err != nil || !equalEvents(events, storetest.Events(1, 4)) {
				t.Fatalf("turn t%d's journal: %d events, %v", i, len(events), err)
			}
		}
	})

	t.Run("a record another writer changed is left as it is, and the commit fails saying so", func(t *testing.T) {
		dir := t.TempDir()
		s := openSQLite(t, dir)
		defer s.Close()
		startedTurn(t, s, "t1")
		if err := s.Append(ctx, "t1", storetest.Events(2, 5)); err != nil {
			t.Fatal(err)
		}
		db, err := sqlOpen(filepath.Join(dir, "acpgate.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(`UPDATE turns SET last_seq = 9 WHERE id = 't1'`); err != nil {
			t.Fatal(err)
		}
		err = s.Append(ctx, "t1", storetest.Events(6, 7))
		if err == nil || !strings.Contains(err.Error(), "another process") {
			t.Fatalf("Append after another writer's change: %v; want it refused, naming the cause", err)
		}
		if got, err := s.Get(ctx, "t1"); err != nil || got.LastSeq != 9 {
			t.Errorf("the record after the refused commit: last seq %d, %v; want the other writer's 9", got.LastSeq, err)
		}
	})
}
