package sqlite

import (
	"context"
	"database/sql"
)

// The statements of a turn's life, which run for every turn (or every
// batch of its events), and which the SQLite store prepares once.
const (
	sqlLatest        = selectTurn + ` WHERE request_id = ? ORDER BY attempt DESC LIMIT 1`
	sqlInsertTurn    = `INSERT INTO turns (` + turnColumns + `, reserved_seq, notify_url) VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, 0, NULL, ?, ?, ?)`
	sqlJournalRecord = `SELECT last_seq, ended_at, journal_bytes, reserved_seq FROM turns WHERE id = ?`
	// A journal's commits (see Store.journal): each sets last_seq and
	// journal_bytes and its own columns, guarded by the last_seq the
	// store last committed, so that a record not as the store left it is
	// not changed.
	sqlJournalCommit      = `UPDATE turns SET last_seq = ?, journal_bytes = ?, reserved_seq = ?` + journalGuard
	sqlJournalStart       = `UPDATE turns SET last_seq = ?, journal_bytes = ?, reserved_seq = ?, session_id = ?` + journalGuard
	sqlJournalEndInFiles  = `UPDATE turns SET last_seq = ?, journal_bytes = ?, ended_at = ?, terminal = NULL` + journalGuard
	sqlJournalEndInRecord = `UPDATE turns SET last_seq = ?, journal_bytes = ?, ended_at = ?, terminal = ?, skipped = ?` + journalGuard
	journalGuard          = ` WHERE id = ? AND last_seq = ? AND ended_at IS NULL`
	sqlEnded              = `SELECT ended_at IS NOT NULL FROM turns WHERE id = ?`
	sqlGet                = selectTurn + ` WHERE id = ?`
	sqlExtent             = `SELECT last_seq, ended_at IS NOT NULL FROM turns WHERE id = ?`
	sqlEventsRecord       = `SELECT last_seq, ended_at IS NOT NULL, journal_bytes, ended_at IS NOT NULL AND terminal IS NULL, skipped FROM turns WHERE id = ?`
	sqlTerminal           = `SELECT terminal FROM turns WHERE id = ?`
	sqlOwner              = `SELECT owner FROM turns WHERE id = ?`
)

var (
	sqliteWriteStmts = []string{sqlLatest, sqlInsertTurn, sqlJournalCommit, sqlJournalStart, sqlJournalEndInFiles, sqlJournalEndInRecord}
	sqliteReadStmts  = []string{sqlLatest, sqlEnded, sqlGet, sqlExtent, sqlEventsRecord, sqlTerminal, sqlOwner, sqlJournalRecord}
)

// stmtCache holds a database's statements prepared, so that the driver
// parses and plans each once, not on every call: for a short turn's ending
// (1,000 chunks and the terminal, BenchmarkEndOfABurst) preparing was a
// fifth of the store's CPU.
//
// They are prepared when the store opens, not on first use: the write
// database has one connection, and preparing a statement on the database
// while a transaction holds that connection would wait for it forever.
// database/sql prepares a *sql.Stmt again on any new connection it meets
// (inside a transaction, on the transaction's own, Tx.StmtContext), so a
// reconnection costs one preparation, never a wait. A query that is not
// in the cache still runs, unprepared. The cache is not written after it
// is made, so it needs no lock.
type stmtCache struct {
	db    *sql.DB
	stmts map[string]*sql.Stmt
}

func newStmtCache(ctx context.Context, db *sql.DB, queries []string) (*stmtCache, error) {
	c := &stmtCache{db: db, stmts: make(map[string]*sql.Stmt, len(queries))}
	for _, q := range queries {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			c.close()
			return nil, err
		}
		c.stmts[q] = st
	}
	return c, nil
}

// queryRow runs query for one row: in tx when it is not nil.
func (c *stmtCache) queryRow(ctx context.Context, tx *sql.Tx, query string, args ...any) *sql.Row {
	st, ok := c.stmts[query]
	switch {
	case tx == nil && ok:
		return st.QueryRowContext(ctx, args...)
	case tx == nil:
		return c.db.QueryRowContext(ctx, query, args...)
	case ok:
		return tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return tx.QueryRowContext(ctx, query, args...)
}

// exec runs query: in tx when it is not nil.
func (c *stmtCache) exec(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	st, ok := c.stmts[query]
	switch {
	case tx == nil && ok:
		return st.ExecContext(ctx, args...)
	case tx == nil:
		return c.db.ExecContext(ctx, query, args...)
	case ok:
		return tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return tx.ExecContext(ctx, query, args...)
}

// close closes the statements; the database is its owner's to close.
func (c *stmtCache) close() error {
	var first error
	for _, st := range c.stmts {
		if err := st.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
