package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acpgate/acpgate/internal/store"
)

// The PostgreSQL store's session records. After Join a record is the
// replica's whose agent process serves it: PutSession and DeleteSession
// change a record only while this store's lease is live and the record is
// unowned, its own, or its owner's lease is not live; ClaimSession takes
// one over.

// pgSelectSession reads session records in scanPgSession's order.
const pgSelectSession = `SELECT id, agent, acp_session_id, cwd, owner, created_at, mode, config_options, replica, suspended_at FROM sessions`

func scanPgSession(r pgx.Row) (store.Session, error) {
	var s store.Session
	var createdAt, suspendedAt int64
	if err := r.Scan(&s.ID, &s.Agent, &s.ACPSessionID, &s.Cwd, &s.Owner, &createdAt, &s.Mode, &s.ConfigOptions, &s.Replica, &suspendedAt); err != nil {
		return store.Session{}, err
	}
	s.CreatedAt = time.Unix(0, createdAt)
	if suspendedAt != 0 {
		s.SuspendedAt = time.Unix(0, suspendedAt)
	}
	if len(s.ConfigOptions) == 0 {
		s.ConfigOptions = nil
	}
	return s, nil
}

// pgMayChangeSession is true of a session record ($E being this store's
// epoch, NULL outside a cluster) that this store may write.
func pgMayChangeSession(epoch string) string {
	return `(` + epoch + `::bigint IS NULL OR ((sessions.epoch IS NULL OR sessions.epoch = ` + epoch + ` OR NOT lease_live(sessions.epoch)) AND lease_live(` + epoch + `)))`
}

func (p *Store) PutSession(ctx context.Context, s store.Session) error {
	op := "record session " + s.ID
	self := p.Self()
	options := s.ConfigOptions
	if options == nil {
		options = map[string]string{}
	}
	tag, err := p.pool.Exec(ctx, `INSERT INTO sessions (id, agent, acp_session_id, cwd, owner, created_at, mode, config_options, replica, epoch, suspended_at)
		SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11 WHERE $10::bigint IS NULL OR lease_live($10)
		ON CONFLICT (id) DO UPDATE SET agent = excluded.agent, acp_session_id = excluded.acp_session_id, cwd = excluded.cwd,
			owner = excluded.owner, created_at = excluded.created_at, mode = excluded.mode, config_options = excluded.config_options,
			replica = excluded.replica, epoch = excluded.epoch, suspended_at = excluded.suspended_at
		WHERE `+pgMayChangeSession("$10"),
		s.ID, s.Agent, s.ACPSessionID, s.Cwd, s.Owner, s.CreatedAt.UnixNano(), s.Mode, options, self.ID, nullEpoch(self.Epoch), store.UnixNanoOrZero(s.SuspendedAt))
	if err != nil {
		return opError(op, err)
	}
	if tag.RowsAffected() == 0 {
		return fenced(op)
	}
	return nil
}

// fenced is ErrFenced for op.
func fenced(op string) error {
	return fmt.Errorf("postgres store: %s: %w", op, store.ErrFenced)
}

func (p *Store) DeleteSession(ctx context.Context, id string) error {
	op := "delete the record of session " + id
	epoch := nullEpoch(p.Self().Epoch)
	tag, err := p.pool.Exec(ctx, `DELETE FROM sessions WHERE id = $1 AND `+pgMayChangeSession("$2"), id, epoch)
	if err != nil {
		return opError(op, err)
	}
	if tag.RowsAffected() == 1 || epoch == nil {
		return nil
	}
	// Nothing deleted: a record that is not there is no error, one
	// that is there was not this store's to delete.
	var exists bool
	if err := p.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM sessions WHERE id = $1)`, id).Scan(&exists); err != nil {
		return opError(op, err)
	}
	if exists {
		return fenced(op)
	}
	return nil
}

func (p *Store) Session(ctx context.Context, id string) (store.Session, error) {
	s, err := scanPgSession(p.pool.QueryRow(ctx, pgSelectSession+` WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Session{}, store.ErrNotFound
	}
	return s, opError("read the record of session "+id, err)
}

func (p *Store) Sessions(ctx context.Context) ([]store.Session, error) {
	rows, err := p.pool.Query(ctx, pgSelectSession+` ORDER BY created_at, id`)
	if err != nil {
		return nil, opError("list session records", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Session, error) { return scanPgSession(r) })
	return out, opError("list session records", err)
}

// ClaimSession takes session id over for this store's replica when it has
// no owner or its owner's lease is not live. The UPDATE holds the row, so
// of two replicas claiming one session at once, the second finds the
// first's live lease and gets false.
func (p *Store) ClaimSession(ctx context.Context, id string) (store.Session, bool, error) {
	op := "claim session " + id
	self := p.Self()
	if self.Epoch == 0 {
		return store.Session{}, false, fmt.Errorf("postgres store: %s: the store acts for no replica (Join first): %w", op, store.ErrFenced)
	}
	s, err := scanPgSession(p.pool.QueryRow(ctx, `UPDATE sessions SET replica = $2, epoch = $3
		WHERE id = $1 AND `+pgMayChangeSession("$3")+`
		RETURNING id, agent, acp_session_id, cwd, owner, created_at, mode, config_options, replica, suspended_at`, id, self.ID, self.Epoch))
	if err == nil {
		return s, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return store.Session{}, false, opError(op, err)
	}
	var live bool
	s, err = scanPgSession(p.pool.QueryRow(ctx, pgSelectSession+` WHERE id = $1`, id))
	if err == nil {
		err = p.pool.QueryRow(ctx, `SELECT lease_live($1)`, self.Epoch).Scan(&live)
	}
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return store.Session{}, false, store.ErrNotFound
	case err != nil:
		return store.Session{}, false, opError(op, err)
	case !live:
		return s, false, fenced(op)
	}
	return s, false, nil
}
