package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/acpgate/acpgate/internal/store"
)

// The PostgreSQL store's journals: Started, Append and End write a batch
// of events, the turn's record and a NOTIFY in one statement (so one
// transaction and one round trip), and Events reads them back.
//
// Fencing: a store acting for a replica writes a turn only while the turn
// is its epoch's and that lease is live, checked in the UPDATE's WHERE, so
// that the check and the write are one step. A reaper ending the turn
// holds the turn's row, and a write after it finds the turn ended. When a
// write is refused, ErrEnded wins over ErrFenced: a turn that has ended
// takes no events from anyone, which is the more precise answer, and the
// gateway stops writing on either.

// pgJournal is the statement of a journal write: $1 turn id, $2 the last
// seq it must have, $3 the last seq after the batch, $4 and $5 the
// batch's seqs and data, $6 the epoch that must own it (0: no fencing);
// more arguments from $7 for the SET clause it is given, and where, a
// condition on the record, in place of last_seq = $2.
func pgJournal(set, where string) string {
	return `WITH t AS (
		UPDATE turns SET last_seq = $3` + set + `
		WHERE id = $1 AND ` + where + ` AND ended_at IS NULL
			AND ($6::bigint = 0 OR (epoch = $6 AND lease_live($6)))
		RETURNING id
	), ins AS (
		INSERT INTO events (turn_id, seq, data)
		SELECT t.id, u.seq, u.data FROM t, unnest($4::bigint[], $5::bytea[]) AS u(seq, data)
	)
	SELECT pg_notify('` + notifyChannel + `', t.id) FROM t`
}

// pgReserve extends a running turn's reservation past the batch it
// journals (see store.Turn.Reserved).
var (
	pgReserve = ", reserved_seq = $3::bigint + " + strconv.Itoa(store.ReserveAhead)

	pgAppend  = pgJournal(pgReserve, "last_seq = $2")
	pgStarted = pgJournal(pgReserve+", session_id = $7", "last_seq = $2")
	// pgEnd's terminal follows the last event, or, alone ($8), is above
	// the reservation (see store.Store.End).
	pgEnd = pgJournal(", ended_at = $7", "(last_seq = $2 OR ($8::boolean AND last_seq < $3 AND reserved_seq < $3))")
)

func (p *Store) Started(ctx context.Context, turnID, sessionID string, started store.Event) error {
	return writeJournal(ctx, p.pool, "journal the start of turn "+turnID, pgStarted, turnID, []store.Event{started}, p.Self().Epoch, sessionID)
}

func (p *Store) Append(ctx context.Context, turnID string, events []store.Event) error {
	op := "journal events of turn " + turnID
	if len(events) == 0 {
		// Nothing to journal, but the caller still learns of a turn
		// that ended, never was, or is not its own.
		return opError(op, refusal(ctx, p.pool, turnID, nil, p.Self().Epoch))
	}
	return writeJournal(ctx, p.pool, op, pgAppend, turnID, events, p.Self().Epoch)
}

// End journals the terminal as the turn's last event, where alone it is
// kept (Get reads it from there), in the statement that writes rest.
func (p *Store) End(ctx context.Context, turnID string, rest []store.Event, terminal store.Event, endedAt time.Time) error {
	events := endEvents(rest, terminal)
	return writeJournal(ctx, p.pool, "end turn "+turnID, pgEnd, turnID, events, p.Self().Epoch, endedAt.UnixNano(), len(rest) == 0)
}

// endEvents is an ending's events: rest, then the terminal, in a new
// slice. rest is the caller's, usually a window of a longer slice whose
// later elements another goroutine may read: appending to it in place
// would write there.
func endEvents(rest []store.Event, terminal store.Event) []store.Event {
	return append(rest[:len(rest):len(rest)], terminal)
}

