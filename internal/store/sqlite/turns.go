package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/acpgate/acpgate/internal/store"
)

// The SQLite store's turn records: Begin, and the reads of records; the
// writes to a running turn's journal are journal.go's.

// turnColumns are a turn record's columns, in scanTurn's order.
const turnColumns = `id, request_id, attempt, agent, session_id, target, prompt_hash, started_at, ended_at, last_seq, terminal, owner`

// selectTurn is what scanTurn reads: the record and where its journal
// files end.
const selectTurn = `SELECT ` + turnColumns + `, journal_bytes, reserved_seq, notify_url FROM turns`

type rowScanner interface{ Scan(dest ...any) error }

// scannedTurn is a record as read, before a terminal kept in the journal
// files is read from them (see Store.complete).
type scannedTurn struct {
	store.Turn
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
func (s *Store) complete(t scannedTurn) (store.Turn, error) {
	if t.Running() || t.Terminal != nil {
		return t.Turn, nil
	}
	events, err := s.files.read(t.ID, t.LastSeq-1, 1, uint64(t.size), 0)
	if err != nil {
		return store.Turn{}, fmt.Errorf("reading the terminal of turn %s: %w", t.ID, err)
	}
	t.Terminal = events[0].Flat()
	return t.Turn, nil
}

func (s *Store) Begin(ctx context.Context, t store.Turn) (store.Turn, bool, error) {
	var existing store.Turn
	created := false
	err := s.inBatch(ctx, "begin turn "+t.ID, func(tx *sql.Tx) error {
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
			t.ID, t.RequestID, t.Attempt, t.Agent, t.SessionID, t.Target, store.NonNilBytes(t.PromptHash), t.StartedAt.UnixNano(), t.Owner, store.BeginReserved, t.NotifyURL)
		created = err == nil
		return err
	})
	if err == nil && created {
		s.running.begun(s, t.ID)
	}
	return existing, created, err
}

func (s *Store) Get(ctx context.Context, turnID string) (store.Turn, error) {
	return s.turnAt(s.readStmts.queryRow(ctx, nil, sqlGet, turnID), "get turn "+turnID)
}

// turnAt is the turn row holds, completed with its terminal, or
// store.ErrNotFound when it holds none; op names the read in an error.
func (s *Store) turnAt(row *sql.Row, op string) (store.Turn, error) {
	t, err := scanTurn(row)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Turn{}, store.ErrNotFound
	}
	if err == nil {
		var done store.Turn
		if done, err = s.complete(t); err == nil {
			return done, nil
		}
	}
	return store.Turn{}, s.opError(op, err)
}

func (s *Store) Extent(ctx context.Context, turnID string) (uint64, bool, error) {
	var lastSeq int64
	var ended bool
	err := s.readStmts.queryRow(ctx, nil, sqlExtent, turnID).Scan(&lastSeq, &ended)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, false, store.ErrNotFound
	case err != nil:
		return 0, false, s.opError("read the extent of turn "+turnID, err)
	}
	return uint64(lastSeq), ended, nil
}

func (s *Store) Owner(ctx context.Context, turnID string) (string, error) {
	var owner string
	err := s.readStmts.queryRow(ctx, nil, sqlOwner, turnID).Scan(&owner)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", store.ErrNotFound
	case err != nil:
		return "", s.opError("read the owner of turn "+turnID, err)
	}
	return owner, nil
}

func (s *Store) Latest(ctx context.Context, requestID string) (store.Turn, error) {
	if requestID == "" {
		return store.Turn{}, store.ErrNotFound
	}
	return s.turnAt(s.readStmts.queryRow(ctx, nil, sqlLatest, requestID), "find request "+requestID)
}

func (s *Store) List(ctx context.Context, f store.Filter, limit int, from *store.Position) ([]store.Turn, error) {
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

func (s *Store) Running(ctx context.Context) ([]store.Turn, error) {
	return s.queryTurns(ctx, "list running turns", selectTurn+` WHERE ended_at IS NULL`)
}

func (s *Store) queryTurns(ctx context.Context, op, q string, args ...any) ([]store.Turn, error) {
	rows, err := s.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, s.opError(op, err)
	}
	defer rows.Close()
	var out []store.Turn
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

// deleteBatch bounds how many turns one DeleteEnded transaction deletes:
// the write lock is held for the transaction, and running turns' appends
// wait for it.
const deleteBatch = 100

// DeleteEnded deletes the records in transactions of deleteBatch turns,
// and each batch's journal files once its transaction has committed (a
// crash in between leaves files that the next Open sweeps).
func (s *Store) DeleteEnded(ctx context.Context, before time.Time) (int, error) {
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
