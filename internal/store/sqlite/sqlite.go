// Package sqlite is the store.Store of one gateway in a directory: the
// turns' and sessions' records in a SQLite database, each turn's journal
// in files beside it, so that turns outlive the gateway process. It is the
// default store.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
	sqlitedriver "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/acpgate/acpgate/internal/store"
)

// Store is a store.Store in a directory, so that turns and their journals
// outlive the gateway process: the turns' records in one SQLite database
// file, dir/acpgate.db, and each turn's events in files under
// dir/journals (see journalFiles), committed by the record.
//
// Durability: the database runs in WAL mode with synchronous=NORMAL. A
// committed write survives the gateway process crashing or being killed;
// a power loss or kernel crash may lose the last commits before the WAL
// was synced (never corrupting the database), and may leave a journal
// file shorter than its record, which Events then reports as damaged.
// Syncing every commit (synchronous=FULL) would cost an fsync per batch of
// events, and the gateway already loses a stream's live events on such a
// crash.
//
// A directory is used by one gateway at a time: Open takes an
// exclusive flock on dir/lock, held until Close. Two gateways writing one
// database would each believe it owns the running turns and mark the
// other's turns ended at its start.
type Store struct {
	path string // the database file, for errors
	// write has one connection: SQLite allows one writer at a time, and
	// queueing writers in the pool is cheaper and fairer than having them
	// spin on SQLITE_BUSY. Its transactions begin IMMEDIATE, so a
	// transaction that reads and then writes (Begin's check and insert)
	// holds the write lock from its first read.
	write *sql.DB
	// writes makes the writes of turn records on write in shared
	// transactions (see batchWriter).
	writes batchWriter
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

// Options tunes OpenWith. The zero value is what Open uses.
type Options struct {
	// MaxPageCount, when positive, caps the database at that many pages
	// on every connection, so that tests can fill it and see that a full
	// database fails writes rather than losing events.
	MaxPageCount int
}

// sqliteFile and sqliteLock are the names Open uses inside its dir.
const (
	sqliteFile = "acpgate.db"
	sqliteLock = "lock"
	// readConns bounds concurrent readers (replays, listings); more
	// would only contend for the two cores a small gateway host has.
	readConns = 4
)

// ErrInUse is Open's error for a directory whose store another
// process holds: the caller says how to give this one a directory of its
// own.
var ErrInUse = errors.New("in use by another acpgate process")

// Open opens (creating if need be) the store in dir.
func Open(dir string) (*Store, error) {
	return OpenWith(dir, Options{})
}

// OpenWith is Open with options.
func OpenWith(dir string, opts Options) (_ *Store, err error) {
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
	s := &Store{path: filepath.Join(dir, sqliteFile), lock: lock}
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
		return nil, openError(s.path, err)
	}
	s.write.SetMaxOpenConns(1)
	s.write.SetConnMaxIdleTime(0)
	s.writes.db = s.write
	if err := s.migrate(); err != nil {
		return nil, err
	}
	if err := s.sweep(); err != nil {
		return nil, err
	}
	if s.read, err = sql.Open("sqlite", uri+readParams.Encode()); err != nil {
		return nil, openError(s.path, err)
	}
	s.read.SetMaxOpenConns(readConns)
	s.read.SetMaxIdleConns(readConns)
	ctx := context.Background()
	if s.writeStmts, err = newStmtCache(ctx, s.write, sqliteWriteStmts); err != nil {
		return nil, openError(s.path, err)
	}
	if s.readStmts, err = newStmtCache(ctx, s.read, sqliteReadStmts); err != nil {
		return nil, openError(s.path, err)
	}
	return s, nil
}

// openError words a failure to open or check the database: a file that is
// not a database, or is damaged, is named as such, since the fix (move it
// aside, restore a backup) is the operator's.
func openError(path string, err error) error {
	if code, ok := sqliteCode(err); ok && (code == sqlite3.SQLITE_NOTADB || code == sqlite3.SQLITE_CORRUPT) {
		return fmt.Errorf("sqlite store: %s is not a usable database (damaged, or not a SQLite file): %w; %s", path, err, moveAside(path))
	}
	return fmt.Errorf("sqlite store: opening %s: %w", path, err)
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

// sweep deletes journal files whose turn is gone: DeleteEnded removes a
// turn's files after its transaction commits, and a crash in between
// keeps them. It also notes the turns whose files are missing or shorter
// than their records say (DamagedTurns): a stat per turn with files, so
// that the start-up log names them before a caller finds them one by one.
func (s *Store) sweep() error {
	rows, err := s.write.QueryContext(context.Background(), `SELECT id, journal_bytes FROM turns`)
	if err != nil {
		return openError(s.path, err)
	}
	defer rows.Close()
	known := map[string]bool{}
	for rows.Next() {
		var id string
		var size int64
		if err := rows.Scan(&id, &size); err != nil {
			return openError(s.path, err)
		}
		known[s.files.name(id)] = true
		if size > 0 && !s.files.whole(id, size) {
			s.damaged = append(s.damaged, id)
		}
	}
	if err := rows.Err(); err != nil {
		return openError(s.path, err)
	}
	if err := s.files.sweep(func(name string) bool { return known[name] }); err != nil {
		return fmt.Errorf("sqlite store: deleting the journals of deleted turns: %w", err)
	}
	return nil
}

// DamagedTurns are the turns whose journal files were found missing or
// shorter than their records say when the store was opened; reading their
// journals fails with ErrDamaged.
func (s *Store) DamagedTurns() []string { return s.damaged }

var _ store.Store = (*Store)(nil)

// inBatch runs f in a write transaction, shared with other writes of
// turn records (see batchWriter), and commits it. Errors other than
// ErrNotFound and ErrEnded get the database's path and op.
func (s *Store) inBatch(ctx context.Context, op string, f func(*sql.Tx) error) error {
	if err := s.writes.do(ctx, f); err != nil {
		return s.opError(op, err)
	}
	return nil
}

// inTx runs f in a write transaction and commits it. Errors other than
// ErrNotFound and ErrEnded get the database's path and op.
func (s *Store) inTx(ctx context.Context, op string, f func(*sql.Tx) error) error {
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
func (s *Store) opError(op string, err error) error {
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrEnded) {
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
	var e *sqlitedriver.Error
	if !errors.As(err, &e) {
		return 0, false
	}
	return e.Code() & 0xff, true
}

// Close closes the database and releases the directory for another
// gateway.
func (s *Store) Close() error {
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
