package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"

	"github.com/acpgate/acpgate/internal/store"
)

// The SQLite store's schema versions, and the migrator that brings a
// database up to the newest.

// migrations create and evolve the schema; migration i brings the database
// from version i to i+1 (see Store.migrate). Append only: a database
// records which ran, so editing one that has shipped would leave old
// databases without it.
var migrations = []migration{
	sqlMigration(schemaV1),
	// Who started each turn: a caller sees only its own turns.
	sqlMigration(schemaV2),
	// Journals move from the events table to files (see journalFiles).
	moveJournalsToFiles,
	// Open sessions' records, so that sessions survive a restart.
	sqlMigration(schemaV4),
	// When each suspended session was suspended, for its retention.
	sqlMigration(schemaV5),
	// The journal files may keep an event without the bytes it repeats
	// (see stored.go). Nothing in the database changes: the version is
	// there so that an acpgate that cannot read such files refuses the
	// store instead of streaming its headers as events.
	func(context.Context, *sql.Tx, *journalFiles) error { return nil },
	// Each running turn's seq reservation, and the seqs a terminal
	// numbered above it skips (see store.Turn.Reserved and store.Store.End).
	sqlMigration(schemaV7),
	// Each turn's notification target, and the outbox its ending writes
	// (see store.Outbox).
	sqlMigration(schemaV8),
}

// schemaV1 is the first schema; until version 3 it kept each event of a
// journal as a row of events.
const schemaV1 = `CREATE TABLE turns (
		id          TEXT PRIMARY KEY,
		request_id  TEXT NOT NULL,
		attempt     INTEGER NOT NULL,
		agent       TEXT NOT NULL,
		session_id  TEXT NOT NULL,
		target      TEXT NOT NULL,
		prompt_hash BLOB,
		started_at  INTEGER NOT NULL, -- unix nanoseconds
		ended_at    INTEGER,          -- unix nanoseconds; NULL while running
		last_seq    INTEGER NOT NULL,
		terminal    BLOB
	);
	-- The idempotency key: one turn per (request id, attempt).
	CREATE UNIQUE INDEX turns_request ON turns (request_id, attempt) WHERE request_id <> '';
	-- List's order, unfiltered and by each filter.
	CREATE INDEX turns_order ON turns (started_at DESC, id DESC);
	CREATE INDEX turns_session ON turns (session_id, started_at DESC, id DESC);
	CREATE INDEX turns_agent ON turns (agent, started_at DESC, id DESC);
	-- DeleteEnded's cutoff, and Running at startup.
	CREATE INDEX turns_ended ON turns (ended_at) WHERE ended_at IS NOT NULL;
	CREATE INDEX turns_running ON turns (id) WHERE ended_at IS NULL;
	CREATE TABLE events (
		turn_id TEXT NOT NULL,
		seq     INTEGER NOT NULL,
		data    BLOB NOT NULL,
		PRIMARY KEY (turn_id, seq)
	) WITHOUT ROWID;`

// schemaV2 adds who started each turn.
const schemaV2 = `ALTER TABLE turns ADD COLUMN owner TEXT NOT NULL DEFAULT '';
	CREATE INDEX turns_owner ON turns (owner, started_at DESC, id DESC);`

// schemaV4 adds the records of open sessions (see Session).
const schemaV4 = `CREATE TABLE sessions (
		id             TEXT PRIMARY KEY,
		agent          TEXT NOT NULL,
		acp_session_id TEXT NOT NULL,
		cwd            TEXT NOT NULL,
		owner          TEXT NOT NULL,
		created_at     INTEGER NOT NULL, -- unix nanoseconds
		mode           TEXT NOT NULL,
		config_options TEXT NOT NULL     -- a JSON object, option id to value
	);`

// schemaV5 adds when a session was suspended (see Session.SuspendedAt);
// 0, zero time, while it is open and for the records of version 4.
const schemaV5 = `ALTER TABLE sessions ADD COLUMN suspended_at INTEGER NOT NULL DEFAULT 0; -- unix nanoseconds`

// schemaV7 adds a running turn's seq reservation (see store.Turn.Reserved), and
// how many seqs an ended turn's terminal skips after its last filed event
// (see store.Store.End): 0 for the records before it, whose seqs never skip.
const schemaV7 = `ALTER TABLE turns ADD COLUMN reserved_seq INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE turns ADD COLUMN skipped INTEGER NOT NULL DEFAULT 0;`

