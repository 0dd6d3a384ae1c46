package postgres

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
)

// migrations are the PostgreSQL store's schema versions, one SQL
// file each (NNNNN_what.sql), embedded so that the binary carries the
// schema it needs. Append only: a database records which versions ran, so
// a shipped file that is edited never runs again where it already ran.
//
//go:embed migrations/*.sql
var migrations embed.FS

// Why goose (github.com/pressly/goose/v3), of the maintained libraries:
// it runs each version in a transaction of its own and records it in that
// transaction, and PostgreSQL's DDL is transactional, so a version that
// fails leaves the database at the version before, to be run again after
// the fix. golang-migrate instead marks such a database dirty and waits
// for an operator to force a version. goose also reads the files from an
// fs.FS (the embedded ones) and takes a locker that holds one connection
// for the whole run, which is what a PostgreSQL advisory lock needs.
//
// The lock: replicas started together would otherwise each find the
// schema at version 0 and each try to create it. migrationLock takes
// pg_advisory_lock, which waits in the server: the replicas queue, the
// first migrates, the others find nothing to do, and none polls. The lock
// is a session lock, released at unlock or when the connection drops, so
// a replica killed while migrating does not leave the database locked.

// migrationLockID is the advisory lock key of the store's migrations
// (the bytes of "acpgate" and a version of the key, should it change).
const migrationLockID int64 = 0x6163706761746501

// migrationTimeout bounds the statements of a migration run, the wait for
// another replica's run included: longer than a statement of the
// gateway's may take, since a version may rewrite a large table.
const migrationTimeout = 5 * time.Minute

// migrationTable records which versions ran.
const migrationTable = "acpgate_schema_versions"

// migrate brings the schema up to the newest version this binary
// has, under migrationLock. A database whose schema is newer than this
// binary's is refused: an older binary does not know what a newer schema
// means to its rows.
func migrate(ctx context.Context, conn *pgx.ConnConfig) error {
	cfg := conn.Copy()
	setRuntimeParams(cfg, "acpgate-migrations", migrationTimeout)
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	files, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return err
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, db, files,
		goose.WithTableName(migrationTable),
		goose.WithSessionLocker(migrationLock{}),
		goose.WithDisableGlobalRegistry(true),
	)
	if err != nil {
		return err
	}
	if _, err := provider.Up(ctx); err != nil {
		return err
	}
	current, known, err := provider.GetVersions(ctx)
	if err != nil {
		return err
	}
	if current > known {
		return fmt.Errorf("the database has schema version %d, newer than this acpgate's %d: run a newer acpgate", current, known)
	}
	return nil
}

// migrationLock is goose's session locker on the advisory lock.
type migrationLock struct{}

func (migrationLock) SessionLock(ctx context.Context, conn *sql.Conn) error {
	_, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, migrationLockID)
	return err
}

func (migrationLock) SessionUnlock(ctx context.Context, conn *sql.Conn) error {
	var unlocked bool
	if err := conn.QueryRowContext(ctx, `SELECT pg_advisory_unlock($1)`, migrationLockID).Scan(&unlocked); err != nil {
		return err
	}
	if !unlocked {
		return errors.New("the migration lock was not held")
	}
	return nil
}
