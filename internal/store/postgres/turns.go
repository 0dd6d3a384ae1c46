package postgres

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acpgate/acpgate/internal/store"
)

// The PostgreSQL store's turn records: Begin, and the reads of records.

// pgSelectTurn reads turn records (as t) with their terminal: the journal's
// event at last_seq of an ended turn, which the events table alone keeps.
const pgSelectTurn = `SELECT t.id, t.request_id, t.attempt, t.agent, t.session_id, t.target, t.prompt_hash, t.owner,
	t.started_at, t.ended_at, t.last_seq, t.replica, e.data, t.reserved_seq, t.notify_url
	FROM turns t LEFT JOIN events e ON t.ended_at IS NOT NULL AND e.turn_id = t.id AND e.seq = t.last_seq`

func scanPgTurn(r pgx.Row) (store.Turn, error) {
	var t store.Turn
	var attempt, startedAt, lastSeq, reserved int64
	var endedAt *int64
	if err := r.Scan(&t.ID, &t.RequestID, &attempt, &t.Agent, &t.SessionID, &t.Target, &t.PromptHash, &t.Owner,
		&startedAt, &endedAt, &lastSeq, &t.Replica, &t.Terminal, &reserved, &t.NotifyURL); err != nil {
		return store.Turn{}, err
	}
	t.Reserved = uint64(reserved)
	t.Attempt = uint32(attempt)
	t.StartedAt = time.Unix(0, startedAt)
	if endedAt != nil {
		t.EndedAt = time.Unix(0, *endedAt)
	}
	t.LastSeq = uint64(lastSeq)
	return t, nil
}

// queryer is what reads need of a pool or a transaction.
type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// pgTurns runs a query of pgSelectTurn's columns.
func pgTurns(ctx context.Context, q queryer, sql string, args ...any) ([]store.Turn, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Turn, error) { return scanPgTurn(r) })
}

// latestTurn is the latest attempt of requestID; ErrNotFound for none.
func latestTurn(ctx context.Context, q queryer, requestID string) (store.Turn, error) {
	t, err := scanPgTurn(q.QueryRow(ctx, pgSelectTurn+` WHERE t.request_id = $1 ORDER BY t.attempt DESC LIMIT 1`, requestID))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Turn{}, store.ErrNotFound
	}
	return t, err
}

// Begin checks for a later attempt and inserts in one transaction; the
// unique index on (request_id, attempt) decides between two concurrent
// Begins of one attempt, on one replica or two: the second waits for the
// first's commit, inserts nothing, and returns the first's turn. After
// Join the turn is stamped with this store's replica and epoch, while the
// lease is held (FOR SHARE) so that a reaper cannot end the lease between
// the check and the commit and miss the turn.
func (p *Store) Begin(ctx context.Context, t store.Turn) (store.Turn, bool, error) {
	self := p.Self()
	var existing store.Turn
	created := false
	err := p.inTx(ctx, "begin turn "+t.ID, func(tx pgx.Tx) error {
		if self.Epoch != 0 {
			if err := holdLease(ctx, tx, self.Epoch); err != nil {
				return err
			}
		}
		if t.RequestID != "" {
			latest, err := latestTurn(ctx, tx, t.RequestID)
			if err == nil && latest.Attempt >= t.Attempt {
				existing = latest
				return nil
			}
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		tag, err := tx.Exec(ctx, `INSERT INTO turns (id, request_id, attempt, agent, session_id, target, prompt_hash, owner, started_at, replica, epoch, reserved_seq, notify_url)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
			ON CONFLICT (request_id, attempt) WHERE request_id <> '' DO NOTHING`,
			t.ID, t.RequestID, int64(t.Attempt), t.Agent, t.SessionID, t.Target, store.NonNilBytes(t.PromptHash), t.Owner, t.StartedAt.UnixNano(),
			self.ID, nullEpoch(self.Epoch), store.BeginReserved, t.NotifyURL)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 1 {
			created = true
			return nil
		}
		// Another Begin of this attempt committed first: a statement
		// under READ COMMITTED sees it.
		existing, err = latestTurn(ctx, tx, t.RequestID)
		return err
	})
	return existing, created, err
}

// nullEpoch is epoch as a column value: NULL for a store outside a
// cluster.
func nullEpoch(epoch int64) *int64 {
	if epoch == 0 {
		return nil
	}
	return &epoch
}

func (p *Store) Get(ctx context.Context, turnID string) (store.Turn, error) {
	t, err := scanPgTurn(p.pool.QueryRow(ctx, pgSelectTurn+` WHERE t.id = $1`, turnID))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Turn{}, store.ErrNotFound
	}
	return t, opError("get turn "+turnID, err)
}

