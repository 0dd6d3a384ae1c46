package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// SQLite is a Store in a directory, so that turns and their journals
// outlive the gateway process: the turns' records in one SQLite database
// file, dir/acpgate.db, and each turn's events in files under
// dir/journals (see journalFiles), committed by the record.
//
// Durability: the database runs in WAL mode with synchronous=NORMAL. A
// committed write survives the gateway process crashing or being killed;
// a power loss or kernel crash may lose the last commits before the WAL
// was synced (never corrupting the database), and may leave a journal
// file shorter than its record, which Events then reports as damaged. Syncing every commit
// (synchronous=FULL) would cost an fsync per batch of events, and the
// gateway already loses a stream's live events on such a crash.
//
// A directory is used by one gateway at a time: OpenSQLite takes an
// exclusive flock on dir/lock, held until Close. Two gateways writing one
// database would each believe it owns the running turns and mark the
// other's turns ended at its start.
type SQLite struct {
	path string // the database file, for errors
	// write has one connection: SQLite allows one writer at a time, and
	// queueing writers in the pool is cheaper and fairer than having them
	// spin on SQLITE_BUSY. Its transactions begin IMMEDIATE, so a
	// transaction that reads and then writes (Begin's check and insert)
	// holds the write lock from its first read.
	write *sql.DB
	// read has a few query-only connections: in WAL mode readers see the
	// last commit without waiting for the writer, so a replay does not
	// queue behind a busy turn's appends.
	read *sql.DB
	// writeStmts and readStmts keep the statements of a turn's life
	// prepared.
	writeStmts, readStmts *stmtCache
	lock                  *os.File
	files                 *journalFiles
	running               runningJournals
	damaged               []string // DamagedTurns; set by Open
}

// SQLiteOptions tunes OpenSQLiteWith. The zero value is what OpenSQLite uses.
type SQLiteOptions struct {
	// MaxPageCount, when positive, caps the database at that many pages
	// on every connection, so that tests can fill it and see that a full
	// database fails writes rather than losing events.
	MaxPageCount int
}

// sqliteFile and sqliteLock are the names OpenSQLite uses inside its dir.
const (
	sqliteFile = "acpgate.db"
	sqliteLock = "lock"
	// readConns bounds concurrent readers (replays, listings); more
	// would only contend for the two cores a small gateway host has.
	readConns = 4
)

// migrations create and evolve the schema; migration i brings the database
// from user_version i to i+1. Append only: a database records how many ran,
// so editing one that has shipped would leave old databases without it.
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
	// numbered above it skips (see Turn.Reserved and Store.End).
	sqlMigration(schemaV7),
	// Each turn's notification target, and the outbox its ending writes
	// (see Outbox).
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

// schemaV7 adds a running turn's seq reservation (see Turn.Reserved), and
// how many seqs an ended turn's terminal skips after its last filed event
// (see Store.End): 0 for the records before it, whose seqs never skip.
const schemaV7 = `ALTER TABLE turns ADD COLUMN reserved_seq INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE turns ADD COLUMN skipped INTEGER NOT NULL DEFAULT 0;`

