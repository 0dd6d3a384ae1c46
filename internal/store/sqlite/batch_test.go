package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/acpgate/acpgate/internal/store/sqlite"
)

func TestSQLiteBatchedWrites(t *testing.T) {
	ctx := context.Background()
	insert := func(k int) func(*sql.Tx) error {
		return func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO batched (k) VALUES (?)`, k)
			return err
		}
	}
	open := func(t *testing.T) (*sqlite.Store, func() []int) {
		dir := t.TempDir()
		s := openSQLite(t, dir)
		t.Cleanup(func() { s.Close() })
		create := func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `CREATE TABLE batched (k INTEGER PRIMARY KEY)`)
			return err
		}
		if err := errors.Join(s.BatchWrites(ctx, []func(*sql.Tx) error{create})...); err != nil {
			t.Fatal(err)
		}
		keys := func() []int {
			db, err := sqlOpen(filepath.Join(dir, "acpgate.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			rows, err := db.Query(`SELECT k FROM batched ORDER BY k`)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var ks []int
			for rows.Next() {
				var k int
				if err := rows.Scan(&k); err != nil {
					t.Fatal(err)
				}
				ks = append(ks, k)
			}
			return ks
		}
		return s, keys
	}

	t.Run("a write that fails in a shared transaction fails alone, and the others are made", func(t *testing.T) {
		s, keys := open(t)
		notUpdated := func(*sql.Tx) error { return sqlite.ErrNotUpdated }
		errs := s.BatchWrites(ctx, []func(*sql.Tx) error{insert(1), insert(1), notUpdated, insert(2)})
		if errs[0] != nil || errs[1] == nil || !errors.Is(errs[2], sqlite.ErrNotUpdated) || errs[3] != nil {
			t.Fatalf("results %v; want nil, the second insert's conflict, ErrNotUpdated, nil", errs)
		}
		if got := keys(); !slices.Equal(got, []int{1, 2}) {
			t.Errorf("rows %v; want [1 2]", got)
		}
	})

	t.Run("writes from many goroutines at once are each made once", func(t *testing.T) {
		s, keys := open(t)
		var wg sync.WaitGroup
		errs := make([]error, 50)
		for i := range errs {
			wg.Go(func() { errs[i] = errors.Join(s.BatchWrites(ctx, []func(*sql.Tx) error{insert(i)})...) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		if got := keys(); len(got) != 50 || got[0] != 0 || got[49] != 49 {
			t.Errorf("rows %v; want 0 to 49", got)
		}
	})

	t.Run("a write whose context has ended is not made", func(t *testing.T) {
		s, keys := open(t)
		ended, cancel := context.WithCancel(ctx)
		cancel()
		if err := errors.Join(s.BatchWrites(ended, []func(*sql.Tx) error{insert(1)})...); !errors.Is(err, context.Canceled) {
			t.Errorf("the write's result %v; want context.Canceled", err)
		}
		if got := keys(); len(got) != 0 {
			t.Errorf("rows %v; want none", got)
		}
	})
}