func (p *Store) Extent(ctx context.Context, turnID string) (uint64, bool, error) {
	var lastSeq int64
	var ended bool
	err := p.pool.QueryRow(ctx, `SELECT last_seq, ended_at IS NOT NULL FROM turns WHERE id = $1`, turnID).Scan(&lastSeq, &ended)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, false, store.ErrNotFound
	case err != nil:
		return 0, false, opError("read the extent of turn "+turnID, err)
	}
	return uint64(lastSeq), ended, nil
}

func (p *Store) Owner(ctx context.Context, turnID string) (string, error) {
	var owner string
	err := p.pool.QueryRow(ctx, `SELECT owner FROM turns WHERE id = $1`, turnID).Scan(&owner)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", store.ErrNotFound
	case err != nil:
		return "", opError("read the owner of turn "+turnID, err)
	}
	return owner, nil
}

func (p *Store) Latest(ctx context.Context, requestID string) (store.Turn, error) {
	if requestID == "" {
		return store.Turn{}, store.ErrNotFound
	}
	t, err := latestTurn(ctx, p.pool, requestID)
	return t, opError("find request "+requestID, err)
}

func (p *Store) List(ctx context.Context, f store.Filter, limit int, from *store.Position) ([]store.Turn, error) {
	if limit <= 0 {
		return nil, nil
	}
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if f.SessionID != "" {
		where = append(where, "t.session_id = "+arg(f.SessionID))
	}
	if f.Agent != "" {
		where = append(where, "t.agent = "+arg(f.Agent))
	}
	if f.Owner != nil {
		where = append(where, "t.owner = "+arg(*f.Owner))
	}
	if from != nil {
		// Strictly after from in List's order; ids compare as bytes
		// (COLLATE "C"), as ComparePositions does.
		where = append(where, "(t.started_at, t.id) < ("+arg(from.StartedAt.UnixNano())+", "+arg(from.ID)+")")
	}
	q := pgSelectTurn
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY t.started_at DESC, t.id DESC LIMIT ` + arg(limit)
	out, err := pgTurns(ctx, p.pool, q, args...)
	return out, opError("list turns", err)
}

func (p *Store) Running(ctx context.Context) ([]store.Turn, error) {
	out, err := pgTurns(ctx, p.pool, pgSelectTurn+` WHERE t.ended_at IS NULL`)
	return out, opError("list running turns", err)
}

// deleteBatch bounds how many turns one statement of DeleteEnded deletes:
// the rows it locks wait for it, and running turns' writes go on between.
const deleteBatch = 100

// DeleteEnded deletes records in statements of deleteBatch turns, each of
// which also lists the turns in deleted_journals; SKIP LOCKED lets
// replicas delete at once without waiting for each other. The events go
// after, in statements of purgeBatch rows (purgeJournals). A deleted
// turn's events are never seen: Events reads only those of a turn whose
// record exists.
func (p *Store) DeleteEnded(ctx context.Context, before time.Time) (int, error) {
	const op = "delete ended turns"
	total := 0
	for {
		tag, err := p.pool.Exec(ctx, `WITH gone AS (
				DELETE FROM turns WHERE id IN (
					SELECT id FROM turns WHERE ended_at < $1 ORDER BY ended_at, id LIMIT $2 FOR UPDATE SKIP LOCKED)
				RETURNING id)
			INSERT INTO deleted_journals (turn_id) SELECT id FROM gone ON CONFLICT DO NOTHING`,
			before.UnixNano(), deleteBatch)
		if err != nil {
			return total, opError(op, err)
		}
		n := int(tag.RowsAffected())
		total += n
		if err := p.purgeJournals(ctx); err != nil {
			return total, opError(op, err)
		}
		if n < deleteBatch {
			return total, nil
		}
	}
}

// purgeBatch bounds the events one statement of purgeJournals deletes: a
// few tens of milliseconds of work, far below statement_timeout.
const purgeBatch = 10_000

// purgeJournals deletes the events of the turns in deleted_journals, and
// then the turns from it.
func (p *Store) purgeJournals(ctx context.Context) error {
	for {
		tag, err := p.pool.Exec(ctx, `DELETE FROM events WHERE (turn_id, seq) IN (
			SELECT e.turn_id, e.seq FROM deleted_journals d JOIN events e ON e.turn_id = d.turn_id LIMIT $1)`, purgeBatch)
		if err != nil {
			return err
		}
		if tag.RowsAffected() < purgeBatch {
			break
		}
	}
	_, err := p.pool.Exec(ctx, `DELETE FROM deleted_journals d WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.turn_id = d.turn_id)`)
	return err
}