// schemaV8 adds where a turn's ending is announced (Turn.NotifyURL) and
// the outbox of announcements not yet delivered (see Outbox). A trigger
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
func legacyEvents(ctx context.Context, tx *sql.Tx, turnID string, after, limit int64) ([]Event, error) {
	rows, err := tx.QueryContext(ctx, `SELECT seq, data FROM events WHERE turn_id = ? AND seq > ? ORDER BY seq LIMIT ?`, turnID, after, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var e Event
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

// ErrInUse is OpenSQLite's error for a directory whose store another
// process holds: the caller says how to give this one a directory of its
// own.
var ErrInUse = errors.New("in use by another acpgate process")

// OpenSQLite opens (creating if need be) the store in dir.
func OpenSQLite(dir string) (*SQLite, error) {
	return OpenSQLiteWith(dir, SQLiteOptions{})
}

// OpenSQLiteWith is OpenSQLite with options.
func OpenSQLiteWith(dir string, opts SQLiteOptions) (_ *SQLite, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("sqlite store: creating its directory %s: %w", dir, err)
	}
	lockPath := filepath.Join(dir, sqliteLock)
	lock, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sqlite store: opening its lock file: %w", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("sqlite store: %s is %w (it holds %s)", dir, ErrInUse, lockPath)
		}
		return nil, fmt.Errorf("sqlite store: locking %s: %w", lockPath, err)
	}
	s := &SQLite{path: filepath.Join(dir, sqliteFile), lock: lock}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if err := keepUnclaimedJournals(dir, s.path); err != nil {
		return nil, err
	}
	if s.files, err = newJournalFiles(dir); err != nil {
		return nil, fmt.Errorf("sqlite store: %w", err)
	}

	params := url.Values{}
	params.Add("_busy_timeout", "10000")
	params.Add("_txlock", "immediate")
	if opts.MaxPageCount > 0 {
		params.Add("_pragma", fmt.Sprintf("max_page_count(%d)", opts.MaxPageCount))
	}
	readParams := url.Values{"_query_only": {"1"}}
	for k, v := range params {
		readParams[k] = v
	}
	params.Add("_journal_mode", "WAL")
	params.Add("_synchronous", "NORMAL")
	// A file: URI, so that a '?' or '#' in the path stays part of the path.
	uri := "file:" + (&url.URL{Path: s.path}).EscapedPath() + "?"
	if s.write, err = sql.Open("sqlite", uri+params.Encode()); err != nil {
		return nil, s.openError(err)
	}
	s.write.SetMaxOpenConns(1)
	s.write.SetConnMaxIdleTime(0)
	if err := s.migrate(); err != nil {
		return nil, err
	}
	if err := s.sweep(); err != nil {
		return nil, err
	}
	if s.read, err = sql.Open("sqlite", uri+readParams.Encode()); err != nil {
		return nil, s.openError(err)
	}
	s.read.SetMaxOpenConns(readConns)
	s.read.SetMaxIdleConns(readConns)
	ctx := context.Background()
	if s.writeStmts, err = newStmtCache(ctx, s.write, sqliteWriteStmts); err != nil {
		return nil, s.openError(err)
	}
	if s.readStmts, err = newStmtCache(ctx, s.read, sqliteReadStmts); err != nil {
		return nil, s.openError(err)
	}
	return s, nil
}

// openError words a failure to open or check the database: a file that is
// not a database, or is damaged, is named as such, since the fix (move it
// aside, restore a backup) is the operator's.
func (s *SQLite) openError(err error) error {
	if code, ok := sqliteCode(err); ok && (code == sqlite3.SQLITE_NOTADB || code == sqlite3.SQLITE_CORRUPT) {
		return fmt.Errorf("sqlite store: %s is not a usable database (damaged, or not a SQLite file): %w; %s", s.path, err, moveAside(s.path))
	}
	return fmt.Errorf("sqlite store: opening %s: %w", s.path, err)
}

// moveAside is what to do about a database that does not open.
func moveAside(path string) string {
	return fmt.Sprintf("to start anyway, stop acpgate, move %[1]s (and %[1]s-wal, %[1]s-shm if present) aside, keeping it to repair or restore, and start again: "+
		"a new, empty database is made, and the turns' journals in %[2]s stay, set aside in %[2]s.unclaimed-<time> rather than deleted",
		path, filepath.Join(filepath.Dir(path), journalsDir))
}

// keepUnclaimedJournals sets the journals directory aside, renamed
// journals.unclaimed-<UTC time>, when the database at dbPath is about to be
// made afresh and journals are already there: a database moved aside
// (see moveAside) leaves them, and the new database, which knows none of
// their turns, would otherwise delete them all at its first sweep. Set
// aside, they go back with the old database if it is repaired.
func keepUnclaimedJournals(dir, dbPath string) error {
	if _, err := os.Stat(dbPath); !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	journals := filepath.Join(dir, journalsDir)
	entries, err := os.ReadDir(journals)
	if err != nil || len(entries) == 0 {
		return nil // none (or none readable: newJournalFiles reports it)
	}
	aside := journals + ".unclaimed-" + time.Now().UTC().Format("20060102T150405Z")
	if err := os.Rename(journals, aside); err != nil {
		return fmt.Errorf("sqlite store: setting aside the journals a new database would not know: %w", err)
	}
	return nil
}

