package sqlite_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acpgate/acpgate/internal/store"
	"github.com/acpgate/acpgate/internal/store/sqlite"
	"github.com/acpgate/acpgate/internal/store/storetest"
)

// userVersion8 is a state directory written by the acpgate whose migrator
// kept the schema's version in user_version alone, at version 8: an ended
// turn, one whose terminal and an event kept without its repeated bytes
// are in the journal files, a running one with a notification target, an
// ended one with its notification pending, and two session records.
const userVersion8 = "testdata/userversion8.tar.gz"

// unpack extracts a state directory from a gzipped tar into a new
// directory and returns it.
func unpack(t *testing.T, archive string) string {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return dir
		}
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, filepath.Clean(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(path, 0o700)
		case tar.TypeReg:
			var data []byte
			if data, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(path, data, 0o600)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// versions reads what a closed store's database records of its schema
// version: user_version, and the versions in goose's table.
func versions(t *testing.T, dir string) (userVersion int, recorded []int) {
	t.Helper()
	raw, err := sqlOpen(filepath.Join(dir, "acpgate.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if err := raw.QueryRow("PRAGMA user_version").Scan(&userVersion); err != nil {
		t.Fatal(err)
	}
	rows, err := raw.Query(`SELECT version_id FROM acpgate_schema_versions WHERE is_applied ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		recorded = append(recorded, v)
	}
	return userVersion, recorded
}

// everyVersion is goose's record of a database at version 8: its mark of
// the table (0), then each version once.
var everyVersion = []int{0, 1, 2, 3, 4, 5, 6, 7, 8}

func TestMigrations(t *testing.T) {
	ctx := context.Background()

	t.Run("a database the user_version migrator made opens with all it held, its versions recorded for goose", func(t *testing.T) {
		dir := unpack(t, userVersion8)
		s := openSQLite(t, dir)
		assertUserVersion8Contents(t, s)
		// It goes on: the running turn takes events and ends.
		if err := s.Append(ctx, "running", storetest.Events(4, 4)); err != nil {
			t.Fatalf("Append to the running turn: %v", err)
		}
		if err := s.End(ctx, "running", nil, store.Event{Seq: 5, Data: []byte("ended later")}, time.Unix(0, 5)); err != nil {
			t.Fatalf("End of the running turn: %v", err)
		}
		s.Close()
		if uv, recorded := versions(t, dir); uv != 8 || !slices.Equal(recorded, everyVersion) {
			t.Errorf("after the first open: user_version %d, goose's versions %v; want 8 and %v", uv, recorded, everyVersion)
		}
		// Opened again, as goose's now: nothing runs twice, nothing is lost.
		s = openSQLite(t, dir)
		defer s.Close()
		if events, err := s.Events(ctx, "running", 3, 10, 0); err != nil || len(events) != 2 || string(events[1].Data) != "ended later" {
			t.Errorf("the running turn's journal after opening again: %v, %v", events, err)
		}
		s.Close()
		if uv, recorded := versions(t, dir); uv != 8 || !slices.Equal(recorded, everyVersion) {
			t.Errorf("after opening again: user_version %d, goose's versions %v; want 8 and %v", uv, recorded, everyVersion)
		}
	})

	t.Run("a new database records every version for goose and in user_version", func(t *testing.T) {
		dir := t.TempDir()
		openSQLite(t, dir).Close()
		if uv, recorded := versions(t, dir); uv != 8 || !slices.Equal(recorded, everyVersion) {
			t.Errorf("user_version %d, goose's versions %v; want 8 and %v", uv, recorded, everyVersion)
		}
	})

	t.Run("a database goose recorded at a newer version is refused", func(t *testing.T) {
		dir := t.TempDir()
		openSQLite(t, dir).Close()
		raw, err := sqlOpen(filepath.Join(dir, "acpgate.db"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := raw.Exec(`INSERT INTO acpgate_schema_versions (version_id, is_applied) VALUES (99, 1)`); err != nil {
			t.Fatal(err)
		}
		raw.Close()
		_, err = sqlite.Open(dir)
		if err == nil || !strings.Contains(err.Error(), "newer") || !strings.Contains(err.Error(), "99") {
			t.Fatalf("Open of a database at goose version 99: %v; want a refusal naming it newer", err)
		}
	})
}

// assertUserVersion8Contents checks that s holds what userVersion8 was
// written with.
func assertUserVersion8Contents(t *testing.T, s *sqlite.Store) {
	t.Helper()
	ctx := context.Background()
	ended, err := s.Get(ctx, "ended")
	if err != nil || ended.Running() || ended.LastSeq != 6 || string(ended.Terminal) != "the end" || ended.RequestID != "r-ended" {
		t.Errorf("ended: %+v, %v", ended, err)
	}
	events, err := s.Events(ctx, "ended", 0, 100, 0)
	if want := append(storetest.Events(1, 5), store.Event{Seq: 6, Data: []byte("the end")}); err != nil || !equalEvents(events, want) {
		t.Errorf("ended's journal: %v, %v; want %v", events, err, want)
	}
	large, err := s.Get(ctx, "large")
	if err != nil || !bytes.Equal(large.Terminal, bytes.Repeat([]byte("t"), 100<<10)) {
		t.Errorf("large's terminal, kept in its files: %d bytes, %v", len(large.Terminal), err)
	}
	text := bytes.Repeat([]byte("x"), 1000)
	if events, err := s.Events(ctx, "large", 1, 1, 0); err != nil || len(events) != 1 || !bytes.Equal(events[0].Flat(), slices.Concat([]byte("head"), text, text)) {
		t.Errorf("large's event kept without its repeat: %v", err)
	}
	running, err := s.Running(ctx)
	if err != nil || len(running) != 1 || running[0].ID != "running" || running[0].LastSeq != 3 || running[0].NotifyURL == "" || running[0].Reserved != 3+store.ReserveAhead {
		t.Errorf("Running: %+v, %v; want the running turn at seq 3 with its target and reservation", running, err)
	}
	notes, err := s.ClaimNotifications(ctx, "test", time.Now(), time.Minute, 10)
	if err != nil || len(notes) != 1 || notes[0].TurnID != "notified" {
		t.Errorf("the pending notifications: %+v, %v; want notified's", notes, err)
	}
	sessions, err := s.Sessions(ctx)
	if err != nil || len(sessions) != 2 || sessions[0].Mode != "architect" || sessions[0].ConfigOptions["model"] != "large" ||
		!sessions[0].SuspendedAt.Equal(time.Unix(0, 1772366400000000004)) || sessions[1].ID != "s2" {
		t.Errorf("the session records: %+v, %v", sessions, err)
	}
}
