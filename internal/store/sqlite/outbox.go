package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/acpgate/acpgate/internal/store"
)

// The SQLite store's outbox (see store.Outbox): the notifications table, which
// the turns_notify trigger fills as turns end (see schemaV8).

const sqlClaimNotifications = `UPDATE notifications SET claimed_by = ?1, claimed_until = ?2, attempts = attempts + 1
	WHERE turn_id IN (SELECT turn_id FROM notifications
		WHERE due_at <= ?3 AND (claimed_until <= ?3 OR claimed_by = ?1) ORDER BY due_at LIMIT ?4)
	RETURNING turn_id, url, created_at, attempts`

func (s *Store) ClaimNotifications(ctx context.Context, claimer string, now time.Time, lease time.Duration, limit int) ([]store.Notification, error) {
	rows, err := s.write.QueryContext(ctx, sqlClaimNotifications, claimer, now.Add(lease).UnixNano(), now.UnixNano(), limit)
	if err != nil {
		return nil, s.opError("claim notifications", err)
	}
	out, err := scanNotifications(rows, func(r *sql.Rows, n *store.Notification, createdAt *int64) error {
		return r.Scan(&n.TurnID, &n.URL, createdAt, &n.Attempts)
	})
	if err != nil {
		return nil, s.opError("claim notifications", err)
	}
	return out, nil
}

// scanNotifications reads rows of notifications, oldest first.
func scanNotifications(rows *sql.Rows, scan func(*sql.Rows, *store.Notification, *int64) error) ([]store.Notification, error) {
	defer rows.Close()
	out := []store.Notification{}
	for rows.Next() {
		var n store.Notification
		var createdAt int64
		if err := scan(rows, &n, &createdAt); err != nil {
			return nil, err
		}
		n.CreatedAt = time.Unix(0, createdAt)
		out = append(out, n)
	}
	store.SortNotifications(out)
	return out, rows.Err()
}

func (s *Store) FinishNotification(ctx context.Context, turnID, claimer string) error {
	_, err := s.write.ExecContext(ctx, `DELETE FROM notifications WHERE turn_id = ? AND claimed_by = ?`, turnID, claimer)
	if err != nil {
		return s.opError("finish the notification of turn "+turnID, err)
	}
	return nil
}

func (s *Store) RetryNotification(ctx context.Context, turnID, claimer string, next time.Time) error {
	_, err := s.write.ExecContext(ctx, `UPDATE notifications SET claimed_by = '', claimed_until = 0, due_at = ?
		WHERE turn_id = ? AND claimed_by = ?`, next.UnixNano(), turnID, claimer)
	if err != nil {
		return s.opError("reschedule the notification of turn "+turnID, err)
	}
	return nil
}

func (s *Store) OldestNotification(ctx context.Context) (time.Time, error) {
	var oldest sql.NullInt64
	if err := s.read.QueryRowContext(ctx, `SELECT min(created_at) FROM notifications`).Scan(&oldest); err != nil {
		return time.Time{}, s.opError("read the oldest notification", err)
	}
	if !oldest.Valid {
		return time.Time{}, nil
	}
	return time.Unix(0, oldest.Int64), nil
}