// migrate checks the database and brings its schema up to date. It runs
// quick_check first: a damaged file found at startup is one message naming
// it, where found later it would be a failed turn in the middle of a
// stream. quick_check reads the whole file, which at startup costs about
// a second per few hundred MB.
func (s *SQLite) migrate() error {
	ctx := context.Background()
	var check string
	if err := s.write.QueryRowContext(ctx, "PRAGMA quick_check(1)").Scan(&check); err != nil {
		return s.openError(err)
	}
	if check != "ok" {
		return fmt.Errorf("sqlite store: %s is not a usable database (damaged: %s); %s", s.path, check, moveAside(s.path))
	}
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return s.openError(err)
	}
	defer tx.Rollback()
	var version int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return s.openError(err)
	}
	if version > len(migrations) {
		return fmt.Errorf("sqlite store: %s has schema version %d, newer than this acpgate's %d: run a newer acpgate, or use another state directory", s.path, version, len(migrations))
	}
	for v := version; v < len(migrations); v++ {
		if err := migrations[v](ctx, tx, s.files); err != nil {
			return fmt.Errorf("sqlite store: %s: migrating the schema to version %d: %w", s.path, v+1, err)
		}
	}
	// user_version lives in the file header and is part of the
	// transaction: a migration that fails leaves the version it found.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", len(migrations))); err != nil {
		return s.openError(err)
	}
	if err := tx.Commit(); err != nil {
		return s.openError(err)
	}
	return nil
}

// sweep deletes journal files whose turn is gone: DeleteEnded removes a
// turn's files after its transaction commits, and a crash in between
// keeps them. It also notes the turns whose files are missing or shorter
// than their records say (DamagedTurns): a stat per turn with files, so
// that the start-up log names them before a caller finds them one by one.
func (s *SQLite) sweep() error {
	rows, err := s.write.QueryContext(context.Background(), `SELECT id, journal_bytes FROM turns`)
	if err != nil {
		return s.openError(err)
	}
	defer rows.Close()
	known := map[string]bool{}
	for rows.Next() {
		var id string
		var size int64
		if err := rows.Scan(&id, &size); err != nil {
			return s.openError(err)
		}
		known[s.files.name(id)] = true
		if size > 0 && !s.files.whole(id, size) {
			s.damaged = append(s.damaged, id)
		}
	}
	if err := rows.Err(); err != nil {
		return s.openError(err)
	}
	if err := s.files.sweep(func(name string) bool { return known[name] }); err != nil {
		return fmt.Errorf("sqlite store: deleting the journals of deleted turns: %w", err)
	}
	return nil
}

// DamagedTurns are the turns whose journal files were found missing or
// shorter than their records say when the store was opened; reading their
// journals fails with ErrDamaged.
func (s *SQLite) DamagedTurns() []string { return s.damaged }