// schemaV8 adds where a turn's ending is announced (Turn.NotifyURL) and
// the outbox of announcements not yet delivered (see store.Outbox). A trigger
// writes a turn's notification in the statement that ends it, whichever
// statement that is (End, or the ending of a turn its gateway left
// running), so that the ending and its announcement are kept together or
// not at all. Times are unix nanoseconds; claimed_until 0 is unclaimed.
const schemaV8 = `ALTER TABLE turns ADD COLUMN notify_url TEXT NOT NULL DEFAULT '';
	CREATE TABLE notifications (
		turn_id       TEXT PRIMARY KEY,
		url           TEXT NOT NULL,
		created_at    INTEGER NOT NULL,
		due_at        INTEGER NOT NULL,
		attempts      INTEGER NOT NULL DEFAULT 0,
		claimed_by    TEXT NOT NULL DEFAULT '',
		claimed_until INTEGER NOT NULL DEFAULT 0
	) WITHOUT ROWID;
	CREATE INDEX notifications_due ON notifications (due_at);
	CREATE TRIGGER turns_notify AFTER UPDATE OF ended_at ON turns
	WHEN OLD.ended_at IS NULL AND NEW.ended_at IS NOT NULL AND NEW.notify_url <> ''
	BEGIN
		INSERT OR IGNORE INTO notifications (turn_id, url, created_at, due_at)
		VALUES (NEW.id, NEW.notify_url, NEW.ended_at, NEW.ended_at);
	END;`

// A migration changes the schema (and data) inside the transaction that
// records the new version.
type migration func(ctx context.Context, tx *sql.Tx, files *journalFiles) error

func sqlMigration(q string) migration {
	return func(ctx context.Context, tx *sql.Tx, _ *journalFiles) error {
		_, err := tx.ExecContext(ctx, q)
		return err
	}
}

