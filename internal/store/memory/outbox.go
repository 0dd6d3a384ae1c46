package memory

import (
	"context"
	"slices"
	"time"

	"github.com/acpgate/acpgate/internal/store"
)

// memNote is a pending notification in a memory Store, with its schedule
// and claim.
type memNote struct {
	n         store.Notification
	due       time.Time // when it may be claimed next
	claimedBy string
	claimEnd  time.Time // the claim's lease ends; zero: unclaimed
}

func (m *Store) ClaimNotifications(_ context.Context, claimer string, now time.Time, lease time.Duration, limit int) ([]store.Notification, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var due []*memNote
	for _, e := range m.outbox {
		if !e.due.After(now) && (!e.claimEnd.After(now) || e.claimedBy == claimer) {
			due = append(due, e)
		}
	}
	slices.SortFunc(due, func(a, b *memNote) int { return a.due.Compare(b.due) })
	out := []store.Notification{}
	for _, e := range due[:min(len(due), max(limit, 0))] {
		e.claimedBy, e.claimEnd = claimer, now.Add(lease)
		e.n.Attempts++
		out = append(out, e.n)
	}
	store.SortNotifications(out)
	return out, nil
}

func (m *Store) FinishNotification(_ context.Context, turnID, claimer string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.outbox[turnID]; ok && e.claimedBy == claimer {
		delete(m.outbox, turnID)
	}
	return nil
}

func (m *Store) RetryNotification(_ context.Context, turnID, claimer string, next time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.outbox[turnID]; ok && e.claimedBy == claimer {
		e.claimedBy, e.claimEnd, e.due = "", time.Time{}, next
	}
	return nil
}

func (m *Store) OldestNotification(context.Context) (time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var oldest time.Time
	for _, e := range m.outbox {
		if oldest.IsZero() || e.n.CreatedAt.Before(oldest) {
			oldest = e.n.CreatedAt
		}
	}
	return oldest, nil
}