// queryIDs runs a query of one text column and returns its values.
func queryIDs(ctx context.Context, db interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, q string, args ...any) ([]string, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

var _ Store = (*SQLite)(nil)

// turnColumns are a turn record's columns, in scanTurn's order.
const turnColumns = `id, request_id, attempt, agent, session_id, target, prompt_hash, started_at, ended_at, last_seq, terminal, owner`

// selectTurn is what scanTurn reads: the record and where its journal
// files end.
const selectTurn = `SELECT ` + turnColumns + `, journal_bytes, reserved_seq, notify_url FROM turns`

type rowScanner interface{ Scan(dest ...any) error }

// scannedTurn is a record as read, before a terminal kept in the journal
// files is read from them (see SQLite.complete).
type scannedTurn struct {
	Turn
	size int64 // journal_bytes
}

func scanTurn(r rowScanner) (scannedTurn, error) {
	var t scannedTurn
	var startedAt int64
	var endedAt sql.NullInt64
	var lastSeq, reserved int64
	if err := r.Scan(&t.ID, &t.RequestID, &t.Attempt, &t.Agent, &t.SessionID, &t.Target, &t.PromptHash,
		&startedAt, &endedAt, &lastSeq, &t.Terminal, &t.Owner, &t.size, &reserved, &t.NotifyURL); err != nil {
		return scannedTurn{}, err
	}
	t.Reserved = uint64(reserved)
	t.StartedAt = time.Unix(0, startedAt)
	if endedAt.Valid {
		t.EndedAt = time.Unix(0, endedAt.Int64)
	}
	t.LastSeq = uint64(lastSeq)
	return t, nil
}

// inlineTerminal is the largest terminal the record holds itself. A larger
// one (a completed turn's outcome repeats its whole answer, twice) goes to
// the journal files as the last event: bound into one SQLite transaction
// it was held several times over in the driver's and SQLite's memory, so
// a 156 MiB answer cost the gateway gigabytes.
const inlineTerminal = 64 << 10

// complete reads the terminal of an ended turn whose record does not hold
// it from its journal files.
func (s *SQLite) complete(t scannedTurn) (Turn, error) {
	if t.Running() || t.Terminal != nil {
		return t.Turn, nil
	}
	events, err := s.files.read(t.ID, t.LastSeq-1, 1, uint64(t.size), 0)
	if err != nil {
		return Turn{}, fmt.Errorf("reading the terminal of turn %s: %w", t.ID, err)
	}
	t.Terminal = events[0].Flat()
	return t.Turn, nil
}

func (s *SQLite) Begin(ctx context.Context, t Turn) (Turn, bool, error) {
	var existing Turn
	created := false
	err := s.inTx(ctx, "begin turn "+t.ID, func(tx *sql.Tx) error {
		if t.RequestID != "" {
			latest, err := scanTurn(s.writeStmts.queryRow(ctx, tx, sqlLatest, t.RequestID))
			if err == nil && latest.Attempt >= t.Attempt {
				existing, err = s.complete(latest)
				return err
			}
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		_, err := s.writeStmts.exec(ctx, tx, sqlInsertTurn,
			t.ID, t.RequestID, t.Attempt, t.Agent, t.SessionID, t.Target, NonNilBytes(t.PromptHash), t.StartedAt.UnixNano(), t.Owner, BeginReserved, t.NotifyURL)
		created = err == nil
		return err
	})
	return existing, created, err
}

func (s *SQLite) Started(ctx context.Context, turnID, sessionID string, started Event) error {
	return s.journal(ctx, "journal the start of turn "+turnID, turnID, journalWrite{events: []Event{started}, sessionID: &sessionID})
}

func (s *SQLite) Append(ctx context.Context, turnID string, events []Event) error {
	if len(events) == 0 {
		// Nothing to journal, but the caller still learns of a turn
		// that ended or never was (without reading its terminal, which
		// may be in the files).
		var ended bool
		err := s.readStmts.queryRow(ctx, nil, sqlEnded, turnID).Scan(&ended)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return ErrNotFound
		case err != nil:
			return s.opError("journal events of turn "+turnID, err)
		case ended:
			return ErrEnded
		}
		return nil
	}
	return s.journal(ctx, "journal events of turn "+turnID, turnID, journalWrite{events: events})
}

func (s *SQLite) End(ctx context.Context, turnID string, rest []Event, terminal Event, endedAt time.Time) error {
	return s.journal(ctx, "end turn "+turnID, turnID, journalWrite{events: rest, terminal: &terminal, endedAt: endedAt.UnixNano()})
}

// journalWrite is one commit of a turn's journal.
type journalWrite struct {
	events    []Event // the events to its files, following the last journaled one
	terminal  *Event  // the terminal, when the commit ends the turn
	endedAt   int64   // unix nanoseconds, with terminal
	sessionID *string // the turn's session, with its started event
}

// journal commits w to a turn's journal: its events to the turn's files,
// then one guarded UPDATE of its record, which sets last_seq,
// journal_bytes and the reservation (see Turn.Reserved), or the ending,
// and changes the record only while it is running and says what the
// store last committed (see sqlJournalCommit).
func (s *SQLite) journal(ctx context.Context, op, turnID string, w journalWrite) error {
	r := &s.running
	r.mu.Lock()
	j, err := r.get(ctx, s, turnID)
	if err != nil {
		r.mu.Unlock()
		return s.opError(op, err)
	}
	ends := w.terminal != nil
	before, after, err := s.commitJournal(ctx, j, turnID, w)
	r.done(turnID, j, err == nil && !ends)
	r.mu.Unlock()
	if err != nil {
		return s.opError(op, err)
	}
	s.files.settle(turnID, before, after, ends)
	return nil
}

// commitJournal is journal's write and update, which advance j; r.mu is
// held. before and after are the data file's committed size before and
// after it.
//
// The terminal is kept once: in the record when it is small (Get and List
// read it there), else as the journal files' last event, the record's
// terminal then NULL. One numbered above the reservation (see Store.End)
// is kept in the record with the seqs it skips (skipped), so that the
// files stay numbered by position.
func (s *SQLite) commitJournal(ctx context.Context, j *runningJournal, turnID string, w journalWrite) (before, after uint64, err error) {
	prev := j.lastSeq
	for _, e := range w.events {
		if e.Seq != prev+1 {
			return 0, 0, fmt.Errorf("event seq %d does not follow %d", e.Seq, prev)
		}
		prev++
	}
	filed, last, reserved := batch{w.events}, prev, prev+ReserveAhead
	update, set := sqlJournalCommit, []any{int64(reserved)}
	switch t := w.terminal; {
	case t != nil:
		if err := TerminalFits(t.Seq, prev, j.reserved, len(w.events) == 0); err != nil {
			return 0, 0, err
		}
		last, reserved = t.Seq, j.reserved
		if skipped := t.Seq - prev - 1; skipped == 0 && t.Len() > inlineTerminal {
			filed = batch{w.events, {*t}}
			update, set = sqlJournalEndInFiles, []any{w.endedAt}
		} else {
			update, set = sqlJournalEndInRecord, []any{w.endedAt, NonNilBytes(t.Flat()), int64(skipped)}
		}
	case w.sessionID != nil:
		update, set = sqlJournalStart, append(set, *w.sessionID)
	}
	newSize := j.size
	if filed.len() > 0 {
		if newSize, err = s.files.writeTo(j.w, j.lastSeq, j.size, filed); err != nil {
			return 0, 0, err
		}
	}
	args := append([]any{int64(last), int64(newSize)}, set...)
	args = append(args, turnID, int64(j.lastSeq))
	res, err := s.writeStmts.exec(ctx, nil, update, args...)
	if err != nil {
		return 0, 0, err
	}
	if n, err := res.RowsAffected(); err != nil {
		return 0, 0, err
	} else if n != 1 {
		return 0, 0, s.running.why(ctx, s, turnID, j.lastSeq)
	}
	before = j.size
	j.lastSeq, j.size, j.reserved = last, newSize, reserved
	return before, newSize, nil
}

// inTx runs f in a write transaction and commits it. Errors other than
// ErrNotFound and ErrEnded get the database's path and op.
func (s *SQLite) inTx(ctx context.Context, op string, f func(*sql.Tx) error) error {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return s.opError(op, err)
	}
	if err := f(tx); err != nil {
		tx.Rollback()
		return s.opError(op, err)
	}
	if err := tx.Commit(); err != nil {
		return s.opError(op, err)
	}
	return nil
}

