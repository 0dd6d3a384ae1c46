package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acpgate/acpgate/internal/store"
)

// The PostgreSQL store's side of Cluster: one row per Join in replicas,
// whose epoch comes from a sequence (so it is greater than every earlier
// one, whichever replica minted it) and whose lease is the database's
// clock: expires_at against now(). lease_is_live, in the schema, is the
// one definition of a live lease.

// replicaRetention is how long the row of a lease that ended (by Leave or
// by Reap) is kept, for an operator to see which replicas came and went.
// Deleting it changes nothing for fencing: a lease with no row is not
// live.
const replicaRetention = 24 * time.Hour

const pgSelectReplica = `SELECT id, address, epoch, sessions, running_turns, max_sessions, expires_at FROM replicas`

func scanPgReplica(r pgx.Row) (store.Replica, error) {
	var out store.Replica
	var sessions, running, maxSessions int32
	err := r.Scan(&out.ID, &out.Address, &out.Epoch, &sessions, &running, &maxSessions, &out.ExpiresAt)
	out.Sessions, out.RunningTurns, out.MaxSessions = int(sessions), int(running), int(maxSessions)
	return out, err
}

// pgInterval is d as a query argument that `$n * interval '1 microsecond'`
// turns into an interval.
func pgInterval(d time.Duration) int64 { return d.Microseconds() }

// holdLease checks, inside tx, that the lease of epoch is live, and holds
// its row (FOR SHARE) until tx ends, so that a reaper (FOR UPDATE SKIP
// LOCKED) cannot end it in between: it skips the row, and reaps it on a
// later round, the turns tx wrote included.
func holdLease(ctx context.Context, tx pgx.Tx, epoch int64) error {
	var one int
	err := tx.QueryRow(ctx, `SELECT 1 FROM replicas r WHERE epoch = $1 AND lease_is_live(r) FOR SHARE`, epoch).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrFenced
	}
	return err
}

