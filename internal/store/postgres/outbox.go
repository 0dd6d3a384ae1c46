package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acpgate/acpgate/internal/store"
)

// The PostgreSQL store's outbox (see store.Outbox): the notifications table,
// which the turns_notify trigger fills as turns end (see migration
// 00004). A claim skips the rows another replica's claim holds locked
// (SKIP LOCKED), so that two replicas claiming at once take different
// notifications rather than waiting for each other.

const pgClaimNotifications = `UPDATE notifications n SET claimed_by = $1, claimed_until = $2, attempts = n.attempts + 1
	FROM (SELECT turn_id FROM notifications
		WHERE due_at <= $3 AND (claimed_until <= $3 OR claimed_by = $1)
		ORDER BY due_at LIMIT $4 FOR UPDATE SKIP LOCKED) d
	WHERE n.turn_id = d.turn_id
	RETURNING n.turn_id, n.url, n.created_at, n.attempts`

func (p *Store) ClaimNotifications(ctx context.Context, claimer string, now time.Time, lease time.Duration, limit int) ([]store.Notification, error) {
	rows, err := p.pool.Query(ctx, pgClaimNotifications, claimer, now.Add(lease).UnixNano(), now.UnixNano(), limit)
	if err != nil {
		return nil, opError("claim notifications", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Notification, error) {
		var n store.Notification
		var createdAt int64
		err := r.Scan(&n.TurnID, &n.URL, &createdAt, &n.Attempts)
		n.CreatedAt = time.Unix(0, createdAt)
		return n, err
	})
	if err != nil {
		return nil, opError("claim notifications", err)
	}
	store.SortNotifications(out)
	return out, nil
}

func (p *Store) FinishNotification(ctx context.Context, turnID, claimer string) error {
	_, err := p.pool.Exec(ctx, `DELETE FROM notifications WHERE turn_id = $1 AND claimed_by = $2`, turnID, claimer)
	return opError("finish the notification of turn "+turnID, err)
}

func (p *Store) RetryNotification(ctx context.Context, turnID, claimer string, next time.Time) error {
	_, err := p.pool.Exec(ctx, `UPDATE notifications SET claimed_by = '', claimed_until = 0, due_at = $3
		WHERE turn_id = $1 AND claimed_by = $2`, turnID, claimer, next.UnixNano())
	return opError("reschedule the notification of turn "+turnID, err)
}

func (p *Store) OldestNotification(ctx context.Context) (time.Time, error) {
	var oldest *int64
	if err := p.pool.QueryRow(ctx, `SELECT min(created_at) FROM notifications`).Scan(&oldest); err != nil {
		return time.Time{}, opError("read the oldest notification", err)
	}
	if oldest == nil {
		return time.Time{}, nil
	}
	return time.Unix(0, *oldest), nil
}