// opError gives err the store's context, and says so plainly when the
// database or its disk is full: that is the one an operator can act on.
func (s *SQLite) opError(op string, err error) error {
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrEnded) {
		return err
	}
	if code, ok := sqliteCode(err); ok && code == sqlite3.SQLITE_FULL {
		return fmt.Errorf("sqlite store %s: %s: the database or its disk is full: %w", s.path, op, err)
	}
	if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) || errors.Is(err, unix.EFBIG) {
		return fmt.Errorf("sqlite store %s: %s: the disk is full, or a file reached its size limit: %w", s.path, op, err)
	}
	return fmt.Errorf("sqlite store %s: %s: %w", s.path, op, err)
}

// sqliteCode is err's primary SQLite result code.
func sqliteCode(err error) (int, bool) {
	var e *sqlite.Error
	if !errors.As(err, &e) {
		return 0, false
	}
	return e.Code() & 0xff, true
}

func (s *SQLite) Get(ctx context.Context, turnID string) (Turn, error) {
	t, err := scanTurn(s.readStmts.queryRow(ctx, nil, sqlGet, turnID))
	if errors.Is(err, sql.ErrNoRows) {
		return Turn{}, ErrNotFound
	}
	if err == nil {
		var done Turn
		if done, err = s.complete(t); err == nil {
			return done, nil
		}
	}
	return Turn{}, s.opError("get turn "+turnID, err)
}

