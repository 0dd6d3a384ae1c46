package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acpgate/acpgate/internal/store"
	"github.com/acpgate/acpgate/internal/store/postgres"
	"github.com/acpgate/acpgate/internal/store/storetest"
	"github.com/acpgate/acpgate/internal/testpg"
)

func TestAPostgresStoreWhoseDatabaseIsDownFailsAsUnavailableAtOnceAndServesOnceItIsBack(t *testing.T) {
	srv, dsn := testpg.StartOwn(t)
	s := openPostgres(t, dsn)
	// No deadline: the store's own bounds must end the call.
	ctx := context.Background()
	if _, _, err := s.Begin(ctx, storetest.NewTurn("t1", "", 1, 0)); err != nil {
		t.Fatal(err)
	}
	if err := srv.Halt(); err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() error{
		"Get":    func() error { _, err := s.Get(ctx, "t1"); return err },
		"Append": func() error { return s.Append(ctx, "t1", storetest.Events(2, 2)) },
		"List":   func() error { _, err := s.List(ctx, store.Filter{}, 10, nil); return err },
	} {
		began := time.Now()
		err := call()
		if !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s with the database down: %v, want ErrUnavailable", name, err)
		}
		if took := time.Since(began); took > postgres.DefaultStatementTimeout {
			t.Errorf("%s with the database down took %v", name, took)
		}
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Get(ctx, "t1")
	if err != nil || rec.ID != "t1" {
		t.Fatalf("Get once the database is back: %v, %v", rec, err)
	}
	// A refusal of the database's own is not an outage.
	if err := s.Append(ctx, "t1", storetest.Events(5, 5)); err == nil || errors.Is(err, store.ErrUnavailable) {
		t.Errorf("an append that skips seqs: %v, want a refusal that is not ErrUnavailable", err)
	}
}