// execer is what a journal write needs of a pool or a transaction.
type execer interface {
	queryer
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// writeJournal runs the journal write stmt for a batch of events whose seqs
// follow one another; when it changes nothing, refusal says why.
func writeJournal(ctx context.Context, db execer, op, stmt, turnID string, events []store.Event, epoch int64, more ...any) error {
	first := events[0].Seq
	seqs := make([]int64, len(events))
	data := make([][]byte, len(events))
	for i, e := range events {
		if e.Seq != first+uint64(i) {
			return opError(op, fmt.Errorf("event seq %d does not follow %d", e.Seq, first+uint64(i)-1))
		}
		seqs[i], data[i] = int64(e.Seq), store.NonNilBytes(e.Flat())
	}
	if first == 0 {
		return opError(op, errors.New("event seq 0: seqs start at 1"))
	}
	last := first + uint64(len(events)) - 1
	args := append([]any{turnID, int64(first - 1), int64(last), seqs, data, epoch}, more...)
	tag, err := db.Exec(ctx, stmt, args...)
	if err != nil {
		return opError(op, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	return opError(op, refusal(ctx, db, turnID, &first, epoch))
}

// refusal says why a journal write of turnID, whose first event would have
// seq *first (nil for an empty write), is not taken: ErrNotFound,
// ErrEnded, ErrFenced, or a seq that does not follow; nil when nothing
// stands in its way (an empty write to a turn that may take events).
func refusal(ctx context.Context, db queryer, turnID string, first *uint64, epoch int64) error {
	var lastSeq, owner int64
	var ended, live bool
	err := db.QueryRow(ctx, `SELECT last_seq, ended_at IS NOT NULL, coalesce(epoch, 0), lease_live($2) FROM turns WHERE id = $1`,
		turnID, epoch).Scan(&lastSeq, &ended, &owner, &live)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return store.ErrNotFound
	case err != nil:
		return err
	case ended:
		return store.ErrEnded
	case epoch != 0 && (owner != epoch || !live):
		return store.ErrFenced
	case first != nil && *first != uint64(lastSeq)+1:
		return fmt.Errorf("event seq %d does not follow %d", *first, lastSeq)
	case first != nil:
		// The turn changed between the write and this read (a
		// concurrent writer of one turn, which the gateway never is).
		return errors.New("the turn changed while its events were written")
	}
	return nil
}

// pgEventsPage reads up to $3 events of turn $1 after seq $2: only while
// the turn's record exists, since a deleted turn's events may wait a while
// to be purged (see DeleteEnded).
const pgEventsPage = `SELECT seq, data FROM events
	WHERE turn_id = $1 AND seq > $2 AND EXISTS (SELECT 1 FROM turns WHERE id = $1)
	ORDER BY seq LIMIT $3`

// pgEventsBounded is pgEventsPage cut, past its first event, before the
// events' sizes pass $4 bytes in total: the running total (octet_length
// does not read a stored value's bytes) cuts the page in the query, so
// that the events past the bound are not sent.
const pgEventsBounded = `SELECT seq, data FROM (
		SELECT seq, data, row_number() OVER w AS n, sum(octet_length(data)) OVER w AS total
		FROM (` + pgEventsPage + `) page
		WINDOW w AS (ORDER BY seq)
	) bounded WHERE n = 1 OR total <= $4 ORDER BY seq`

// Events reads a page, bounded by limit and, when maxBytes is positive,
// by pgEventsBounded's byte bound.
func (p *Store) Events(ctx context.Context, turnID string, afterSeq uint64, limit, maxBytes int) ([]store.Event, error) {
	op := "read the journal of turn " + turnID
	var out []store.Event
	if limit > 0 && afterSeq < 1<<63 {
		query, args := pgEventsPage, []any{turnID, int64(afterSeq), limit}
		if maxBytes > 0 {
			query, args = pgEventsBounded, append(args, maxBytes)
		}
		rows, err := p.pool.Query(ctx, query, args...)
		if err != nil {
			return nil, opError(op, err)
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Event, error) {
			var e store.Event
			var seq int64
			err := r.Scan(&seq, &e.Data)
			e.Seq = uint64(seq)
			return e, err
		})
		if err != nil {
			return nil, opError(op, err)
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	// No events: say whether the turn exists.
	var exists bool
	if err := p.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM turns WHERE id = $1)`, turnID).Scan(&exists); err != nil {
		return nil, opError(op, err)
	}
	if !exists {
		return nil, store.ErrNotFound
	}
	return nil, nil
}