func (s *SQLite) Extent(ctx context.Context, turnID string) (uint64, bool, error) {
	var lastSeq int64
	var ended bool
	err := s.readStmts.queryRow(ctx, nil, sqlExtent, turnID).Scan(&lastSeq, &ended)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, false, ErrNotFound
	case err != nil:
		return 0, false, s.opError("read the extent of turn "+turnID, err)
	}
	return uint64(lastSeq), ended, nil
}

func (s *SQLite) Owner(ctx context.Context, turnID string) (string, error) {
	var owner string
	err := s.readStmts.queryRow(ctx, nil, sqlOwner, turnID).Scan(&owner)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", ErrNotFound
	case err != nil:
		return "", s.opError("read the owner of turn "+turnID, err)
	}
	return owner, nil
}

func (s *SQLite) Latest(ctx context.Context, requestID string) (Turn, error) {
	if requestID == "" {
		return Turn{}, ErrNotFound
	}
	t, err := scanTurn(s.readStmts.queryRow(ctx, nil, sqlLatest, requestID))
	if errors.Is(err, sql.ErrNoRows) {
		return Turn{}, ErrNotFound
	}
	if err == nil {
		var done Turn
		if done, err = s.complete(t); err == nil {
			return done, nil
		}
	}
	return Turn{}, s.opError("find request "+requestID, err)
}

