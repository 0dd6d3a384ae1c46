package sessions

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

// Sweep closes the sessions that have been idle past their agent's idle
// timeout and those whose agent has gone away (suspending those that can
// be re-opened), and ends the suspended sessions past their retention or
// beyond limits.max_suspended. The gateway's janitor calls it on every
// tick.
func (m *Manager) Sweep(now time.Time) {
	for _, live := range m.reg.all() {
		if why := live.stale(); why != "" && !m.suspend(live, why) {
			m.log.Info("closing an idle or ended session", "session", live.id, "why", why)
			m.Remove(live)
		}
	}
	m.expireSuspended(now)
}

// CancelTurns cancels the turn running on every open session, through
// session/cancel, as the gateway shuts down.
func (m *Manager) CancelTurns() {
	for _, l := range m.reg.all() {
		l.sess.Cancel(msgShuttingDown)
	}
}

// CloseAll closes every session concurrently; once ctx ends, the agents
// still running are killed instead of being given their grace.
func (m *Manager) CloseAll(ctx context.Context) { m.stopSessions(ctx, m.Remove) }

// Disown gives up every session, open or suspended, without touching
// their records: a replica that lost its lease no longer owns them, and
// another replica re-opens them. The agents get their stop grace until ctx
// ends, and are killed after it.
func (m *Manager) Disown(ctx context.Context) {
	for _, s := range m.reg.allSuspended() {
		m.reg.deleteSuspended(s)
	}
	m.stopSessions(ctx, func(l *Live) {
		if m.reg.delete(l) && l.close() {
			m.log.Info("stopped the agent of a session this replica no longer owns", "agent", l.agent.cfg.Name, "session", l.id)
		}
	})
}

// stopSessions stops every session concurrently with stop; once ctx ends,
// the agents still running are killed instead of being given their grace.
func (m *Manager) stopSessions(ctx context.Context, stop func(*Live)) {
	lives := m.reg.all()
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
	m.log.Warn("shutdown grace elapsed; killing the agents still running", "sessions", len(lives))
	for _, l := range lives {
		l.kill()
	}
	<-done
}
