package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acpgate/acpgate/store"
	"github.com/acpgate/acpgate/store/storetest"
)

func TestSQLite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openSQLite(t, t.TempDir()) })
}

func openSQLite(t *testing.T, dir string) *store.SQLite {
	t.Helper()
	s, err := store.OpenSQLite(dir)
	if err != nil {
		t.Fatalf("OpenSQLite: %v", err)
	}
	return s
}

func TestSQLiteFile(t *testing.T) {
	ctx := context.Background()

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
		if err := s.End(ctx, "t1", store.Event{Seq: 51, Data: []byte("ended")}, endedAt); err != nil {
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
		events, err := s.Events(ctx, "t2", 0, 1000)
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
		_, err := store.OpenSQLite(dir)
		if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "in use by another acpgate process") {
			t.Fatalf("second OpenSQLite: %v; want in use, naming %s", err, dir)
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
			t.Errorf("child's OpenSQLite did not report the directory in use:\n%s", out)
		}
	})

	t.Run("a file that is not a database fails the open and names it", func(t *testing.T) {
		dir := t.TempDir()
		db := filepath.Join(dir, "acpgate.db")
		if err := os.WriteFile(db, bytes.Repeat([]byte("not a database "), 1000), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := store.OpenSQLite(dir)
		if err == nil || !strings.Contains(err.Error(), db) || !strings.Contains(err.Error(), "not a usable database") {
			t.Fatalf("OpenSQLite of garbage: %v; want not a usable database, naming %s", err, db)
		}
		// The failed open must not keep the directory locked.
		if _, err := store.OpenSQLite(dir); err == nil || strings.Contains(err.Error(), "in use") {
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
		_, err = store.OpenSQLite(dir)
		if err == nil || !strings.Contains(err.Error(), db) || !strings.Contains(err.Error(), "not a usable database") {
			t.Fatalf("OpenSQLite of a damaged database: %v; want not a usable database, naming %s", err, db)
		}
	})

	t.Run("a directory that cannot be created fails the open and names it", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(file, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(file, "state")
		_, err := store.OpenSQLite(dir)
		if err == nil || !strings.Contains(err.Error(), dir) {
			t.Fatalf("OpenSQLite(%s): %v; want an error naming it", dir, err)
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
		_, err = store.OpenSQLite(dir)
		if err == nil || !strings.Contains(err.Error(), "newer") || !strings.Contains(err.Error(), "acpgate.db") {
			t.Fatalf("OpenSQLite of a newer schema: %v; want a refusal naming the file", err)
		}
	})

	t.Run("a full database fails the append and keeps the journal as it was", func(t *testing.T) {
		s, err := store.OpenSQLiteWith(t.TempDir(), store.SQLiteOptions{MaxPageCount: 64})
		if err != nil {
			t.Fatalf("OpenSQLiteWith: %v", err)
		}
		defer s.Close()
		if _, _, err := s.Begin(ctx, storetest.NewTurn("t1", "r1", 1, 0)); err != nil {
			t.Fatalf("Begin: %v", err)
		}
		if err := s.Started(ctx, "t1", "s1", storetest.Events(1, 1)[0]); err != nil {
			t.Fatalf("Started: %v", err)
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
			if seq > 64*4096/1000*2 {
				t.Fatalf("journaled %d KB in a database of 64 pages without an error", seq)
			}
		}
		t.Logf("Append to a full database: %v", full)
		if !strings.Contains(full.Error(), "full") || !strings.Contains(full.Error(), "acpgate.db") {
			t.Errorf("Append to a full database: %v; want it to say the database is full, naming it", full)
		}
		events, err := s.Events(ctx, "t1", 0, 1<<20)
		if err != nil {
			t.Fatalf("Events: %v", err)
		}
		if uint64(len(events)) != seq || events[len(events)-1].Seq != seq {
			t.Errorf("journal after the failed batch: %d events, want %d (the failed batch kept in part?)", len(events), seq)
		}
		if got, err := s.Get(ctx, "t1"); err != nil || got.LastSeq != seq {
			t.Errorf("LastSeq = %d, %v; want %d", got.LastSeq, err, seq)
		}
		if err := s.End(ctx, "t1", store.Event{Seq: seq + 1, Data: big}, time.Now()); err == nil {
			t.Log("End fitted in the full database")
		} else if errors.Is(err, store.ErrEnded) || errors.Is(err, store.ErrNotFound) {
			t.Errorf("End on a full database: %v", err)
		}
	})
}

// TestSQLiteOpenInChild is the child of "another process cannot open a
// directory in use": it opens the directory its parent holds and prints
// the result.
func TestSQLiteOpenInChild(t *testing.T) {
	dir := os.Getenv("ACPGATE_STORE_CHILD_DIR")
	if dir == "" {
		t.Skip("run by TestSQLiteFile in a child process")
	}
	s, err := store.OpenSQLite(dir)
	if err == nil {
		s.Close()
		fmt.Println("opened")
		return
	}
	fmt.Println(err)
}