// moveJournalsToFiles writes each turn's journaled events, but for an
// ended turn's terminal (which its record holds), to its journal files,
// and drops the events table. Files written by a migration that then
// fails are overwritten when it runs again: they start at count 0.
func moveJournalsToFiles(ctx context.Context, tx *sql.Tx, files *journalFiles) error {
	if _, err := tx.ExecContext(ctx, `ALTER TABLE turns ADD COLUMN journal_bytes INTEGER NOT NULL DEFAULT 0`); err != nil {
		return err
	}
	type turn struct {
		id    string
		count int64
	}
	var turns []turn
	rows, err := tx.QueryContext(ctx, `SELECT id, last_seq - (ended_at IS NOT NULL AND last_seq > 0) FROM turns`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var t turn
		if err := rows.Scan(&t.id, &t.count); err != nil {
			rows.Close()
			return err
		}
		turns = append(turns, t)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	const perRead = 1024
	for _, t := range turns {
		var size uint64
		for count := int64(0); count < t.count; {
			events, err := legacyEvents(ctx, tx, t.id, count, min(perRead, t.count-count))
			if err != nil {
				return err
			}
			if len(events) == 0 {
				return fmt.Errorf("turn %s: its record counts %d events, its journal has %d", t.id, t.count, count)
			}
			if size, err = files.write(t.id, uint64(count), size, batch{events}); err != nil {
				return err
			}
			count += int64(len(events))
		}
		if _, err := tx.ExecContext(ctx, `UPDATE turns SET journal_bytes = ? WHERE id = ?`, int64(size), t.id); err != nil {
			return err
		}
	}
	_, err = tx.ExecContext(ctx, `DROP TABLE events`)
	return err
}

// legacyEvents reads up to limit events after seq after from the events
// table of schema versions 1 and 2.
func legacyEvents(ctx context.Context, tx *sql.Tx, turnID string, after, limit int64) ([]store.Event, error) {
	rows, err := tx.QueryContext(ctx, `SELECT seq, data FROM events WHERE turn_id = ? AND seq > ? ORDER BY seq LIMIT ?`, turnID, after, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Event
	for rows.Next() {
		var e store.Event
		var seq int64
		if err := rows.Scan(&seq, &e.Data); err != nil {
			return nil, err
		}
		if want := after + int64(len(out)) + 1; seq != want {
			return nil, fmt.Errorf("turn %s: its journal has event %d where %d belongs", turnID, seq, want)
		}
		e.Seq = uint64(seq)
		out = append(out, e)
	}
	return out, rows.Err()
}

// migrate checks the database and brings its schema up to date. It runs
// quick_check first: a damaged file found at startup is one message naming
// it, where found later it would be a failed turn in the middle of a
// stream. quick_check reads the whole file, which at startup costs about
// a second per few hundred MB.
//
// The versions are goose's (github.com/pressly/goose/v3), as the postgres
// store's are: goose records each version in migrationTable in the
// transaction that runs it, so a version that fails leaves the database
// at the one before, to be run again after the fix. The database's
// user_version, which recorded the versions before goose did (see
// adoptUserVersion), is still set in each version's transaction: an
// acpgate from before goose reads only user_version, and must go on
// refusing a schema newer than its own rather than running its
// migrations again on it.
func (s *Store) migrate() error {
	ctx := context.Background()
	var check string
	if err := s.write.QueryRowContext(ctx, "PRAGMA quick_check(1)").Scan(&check); err != nil {
		return openError(s.path, err)
	}
	if check != "ok" {
		return fmt.Errorf("sqlite store: %s is not a usable database (damaged: %s); %s", s.path, check, moveAside(s.path))
	}
	if err := s.adoptUserVersion(ctx); err != nil {
		return err
	}
	provider, err := goose.NewProvider(goose.DialectSQLite3, s.write, nil,
		goose.WithTableName(migrationTable),
		goose.WithDisableGlobalRegistry(true),
		goose.WithGoMigrations(gooseMigrations(s.files)...),
	)
	if err != nil {
		return fmt.Errorf("sqlite store: %s: %w", s.path, err)
	}
	current, known, err := provider.GetVersions(ctx)
	if err != nil {
		return openError(s.path, err)
	}
	if current > known {
		return newerError(s.path, current)
	}
	applied, err := provider.Up(ctx)
	if err != nil {
		if partial, ok := errors.AsType[*goose.PartialError](err); ok && partial.Failed != nil {
			return fmt.Errorf("sqlite store: %s: migrating the schema to version %d: %w", s.path, partial.Failed.Source.Version, partial.Err)
		}
		return fmt.Errorf("sqlite store: %s: migrating the schema: %w", s.path, err)
	}
	if len(applied) > 0 {
		// Each version was a transaction of its own, each rewriting the
		// schema's pages: a new database's WAL held 170 KB of them, three
		// times what one transaction for all versions wrote. They go into
		// the database file now, not at the first checkpoint the turns'
		// writes reach, and the WAL starts empty.
		if _, err := s.write.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
			return openError(s.path, err)
		}
	}
	return nil
}

// migrationTable records which versions ran: goose's table, named as the
// postgres store's.
const migrationTable = "acpgate_schema_versions"

// gooseMigrations are migrations as goose runs them: version v is
// migrations[v-1] and the user_version it sets, in one transaction.
func gooseMigrations(files *journalFiles) []*goose.Migration {
	out := make([]*goose.Migration, len(migrations))
	for i, m := range migrations {
		version := i + 1
		out[i] = goose.NewGoMigration(int64(version), &goose.GoFunc{RunTx: func(ctx context.Context, tx *sql.Tx) error {
			if err := m(ctx, tx, files); err != nil {
				return err
			}
			// user_version lives in the file header and is part of the
			// transaction, as goose's record of the version is.
			_, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", version))
			return err
		}}, nil)
	}
	return out
}

// adoptUserVersion brings a database that an acpgate from before goose
// migrated under goose: such a database records its version only in
// user_version (migration i brought it from i to i+1, all in one
// transaction), and has no migrationTable. Versions 1 to user_version are
// recorded in migrationTable as goose would have recorded them, with its
// own statements, in one transaction; goose then runs the versions after
// them. Without it goose would find no versions recorded and run version
// 1 on tables that exist.
//
// A database made by goose has migrationTable, and a new one has neither
// it nor a version: both are left to goose. One whose user_version is
// newer than this acpgate's is refused here, before anything is written.
func (s *Store) adoptUserVersion(ctx context.Context) error {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return openError(s.path, err)
	}
	defer tx.Rollback()
	var version, tables int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return openError(s.path, err)
	}
	if version > len(migrations) {
		return newerError(s.path, int64(version))
	}
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`, migrationTable).Scan(&tables); err != nil {
		return openError(s.path, err)
	}
	if tables > 0 || version == 0 {
		return nil
	}
	versions, err := database.NewStore(database.DialectSQLite3, migrationTable)
	if err != nil {
		return fmt.Errorf("sqlite store: %s: %w", s.path, err)
	}
	if err := versions.CreateVersionTable(ctx, tx); err != nil {
		return fmt.Errorf("sqlite store: %s: recording schema version %d for goose: %w", s.path, version, err)
	}
	// Version 0 is goose's mark of a table it made.
	for v := 0; v <= version; v++ {
		if err := versions.Insert(ctx, tx, database.InsertRequest{Version: int64(v)}); err != nil {
			return fmt.Errorf("sqlite store: %s: recording schema version %d for goose: %w", s.path, version, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return openError(s.path, err)
	}
	return nil
}

// newerError refuses a database whose schema version is newer than this
// acpgate's: an older binary does not know what a newer schema means to
// its rows.
func newerError(path string, version int64) error {
	return fmt.Errorf("sqlite store: %s has schema version %d, newer than this acpgate's %d: run a newer acpgate, or use another state directory", path, version, len(migrations))
}
