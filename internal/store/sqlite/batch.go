package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"sync"
)

// batchWriter makes the SQLite store's writes of turn records (a turn's
// beginning and each write of its journal) in shared transactions: the
// writes waiting when a transaction begins all go into it (group commit).
//
// Why: the store has one write connection, and on a busy machine every
// hand-over of it from one goroutine to the next waits for the next to be
// scheduled, a millisecond or more. Fifty one-shot turns starting at once
// were fifty transactions beginning them and fifty more journaling their
// started events, one after the other: the last started event, which the
// turn's first chunks wait for, was journaled after hundreds of
// milliseconds. Batched, the writes waiting at any moment share one
// transaction and one hand-over.
//
// A write is a function of the transaction. It must leave nothing behind
// but what the transaction does until do has returned nil: when one of a
// batch fails, and not with errNotUpdated, the transaction is rolled back
// (SQLite may already have ended it, and run what followed outside it)
// and each write of the batch is made again alone, so that one write's
// failure stays that write's.
type batchWriter struct {
	db *sql.DB

	mu      sync.Mutex
	waiting []*batchWrite
	busy    bool // a goroutine is making the waiting writes
}

// batchWrite is one write waiting for a transaction.
type batchWrite struct {
	ctx context.Context
	f   func(*sql.Tx) error
	// single says that f is one statement: made alone, it is made
	// outside a transaction (f(nil)), as SQLite's autocommit of one
	// statement costs about half of BEGIN, the statement and COMMIT.
	single bool
	done   chan error
}

// errNotUpdated is a write's guarded UPDATE that changed no record: the
// write failed, but its transaction is as it was.
var errNotUpdated = errors.New("the record was not updated")

// do makes f in a transaction shared with the writes waiting with it,
// and returns f's error, or the transaction's.
func (b *batchWriter) do(ctx context.Context, f func(*sql.Tx) error) error {
	return b.doAll(ctx, false, []func(*sql.Tx) error{f})[0]
}

// doStatement is do for an f that makes one statement (see
// batchWrite.single).
func (b *batchWriter) doStatement(ctx context.Context, f func(*sql.Tx) error) error {
	return b.doAll(ctx, true, []func(*sql.Tx) error{f})[0]
}

// doAll makes each of fs as do does (single is batchWrite.single for
// each), all in one batch when the store is idle; errs[i] is fs[i]'s.
// When no batch is being made, the caller makes it, with whatever else is
// waiting by then, so that a write on an idle store waits for no other
// goroutine; writes that arrive meanwhile are made by a goroutine of
// their own, so that the caller is not held by them.
func (b *batchWriter) doAll(ctx context.Context, single bool, fs []func(*sql.Tx) error) []error {
	ws := make([]*batchWrite, len(fs))
	for i, f := range fs {
		ws[i] = &batchWrite{ctx: ctx, f: f, single: single, done: make(chan error, 1)}
	}
	b.mu.Lock()
	b.waiting = append(b.waiting, ws...)
	lead := !b.busy
	b.busy = true
	b.mu.Unlock()
	if lead {
		b.next()
		b.mu.Lock()
		more := len(b.waiting) > 0
		b.busy = more
		b.mu.Unlock()
		if more {
			go b.drain()
		}
	}
	errs := make([]error, len(ws))
	for i, w := range ws {
		errs[i] = <-w.done
	}
	return errs
}

// drain makes batches until none is waiting.
func (b *batchWriter) drain() {
	for {
		b.next()
		b.mu.Lock()
		if len(b.waiting) == 0 {
			b.busy = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
	}
}

// next makes the writes waiting now in one transaction.
func (b *batchWriter) next() {
	b.mu.Lock()
	ws := b.waiting
	b.waiting = nil
	b.mu.Unlock()
	if len(ws) == 0 {
		return
	}
	errs, err := b.batch(ws)
	switch {
	case err != nil && len(ws) == 1:
		errs[0] = err
	case err != nil:
		// Nothing of it counts: each write again, alone.
		for i := range ws {
			alone, err := b.batch(ws[i : i+1])
			if errs[i] = alone[0]; err != nil {
				errs[i] = err
			}
		}
	}
	for i, w := range ws {
		w.done <- errs[i]
	}
}

// batch makes ws in one transaction: each write's own result, or err when
// the transaction failed and none of them counts.
func (b *batchWriter) batch(ws []*batchWrite) (errs []error, err error) {
	errs = make([]error, len(ws))
	if len(ws) == 1 && ws[0].single {
		if errs[0] = ws[0].ctx.Err(); errs[0] == nil {
			errs[0] = ws[0].f(nil)
		}
		if errs[0] != nil && !errors.Is(errs[0], errNotUpdated) {
			return errs, errs[0]
		}
		return errs, nil
	}
	tx, err := b.db.BeginTx(context.Background(), nil)
	if err != nil {
		return errs, err
	}
	for i, w := range ws {
		if errs[i] = w.ctx.Err(); errs[i] != nil {
			continue
		}
		if errs[i] = w.f(tx); errs[i] != nil && !errors.Is(errs[i], errNotUpdated) {
			tx.Rollback()
			return errs, errs[i]
		}
	}
	return errs, tx.Commit()
}
