package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/acpgate/acpgate/internal/metrics"
	"github.com/acpgate/acpgate/internal/store"
)

// LeaseOptions configure a Lease.
type LeaseOptions struct {
	// Store is the shared store.
	Store store.Cluster
	// Self is this replica: its ID, Address and MaxSessions.
	Self store.Replica
	// TTL is how long the lease lasts unrenewed; it is renewed, and lost
	// replicas are reaped, every TTL/3.
	TTL time.Duration
	// Load reports this replica's open sessions and running turns, for
	// placement.
	Load func() (sessions, runningTurns int)
	// Terminal is the terminal of a turn a lost replica left running.
	Terminal func(store.Turn) store.Event
	// Lost is called, once per loss, when the lease is lost: the
	// database said so (it expired unrenewed, or a newer Join of the same
	// ID superseded it), or the lease has gone unrenewed for TTL by this
	// process's clock (the database is unreachable, and a live replica
	// that reaches it may already be reaping). The replica no longer owns
	// its turns and sessions: Lost stops their agents before it returns,
	// within a bound of its own, since the lease joins again only after
	// it. Another epoch must not run beside agents of the old one.
	Lost func(error)
	// Rejoined is called with the replica as it joined again, with a new
	// epoch, after a loss: it serves again.
	Rejoined func(store.Replica)
	// Logger receives what the lease does.
	Logger *slog.Logger
	// Metrics records the renewals that failed, the replicas reaped and
	// the live replicas; nil records nothing.
	Metrics *metrics.Cluster
}

// Lease holds this replica's lease: joined by Start, renewed until Stop,
// reaping the replicas whose leases expire.
type Lease struct {
	o    LeaseOptions
	stop chan struct{}
	done chan struct{}
}

// StartLease joins the cluster and starts renewing. Before it returns,
// every replica already lost has been reaped once, so that a restarted
// replica finds the turns of its previous run ended.
func StartLease(ctx context.Context, o LeaseOptions) (*Lease, error) {
	if _, err := o.Store.Join(ctx, o.Self, o.TTL); err != nil {
		return nil, fmt.Errorf("joining the cluster as %s: %w", o.Self.ID, err)
	}
	l := &Lease{o: o, stop: make(chan struct{}), done: make(chan struct{})}
	l.reap(ctx)
	go l.run()
	return l, nil
}

// Self is the replica as it joined (with its epoch).
func (l *Lease) Self() store.Replica { return l.o.Store.Self() }

func (l *Lease) run() {
	defer close(l.done)
	t := time.NewTicker(l.o.TTL / 3)
	defer t.Stop()
	// renewed is when the last renewal that succeeded began: the
	// database's expiry is TTL after a moment later than that, so the
	// lease cannot outlive renewed+TTL by this clock.
	renewed, lost := time.Now(), false
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), l.o.TTL/3)
		if lost {
			lost = !l.rejoin(ctx)
			if !lost {
				renewed = time.Now()
			}
			cancel()
			continue
		}
		began := time.Now()
		sessions, running := l.o.Load()
		err := l.o.Store.Renew(ctx, sessions, running, l.o.TTL)
		switch {
		case err == nil:
			renewed = began
		case errors.Is(err, store.ErrLeaseLost):
			l.o.Metrics.RenewalFailed()
			l.lose(err)
			lost = true
		case time.Since(renewed) >= l.o.TTL:
			l.o.Metrics.RenewalFailed()
			l.lose(fmt.Errorf("the lease went unrenewed for %s (lease_ttl), the database unreachable: %w", l.o.TTL, err))
			lost = true
		default:
			// The database is unreachable: keep trying until the lease
			// would have run out.
			l.o.Metrics.RenewalFailed()
			l.o.Logger.Warn("renewing the replica's lease failed", "replica", l.o.Self.ID, "err", err)
		}
		if !lost {
			l.reap(ctx)
			if live, err := l.o.Store.Replicas(ctx); err == nil {
				l.o.Metrics.LiveReplicas(len(live))
			}
		}
		cancel()
	}
}

// lose gives up what the lost lease owned: logged and counted once per
// loss, then Lost stops the agents.
func (l *Lease) lose(err error) {
	l.o.Metrics.LeaseLost()
	l.o.Logger.Error("this replica lost its lease: another replica may end its turns; it stops their agents and joins again with a new epoch",
		"replica", l.o.Self.ID, "epoch", l.o.Store.Self().Epoch, "err", err)
	l.o.Lost(err)
}

// rejoin joins the cluster again after a loss, with a new epoch, and
// reaps; it reports whether it joined. A failure (the database is still
// unreachable) is retried on the next tick.
func (l *Lease) rejoin(ctx context.Context) bool {
	self, err := l.o.Store.Join(ctx, l.o.Self, l.o.TTL)
	if err != nil {
		l.o.Logger.Warn("joining the cluster again failed; retrying", "replica", l.o.Self.ID, "err", err)
		return false
	}
	l.o.Metrics.Rejoined()
	l.o.Logger.Info("this replica joined the cluster again and serves", "replica", self.ID, "epoch", self.Epoch)
	l.reap(ctx)
	l.o.Rejoined(self)
	return true
}

// reap ends the leases that expired, and their turns.
func (l *Lease) reap(ctx context.Context) {
	reaped, ended, err := l.o.Store.Reap(ctx, l.o.Terminal)
	if err != nil {
		l.o.Logger.Warn("reaping lost replicas failed", "err", err)
		return
	}
	l.o.Metrics.Reaped(len(reaped))
	for _, r := range reaped {
		l.o.Logger.Warn("a replica's lease expired: its running turns end and its sessions are released", "lost_replica", r.ID, "epoch", r.Epoch)
	}
	for _, t := range ended {
		l.o.Logger.Warn("a turn of a lost replica has ended", "turn", t.ID, "agent", t.Agent, "lost_replica", t.Replica, "last_seq", t.LastSeq)
	}
}

// Stop stops renewing and leaves the cluster: called after the replica has
// ended its turns, so that nothing of it is left to reap.
func (l *Lease) Stop(ctx context.Context) {
	select {
	case <-l.stop:
		return
	default:
	}
	close(l.stop)
	<-l.done
	if err := l.o.Store.Leave(ctx); err != nil {
		l.o.Logger.Warn("leaving the cluster failed; the other replicas will reap this replica when its lease expires", "err", err)
	}
}
