package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/config"
	"github.com/acpgate/acpgate/internal/metrics"
	"github.com/acpgate/acpgate/internal/store"
	"github.com/acpgate/acpgate/internal/webhook"
)

// Turn-ending notifications: a turn started with a notify_url (the
// Prompt's, or its agent's) has its notification written by the store in
// the step that ends it (see store.Outbox); the notifier delivers what the
// outbox holds, whichever run of whichever replica wrote it. Nothing here
// is on a turn's path: the turn only carries its target into Begin.

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
	// notifyClaimer names the claims of a gateway outside a cluster: one
	// process at a time uses such a store, so a claim of this name found
	// at start is an earlier run's, claimable at once.
	notifyClaimer = "gateway"
)

// checkNotifyURL refuses a notify_url that is not an http(s) URL
// (INVALID_ARGUMENT) or is outside webhooks.allowed_url_prefixes
// (PERMISSION_DENIED), naming the key an operator would change.
func checkNotifyURL(w config.Webhooks, url string) error {
	if url == "" {
		return nil
	}
	if err := checkMCPURL(url); err != nil {
		return status.Errorf(codes.InvalidArgument, "notify_url %q: %v", url, err)
	}
	if !w.Enabled() {
		return status.Errorf(codes.PermissionDenied, "notify_url %q is not allowed: the operator has configured no webhooks.allowed_url_prefixes", url)
	}
	if !w.Allows(url) {
		return status.Errorf(codes.PermissionDenied, "notify_url %q is not allowed: it must start with one of the operator's webhooks.allowed_url_prefixes %q", url, w.AllowedURLPrefixes)
	}
	return nil
}

// notifyTarget is where the ending of a turn of agent, asked for by req,
// is announced: the request's notify_url, else the agent's.
func (g *Gateway) notifyTarget(req *acpgatev1.PromptRequest, agent string) string {
	if u := req.GetNotifyUrl(); u != "" {
		return u
	}
	if a, ok := g.byName[agent]; ok {
		return a.cfg.NotifyURL
	}
	return ""
}

// notifier delivers the outbox's notifications. Its goroutine is the
// Gateway's: started by startNotifier, ended by stop.
type notifier struct {
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

// startNotifier starts delivering notifications when webhooks are
// configured; without them no turn has a target, and nothing runs.
func (g *Gateway) startNotifier() error {
	w := g.cfg.Webhooks
	if !w.Enabled() {
		return nil
	}
	secret, err := webhook.ReadSecretFile(w.SecretFile)
	if err != nil {
		return fmt.Errorf("webhooks.secret_file: %w", err)
	}
	claimer := notifyClaimer
	if g.replicas != nil {
		claimer = g.replicas.self
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &notifier{
		st: g.store, send: &webhook.Sender{Secret: secret}, horizon: w.Horizon(), claimer: claimer,
		body: func(rec store.Turn) ([]byte, error) {
			t, err := g.turnProto(rec)
			if err != nil {
				return nil, err
			}
			return protojson.Marshal(t)
		},
		log: g.log, m: g.metrics.Webhooks(), cancel: cancel, done: make(chan struct{}),
	}
	g.notifier = n
	go n.run(ctx)
	return nil
}

// stop ends the notifier and waits for it: an attempt under way is
// abandoned, its claim left for the next run (of the same name) to take.
func (n *notifier) stop() {
	if n == nil {
		return
	}
	n.cancel()
	<-n.done
}

func (n *notifier) run(ctx context.Context) {
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
func (n *notifier) round(ctx context.Context) bool {
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
func (n *notifier) deliver(ctx context.Context, note store.Notification) {
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
func (n *notifier) finish(ctx context.Context, note store.Notification, result string) {
	if err := n.st.FinishNotification(ctx, note.TurnID, n.claimer); err != nil {
		if ctx.Err() == nil {
			n.log.Warn("finishing a turn notification failed; it may be delivered again", "turn", note.TurnID, "err", err)
		}
		return
	}
	n.m.Finished(result)
}
