package store_test

import (
	"context"
	"testing"

	"github.com/acpgate/acpgate/internal/testpg"
	"github.com/acpgate/acpgate/store"
	"github.com/acpgate/acpgate/store/storetest"
)

func TestPostgresPassesTheSharedSuite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openPostgres(t, testpg.Start(t)) })
}

// openPostgres opens a store on dsn, closed when t ends.
func openPostgres(t testing.TB, dsn string) *store.Postgres {
	t.Helper()
	p, err := store.OpenPostgres(context.Background(), store.PostgresOptions{DSN: dsn})
	if err != nil {
		t.Fatalf("OpenPostgres: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}
