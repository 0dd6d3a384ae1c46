package store

import (
	"cmp"
	"context"
	"slices"
	"time"
)

// Notification is a pending announcement of a turn's ending: a POST of
// the turn to URL. End writes it with the terminal of a turn that has a
// NotifyURL, in the same step, so that a gateway killed between the two
// cannot keep the ending and lose the announcement; it stays until its
// delivery is finished (delivered or given up).
type Notification struct {
	TurnID string
	URL    string
	// CreatedAt is when the turn ended (its EndedAt): a delivery's
	// horizon and the queue's age count from it.
	CreatedAt time.Time
	// Attempts counts the claims of the notification, this one included:
	// each claim is one delivery attempt.
	Attempts int
}

// Outbox keeps the notifications of ended turns until they are
// delivered. A notification is delivered by whoever claims it: a claim
// lasts a lease, so that of several gateways on one store exactly one
// delivers each notification, and one whose claimer died is claimed
// again once the lease has passed. Its methods are safe for concurrent
// use.
type Outbox interface {
	// ClaimNotifications claims up to limit notifications due at now
	// (not waiting for a retry) for claimer until now+lease, and returns
	// them, the longest due first. A notification is claimable when no
	// claim holds it, its claim's lease has passed, or its claimer is
	// claimer itself: one name is one process's at a time, so a claim of
	// its own name is one a killed earlier run left behind.
	ClaimNotifications(ctx context.Context, claimer string, now time.Time, lease time.Duration, limit int) ([]Notification, error)
	// FinishNotification deletes a notification claimer holds (delivered,
	// or given up). A notification another has claimed since is left to
	// it, without an error.
	FinishNotification(ctx context.Context, turnID, claimer string) error
	// RetryNotification releases claimer's claim of a notification and
	// makes it due again at next.
	RetryNotification(ctx context.Context, turnID, claimer string, next time.Time) error
	// OldestNotification is the CreatedAt of the oldest pending
	// notification, claimed or not; the zero time when there is none.
	OldestNotification(ctx context.Context) (time.Time, error)
}

// SortNotifications puts notifications oldest first (then by turn id), as
// every backend's ClaimNotifications returns them.
func SortNotifications(ns []Notification) {
	slices.SortFunc(ns, func(a, b Notification) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.TurnID, b.TurnID))
	})
}
