package server

import (
	"context"
	"sync"
	"time"

	"github.com/acpgate/acpgate/outcome"
)

// msgShuttingDown is what a call refused, or a turn cancelled, because the
// gateway is shutting down is told: the same cause as package admission's
// refusals while it drains.
const msgShuttingDown = outcome.CauseShutdown

// sweep closes sessions that have been idle past their agent's idle
// timeout and sessions whose agent has gone away, and ends the suspended
// sessions past their retention or beyond limits.max_suspended.
func (g *Gateway) sweep(interval time.Duration) {
	defer g.janitorWG.Done()
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-g.janitor:
			return
		case <-ticker.C:
		}
		for _, live := range g.sessions.all() {
			if why := g.stale(live); why != "" && !g.suspend(live, why) {
				g.log.Info("closing an idle or ended session", "session", live.id, "why", why)
				g.remove(live)
			}
		}
		g.expireTurns()
		g.expireSuspended(time.Now())
		g.recordEndings()
	}
}

// recordEndings records the terminals the store refused when their turns
// ended (see journal.end), once it takes them: so that the record, and a
// later start of the gateway, says what the turns' streams said, not that
// the gateway stopped.
func (g *Gateway) recordEndings() {
	for _, t := range g.turns.All() {
		if t.Journal.RecordLate(context.Background()) {
			g.turns.Remove(t.Rec.ID)
		}
	}
}

// expireTurns deletes the turns that ended more than turn_retention ago,
// journals and all; their request_ids are free again.
func (g *Gateway) expireTurns() {
	n, err := g.store.DeleteEnded(context.Background(), time.Now().Add(-g.cfg.TurnRetention))
	switch {
	case err != nil:
		g.log.Warn("deleting expired turns failed", "err", err)
	case n > 0:
		g.log.Info("deleted expired turns", "turns", n, "retention", g.cfg.TurnRetention)
	}
}

// stale says why the janitor should close (or suspend) live: its agent has
// gone, or it has been idle past its agent's idle timeout; "" when it
// should not.
func (g *Gateway) stale(live *liveSession) string {
	since, idle := live.idleSince()
	if !idle {
		return ""
	}
	select {
	case <-live.sess.Done():
		return "its agent has gone"
	default:
	}
	if timeout := live.agent.cfg.IdleTimeout; !live.oneShot && timeout > 0 && time.Since(since) > timeout {
		return "idle past its agent's idle_timeout"
	}
	return ""
}

// killReserve is the part of the shutdown grace kept for stopping agents
// and delivering the last terminals after waiting for turns to end.
func killReserve(grace time.Duration) time.Duration {
	return min(grace/5, 2*time.Second)
}

// Drain begins shutdown and ends once every agent is stopped, within ctx's
// deadline plus the moment it takes to kill what is left: new calls are
// refused, running turns are cancelled through session/cancel, and Drain
// waits for them to end until shortly before the deadline (killReserve);
// then every session is closed, gracefully while time remains, and every
// agent still running when ctx ends is killed outright. A client that
// stopped reading holds none of this up: its turn ends without it. Warm
// processes, which serve no turn, are stopped from the start, under the
// same deadline.
func (g *Gateway) Drain(ctx context.Context) {
	g.admit.Drain()
	pools := make(chan struct{})
	go func() {
		defer close(pools)
		g.stopPools(ctx)
	}()
	defer func() { <-pools }()
	for _, l := range g.sessions.all() {
		l.sess.Cancel(msgShuttingDown)
	}
	// Turns whose one-shot agent is still starting have no session yet.
	for _, t := range g.turns.All() {
		t.Cancel()
	}
	turnsCtx := ctx
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		turnsCtx, cancel = context.WithDeadline(ctx, deadline.Add(-killReserve(time.Until(deadline))))
		defer cancel()
	}
	if !g.admit.WaitTurns(turnsCtx) {
		g.log.Warn("shutdown grace is running out with turns still running; stopping their agents")
	}
	g.closeAll(ctx)
}

// Close stops the janitor and closes every session, waiting as long as
// that takes (each agent's stop grace).
func (g *Gateway) Close() {
	// Closing is stopping: the kept sessions' records stay (see remove).
	g.admit.Drain()
	g.notifier.Stop()
	select {
	case <-g.janitor:
	default:
		close(g.janitor)
	}
	g.janitorWG.Wait()
	g.recordEndings()
	g.stopPools(context.Background())
	g.closeAll(context.Background())
	g.stopReplicas(context.Background())
}

// closeAll closes every session concurrently; once ctx ends, the agents
// still running are killed instead of being given their grace.
func (g *Gateway) closeAll(ctx context.Context) { g.stopSessions(ctx, g.remove) }

// stopSessions stops every session concurrently with stop; once ctx ends,
// the agents still running are killed instead of being given their grace.
func (g *Gateway) stopSessions(ctx context.Context, stop func(*liveSession)) {
	lives := g.sessions.all()
	var wg sync.WaitGroup
	for _, l := range lives {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stop(l)
		}()
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	g.log.Warn("shutdown grace elapsed; killing the agents still running", "sessions", len(lives))
	for _, l := range lives {
		l.kill()
	}
	<-done
}