func (s *SQLite) List(ctx context.Context, f Filter, limit int, from *Position) ([]Turn, error) {
	if limit <= 0 {
		return nil, nil
	}
	var where []string
	var args []any
	if f.SessionID != "" {
		where, args = append(where, "session_id = ?"), append(args, f.SessionID)
	}
	if f.Agent != "" {
		where, args = append(where, "agent = ?"), append(args, f.Agent)
	}
	if f.Owner != nil {
		where, args = append(where, "owner = ?"), append(args, *f.Owner)
	}
	if from != nil {
		// Strictly after from in List's order; ids are compared as
		// bytes, as ComparePositions does.
		where = append(where, "(started_at < ? OR (started_at = ? AND id < ?))")
		n := from.StartedAt.UnixNano()
		args = append(args, n, n, from.ID)
	}
	q := selectTurn
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY started_at DESC, id DESC LIMIT ?`
	return s.queryTurns(ctx, "list turns", q, append(args, limit)...)
}

func (s *SQLite) Running(ctx context.Context) ([]Turn, error) {
	return s.queryTurns(ctx, "list running turns", selectTurn+` WHERE ended_at IS NULL`)
}

func (s *SQLite) queryTurns(ctx context.Context, op, q string, args ...any) ([]Turn, error) {
	rows, err := s.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, s.opError(op, err)
	}
	defer rows.Close()
	var out []Turn
	for rows.Next() {
		t, err := scanTurn(rows)
		if err != nil {
			return nil, s.opError(op, err)
		}
		done, err := s.complete(t)
		if err != nil {
			return nil, s.opError(op, err)
		}
		out = append(out, done)
	}
	if err := rows.Err(); err != nil {
		return nil, s.opError(op, err)
	}
	return out, nil
}

func (s *SQLite) Events(ctx context.Context, turnID string, afterSeq uint64, limit, maxBytes int) ([]Event, error) {
	op := "read the journal of turn " + turnID
	var lastSeq, size, skipped int64
	var ended, terminalInFiles bool
	err := s.readStmts.queryRow(ctx, nil, sqlEventsRecord, turnID).Scan(&lastSeq, &ended, &size, &terminalInFiles, &skipped)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, s.opError(op, err)
	}
	last := uint64(lastSeq)
	if limit <= 0 || afterSeq >= last {
		return nil, nil
	}
	// The files hold every event but an ended turn's terminal, unless it
	// was too large for the record; a terminal in the record may skip
	// seqs after them.
	inFiles := last
	if ended && !terminalInFiles {
		inFiles -= 1 + uint64(skipped)
	}
	var out []Event
	if afterSeq < inFiles {
		n := min(uint64(limit), inFiles-afterSeq)
		if out, err = s.files.read(turnID, afterSeq, n, uint64(size), maxBytes); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				// Deleted since the record was read.
				if _, gone := s.Get(ctx, turnID); gone != nil {
					return nil, gone
				}
			}
			return nil, s.opError(op, err)
		}
	}
	if ended && !terminalInFiles && len(out) < limit && afterSeq+uint64(len(out)) >= inFiles {
		terminal := Event{Seq: last}
		err := s.readStmts.queryRow(ctx, nil, sqlTerminal, turnID).Scan(&terminal.Data)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, ErrNotFound
		}
		if err != nil {
			return nil, s.opError(op, err)
		}
		if len(out) == 0 || maxBytes <= 0 || dataSize(out)+len(terminal.Data) <= maxBytes {
			out = append(out, terminal)
		}
	}
	return out, nil
}

// dataSize is the bytes of events' data.
func dataSize(events []Event) int {
	size := 0
	for _, e := range events {
		size += len(e.Data)
	}
	return size
}

// deleteBatch bounds how many turns one DeleteEnded transaction deletes:
// the write lock is held for the transaction, and running turns' appends
// wait for it.
const deleteBatch = 100

// DeleteEnded deletes the records in transactions of deleteBatch turns,
// and each batch's journal files once its transaction has committed (a
// crash in between leaves files that the next OpenSQLite sweeps).
func (s *SQLite) DeleteEnded(ctx context.Context, before time.Time) (int, error) {
	cutoff := before.UnixNano()
	total := 0
	for {
		var ids []string
		err := s.inTx(ctx, "delete ended turns", func(tx *sql.Tx) error {
			var err error
			if ids, err = queryIDs(ctx, tx, `SELECT id FROM turns WHERE ended_at < ? ORDER BY ended_at, id LIMIT ?`, cutoff, deleteBatch); err != nil {
				return err
			}
			for _, id := range ids {
				if _, err := tx.ExecContext(ctx, `DELETE FROM turns WHERE id = ?`, id); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return total, err
		}
		total += len(ids)
		var errs []error
		for _, id := range ids {
			errs = append(errs, s.files.remove(id))
		}
		if err := errors.Join(errs...); err != nil {
			return total, fmt.Errorf("sqlite store %s: deleting the journal files of ended turns: %w", s.path, err)
		}
		if len(ids) < deleteBatch {
			return total, nil
		}
	}
}

// Close closes the database and releases the directory for another
// gateway.
func (s *SQLite) Close() error {
	var errs []error
	for _, c := range []*stmtCache{s.readStmts, s.writeStmts} {
		if c != nil {
			errs = append(errs, c.close())
		}
	}
	for _, db := range []*sql.DB{s.read, s.write} {
		if db != nil {
			errs = append(errs, db.Close())
		}
	}
	s.running.close()
	if s.files != nil {
		s.files.close()
	}
	if s.lock != nil {
		// Closing the file releases the flock.
		errs = append(errs, s.lock.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sqlite store %s: close: %w", s.path, err)
	}
	return nil
}
