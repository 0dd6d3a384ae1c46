package server

import (
	"context"
	"time"
)

// sweep closes sessions that have been idle past their agent's idle
// timeout and sessions whose agent has gone away, ends the suspended
// sessions past their retention or beyond limits.max_suspended (see
// sessions.Manager.Sweep), and deletes and records the turns that are due.
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
		g.sessions.Sweep(time.Now())
		g.expireTurns()
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
		g.sessions.StopPools(ctx)
	}()
	defer func() { <-pools }()
	g.sessions.CancelTurns()
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
	g.sessions.CloseAll(ctx)
}

// Close stops the janitor and closes every session, waiting as long as
// that takes (each agent's stop grace).
func (g *Gateway) Close() {
	// Closing is stopping: the kept sessions' records stay (see
	// sessions.Manager.Remove).
	g.admit.Drain()
	g.notifier.Stop()
	select {
	case <-g.janitor:
	default:
		close(g.janitor)
	}
	g.janitorWG.Wait()
	g.recordEndings()
	g.sessions.StopPools(context.Background())
	g.sessions.CloseAll(context.Background())
	if g.replicas != nil {
		g.replicas.Stop(context.Background())
	}
	// Last: an agent gets its parent-death signal when the thread that
	// started it ends.
	g.starters.close()
}
