package sqlite

import (
	"context"
	"database/sql"
)

// BatchWrites makes fs as the SQLite store makes its writes of turn
// records: in one transaction when no other batch is being made.
func (s *Store) BatchWrites(ctx context.Context, fs []func(*sql.Tx) error) []error {
	return s.writes.doAll(ctx, false, fs)
}

// ErrNotUpdated is a write's guarded update that changed nothing, for
// BatchWrites.
var ErrNotUpdated = errNotUpdated