// Join records a new lease and, in the same transaction, ends the live
// leases of earlier Joins of the same replica id (a restarted replica
// supersedes its former self): they are reaped at once rather than when
// they would have expired, and their holder, if it still runs, gets
// ErrLeaseLost from its next Renew.
func (p *Store) Join(ctx context.Context, r store.Replica, ttl time.Duration) (store.Replica, error) {
	op := "join as replica " + r.ID
	if r.ID == "" || ttl <= 0 {
		return store.Replica{}, fmt.Errorf("postgres store: %s: a replica needs an id and a positive lease, got %q and %s", op, r.ID, ttl)
	}
	var out store.Replica
	err := p.inTx(ctx, op, func(tx pgx.Tx) error {
		var err error
		out, err = scanPgReplica(tx.QueryRow(ctx, `INSERT INTO replicas (epoch, id, address, sessions, running_turns, max_sessions, expires_at)
			VALUES (nextval('replica_epochs'), $1, $2, $3, $4, $5, now() + $6 * interval '1 microsecond')
			RETURNING id, address, epoch, sessions, running_turns, max_sessions, expires_at`,
			r.ID, r.Address, r.Sessions, r.RunningTurns, r.MaxSessions, pgInterval(ttl)))
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE replicas r SET expires_at = now() WHERE id = $1 AND epoch <> $2 AND lease_is_live(r)`, r.ID, out.Epoch)
		return err
	})
	if err != nil {
		return store.Replica{}, err
	}
	p.mu.Lock()
	p.self = out
	p.mu.Unlock()
	return out, nil
}

func (p *Store) Renew(ctx context.Context, sessions, runningTurns int, ttl time.Duration) error {
	self := p.Self()
	op := "renew the lease of replica " + self.ID
	if self.Epoch == 0 {
		return fmt.Errorf("postgres store: %s: the store has not joined: %w", op, store.ErrLeaseLost)
	}
	if ttl <= 0 {
		return fmt.Errorf("postgres store: %s: the lease must be positive, got %s", op, ttl)
	}
	var expires time.Time
	err := p.pool.QueryRow(ctx, `UPDATE replicas r SET sessions = $2, running_turns = $3, expires_at = now() + $4 * interval '1 microsecond'
		WHERE epoch = $1 AND lease_is_live(r) RETURNING expires_at`, self.Epoch, sessions, runningTurns, pgInterval(ttl)).Scan(&expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("postgres store: %s (epoch %d): %w", op, self.Epoch, store.ErrLeaseLost)
	}
	if err != nil {
		return opError(op, err)
	}
	p.mu.Lock()
	if p.self.Epoch == self.Epoch {
		p.self.Sessions, p.self.RunningTurns, p.self.ExpiresAt = sessions, runningTurns, expires
	}
	p.mu.Unlock()
	return nil
}

// Leave ends the lease now. Its sessions are released in the same
// transaction, as a reaper would release them. A replica that leaves with
// turns still running has not shut down cleanly, and nothing else would
// ever end them: its lease is then only expired, not marked left, so that
// Reap ends them as a lost replica's.
func (p *Store) Leave(ctx context.Context) error {
	self := p.Self()
	if self.Epoch == 0 {
		return nil
	}
	return p.inTx(ctx, "leave as replica "+self.ID, func(tx pgx.Tx) error {
		// The row first: once it is held, no Begin of this epoch can
		// commit (it waits, then finds the lease expired).
		tag, err := tx.Exec(ctx, `UPDATE replicas SET expires_at = least(expires_at, now())
			WHERE epoch = $1 AND left_at IS NULL AND reaped_at IS NULL`, self.Epoch)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		var running bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM turns WHERE epoch = $1 AND ended_at IS NULL)`, self.Epoch).Scan(&running); err != nil || running {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE replicas SET left_at = now() WHERE epoch = $1`, self.Epoch); err != nil {
			return err
		}
		return releaseSessions(ctx, tx, self.Epoch)
	})
}

// releaseSessions makes the sessions of epoch ownerless.
func releaseSessions(ctx context.Context, tx pgx.Tx, epoch int64) error {
	_, err := tx.Exec(ctx, `UPDATE sessions SET replica = '', epoch = NULL WHERE epoch = $1`, epoch)
	return err
}

func (p *Store) Replicas(ctx context.Context) ([]store.Replica, error) {
	rows, err := p.pool.Query(ctx, pgSelectReplica+` r WHERE lease_is_live(r) ORDER BY id, epoch`)
	if err != nil {
		return nil, opError("list replicas", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Replica, error) { return scanPgReplica(r) })
	return out, opError("list replicas", err)
}

// Reap reaps one expired lease per transaction: FOR UPDATE SKIP LOCKED
// gives each lease to one reaper, and a reaper that dies mid-way leaves
// the lease to the next (its transaction rolls back). The lease's running
// turns are locked, ended with their terminal and notified in the same
// transaction as the lease is marked reaped and its sessions released, so
// that no turn is ended twice and none is missed.
func (p *Store) Reap(ctx context.Context, terminal func(store.Turn) store.Event) (reaped []store.Replica, ended []store.Turn, err error) {
	for {
		var r store.Replica
		var turns []store.Turn
		err := p.inTx(ctx, "reap expired leases", func(tx pgx.Tx) error {
			var err error
			r, err = scanPgReplica(tx.QueryRow(ctx, pgSelectReplica+` WHERE left_at IS NULL AND reaped_at IS NULL AND expires_at < now()
				ORDER BY expires_at, epoch LIMIT 1 FOR UPDATE SKIP LOCKED`))
			if err != nil {
				return err
			}
			if turns, err = endLost(ctx, tx, r, terminal); err != nil {
				return err
			}
			if err := releaseSessions(ctx, tx, r.Epoch); err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `UPDATE replicas SET reaped_at = now() WHERE epoch = $1`, r.Epoch)
			return err
		})
		if errors.Is(err, pgx.ErrNoRows) {
			break
		}
		if err != nil {
			return reaped, ended, err
		}
		reaped, ended = append(reaped, r), append(ended, turns...)
	}
	if _, err := p.pool.Exec(ctx, `DELETE FROM replicas WHERE coalesce(reaped_at, left_at) < now() - $1 * interval '1 microsecond'`,
		pgInterval(replicaRetention)); err != nil {
		return reaped, ended, opError("delete the records of ended leases", err)
	}
	return reaped, ended, nil
}

// endLost ends the running turns of r's epoch with terminal(turn), at the
// database's time, and returns them as ended.
func endLost(ctx context.Context, tx pgx.Tx, r store.Replica, terminal func(store.Turn) store.Event) ([]store.Turn, error) {
	turns, err := pgTurns(ctx, tx, pgSelectTurn+` WHERE t.epoch = $1 AND t.ended_at IS NULL ORDER BY t.id FOR UPDATE OF t`, r.Epoch)
	if err != nil || len(turns) == 0 {
		return nil, err
	}
	var now time.Time
	if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return nil, err
	}
	for i, t := range turns {
		ev := terminal(t)
		if ev.Seq != t.StoppedSeq() {
			return nil, fmt.Errorf("the terminal of turn %s has seq %d, not %d", t.ID, ev.Seq, t.StoppedSeq())
		}
		if err := writeJournal(ctx, tx, "end turn "+t.ID, pgEnd, t.ID, []store.Event{ev}, 0, now.UnixNano(), true); err != nil {
			return nil, err
		}
		turns[i].EndedAt, turns[i].LastSeq, turns[i].Terminal = time.Unix(0, now.UnixNano()), ev.Seq, bytes.Clone(store.NonNilBytes(ev.Flat()))
	}
	return turns, nil
}

func (p *Store) Self() store.Replica {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.self
}
