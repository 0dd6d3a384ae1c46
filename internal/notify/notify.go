// Package notify delivers turn-ending notifications: a turn started with
// a notify_url has its notification written by the store in the step that
// ends it (store.Outbox), and the Notifier posts what the outbox holds,
// whichever run of whichever replica wrote it, signed (package webhook),
// retried until webhooks.retry_horizon. Nothing here is on a turn's path.
package notify

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/acpgate/acpgate/internal/metrics"
	"github.com/acpgate/acpgate/internal/store"
	"github.com/acpgate/acpgate/internal/webhook"
)

const (
	// notifyPoll is how often the notifier looks at the outbox: the delay
	// between a turn's ending and its notification's first attempt is at
	// most this. One indexed read of an empty table costs the store
	// nothing worth counting.
	notifyPoll = 500 * time.Millisecond
	// notifyLease is how long a claim keeps a notification from other
	// replicas: far above an attempt's bound (webhook.DefaultAttemptTimeout),
	// so that a live claimer always finishes first; a dead one's
	// notifications are claimed again after it.
	notifyLease = time.Minute
	// notifyBatch is how many notifications one round claims and delivers
	// at once: a slow receiver holds up at most this many.
	notifyBatch = 16
	// DefaultClaimer names the claims of a gateway outside a cluster: one
	// process at a time uses such a store, so a claim of this name found
	// at start is an earlier run's, claimable at once.
	DefaultClaimer = "gateway"
)

// Notifier delivers the outbox's notifications. Its goroutine is its
// starter's: started by Start, ended by Stop.
type Notifier struct {
	st      store.Store
	send    *webhook.Sender
	horizon time.Duration
	claimer string
	body    func(store.Turn) ([]byte, error)
	log     *slog.Logger
	m       *metrics.Webhooks

	// failing is whether the last read of the outbox failed: an outage
	// of the store is logged when it starts, not every notifyPoll. Only
	// run's goroutine uses it.
	failing bool

	cancel context.CancelFunc
	done   chan struct{}
}

// Options are what a Notifier delivers with.
type Options struct {
	// Store holds the outbox.
	Store store.Store
	// Sender signs and posts a notification.
	Sender *webhook.Sender
	// Horizon is webhooks.retry_horizon: how long a notification is
	// retried before it is given up.
	Horizon time.Duration
	// Claimer names this gateway's claims: its replica id, or
	// DefaultClaimer outside a cluster.
	Claimer string
	// Body is the notification's body for a turn's record.
	Body    func(store.Turn) ([]byte, error)
	Log     *slog.Logger
	Metrics *metrics.Webhooks
}

// Start starts delivering the outbox's notifications; Stop ends it.
func Start(opts Options) *Notifier {
	ctx, cancel := context.WithCancel(context.Background())
	n := &Notifier{
		st: opts.Store, send: opts.Sender, horizon: opts.Horizon, claimer: opts.Claimer, body: opts.Body,
		log: opts.Log, m: opts.Metrics, cancel: cancel, done: make(chan struct{}),
	}
	go n.run(ctx)
	return n
}

// Stop ends the notifier and waits for it: an attempt under way is
// abandoned, its claim left for the next run (of the same name) to take.
func (n *Notifier) Stop() {
	if n == nil {
		return
	}
	n.cancel()
	<-n.done
}

func (n *Notifier) run(ctx context.Context) {
	defer close(n.done)
	for {
		for n.round(ctx) {
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(notifyPoll):
		}
	}
}

// round records the queue's age, then claims and delivers one batch; it
// reports whether the batch was full (more may be due at once).
func (n *Notifier) round(ctx context.Context) bool {
	oldest, err := n.st.OldestNotification(ctx)
	if err != nil {
		if ctx.Err() == nil && !n.failing {
			n.log.Warn("reading the outbox of turn notifications failed; retrying every poll until it answers", "err", err, "poll", notifyPoll)
		}
		n.failing = true
		return false
	}
	if n.failing {
		n.log.Info("the outbox of turn notifications answers again")
		n.failing = false
	}
	if oldest.IsZero() {
		n.m.OldestPending(0)
		return false
	}
	n.m.OldestPending(time.Since(oldest).Seconds())
	due, err := n.st.ClaimNotifications(ctx, n.claimer, time.Now(), notifyLease, notifyBatch)
	if err != nil {
		if ctx.Err() == nil {
			n.log.Warn("claiming turn notifications failed; retrying", "err", err)
		}
		return false
	}
	var wg sync.WaitGroup
	for _, note := range due {
		wg.Go(func() { n.deliver(ctx, note) })
	}
	wg.Wait()
	return len(due) == notifyBatch
}

// webhookID is the notification's webhook-id: the turn's id and attempt,
// the same on every retry, so that a receiver processes it once.
func webhookID(rec store.Turn) string {
	return rec.ID + "." + strconv.FormatUint(uint64(rec.Attempt), 10)
}

// deliver makes one attempt at note, then finishes it or schedules its
// retry.
func (n *Notifier) deliver(ctx context.Context, note store.Notification) {
	log := n.log.With("turn", note.TurnID, "url", note.URL, "attempt", note.Attempts)
	rec, err := n.st.Get(ctx, note.TurnID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		log.Warn("dropping a turn notification: the turn was deleted (turn_retention) before it could be delivered")
		n.finish(ctx, note, metrics.WebhookTurnGone)
		return
	case err != nil:
		// The claim lapses and the notification is claimed again.
		log.Warn("reading a notified turn failed; retrying after the claim's lease", "err", err)
		return
	}
	body, err := n.body(rec)
	if err == nil {
		err = n.send.Attempt(ctx, note.URL, webhookID(rec), body)
	}
	if ctx.Err() != nil {
		return
	}
	if err == nil {
		n.finish(ctx, note, metrics.WebhookDelivered)
		return
	}
	n.m.Failed()
	next := time.Now().Add(n.send.Backoff(note.Attempts))
	if next.Sub(note.CreatedAt) > n.horizon {
		log.Error("giving up a turn notification: webhooks.retry_horizon has passed without a 2xx answer", "err", err, "retry_horizon", n.horizon)
		n.finish(ctx, note, metrics.WebhookGivenUp)
		return
	}
	log.Info("a turn notification was not delivered; retrying", "err", err, "next", next)
	if err := n.st.RetryNotification(ctx, note.TurnID, n.claimer, next); err != nil && ctx.Err() == nil {
		log.Warn("rescheduling a turn notification failed; it is retried after the claim's lease", "err", err)
	}
}

// finish removes a notification from the outbox with result.
func (n *Notifier) finish(ctx context.Context, note store.Notification, result string) {
	if err := n.st.FinishNotification(ctx, note.TurnID, n.claimer); err != nil {
		if ctx.Err() == nil {
			n.log.Warn("finishing a turn notification failed; it may be delivered again", "turn", note.TurnID, "err", err)
		}
		return
	}
	n.m.Finished(result)
}
