package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/acpgate/acpgate/internal/store"
)

// The SQLite store's session records: one row each in the sessions table
// (schema version 4; suspended_at since version 5).

func (s *Store) PutSession(ctx context.Context, sess store.Session) error {
	options := sess.ConfigOptions
	if options == nil {
		options = map[string]string{}
	}
	encoded, err := json.Marshal(options)
	if err != nil {
		return fmt.Errorf("sqlite store %s: record session %s: encoding its config options: %w", s.path, sess.ID, err)
	}
	return s.inTx(ctx, "record session "+sess.ID, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO sessions (id, agent, acp_session_id, cwd, owner, created_at, mode, config_options, suspended_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			sess.ID, sess.Agent, sess.ACPSessionID, sess.Cwd, sess.Owner, sess.CreatedAt.UnixNano(), sess.Mode, string(encoded), store.UnixNanoOrZero(sess.SuspendedAt))
		return err
	})
}

func (s *Store) DeleteSession(ctx context.Context, id string) error {
	return s.inTx(ctx, "delete the record of session "+id, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE id = ?`, id)
		return err
	})
}

// sqliteSelectSession reads session records in scanSQLiteSession's order.
const sqliteSelectSession = `SELECT id, agent, acp_session_id, cwd, owner, created_at, mode, config_options, suspended_at FROM sessions`

// scanSQLiteSession reads one session record.
func scanSQLiteSession(r interface{ Scan(...any) error }) (store.Session, error) {
	var sess store.Session
	var createdAt, suspendedAt int64
	var options string
	if err := r.Scan(&sess.ID, &sess.Agent, &sess.ACPSessionID, &sess.Cwd, &sess.Owner, &createdAt, &sess.Mode, &options, &suspendedAt); err != nil {
		return store.Session{}, err
	}
	sess.CreatedAt = time.Unix(0, createdAt)
	if suspendedAt != 0 {
		sess.SuspendedAt = time.Unix(0, suspendedAt)
	}
	if err := json.Unmarshal([]byte(options), &sess.ConfigOptions); err != nil {
		return store.Session{}, fmt.Errorf("session %s: its config options do not decode: %w", sess.ID, err)
	}
	if len(sess.ConfigOptions) == 0 {
		sess.ConfigOptions = nil
	}
	return sess, nil
}

func (s *Store) Session(ctx context.Context, id string) (store.Session, error) {
	sess, err := scanSQLiteSession(s.read.QueryRowContext(ctx, sqliteSelectSession+` WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Session{}, store.ErrNotFound
	}
	if err != nil {
		return store.Session{}, s.opError("read the record of session "+id, err)
	}
	return sess, nil
}

func (s *Store) Sessions(ctx context.Context) ([]store.Session, error) {
	const op = "list session records"
	rows, err := s.read.QueryContext(ctx, sqliteSelectSession+` ORDER BY created_at, id`)
	if err != nil {
		return nil, s.opError(op, err)
	}
	defer rows.Close()
	var out []store.Session
	for rows.Next() {
		sess, err := scanSQLiteSession(rows)
		if err != nil {
			return nil, s.opError(op, err)
		}
		out = append(out, sess)
	}
	if err := rows.Err(); err != nil {
		return nil, s.opError(op, err)
	}
	return out, nil
}
