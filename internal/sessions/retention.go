package sessions

import (
	"slices"
	"time"
)

// expireSuspended ends the suspended sessions nobody re-opened within
// their agent's suspended_retention, then, while more than
// limits.max_suspended remain, those suspended longest: each is ended and
// its record deleted, as CloseSession would. Without it a suspended
// session whose agent cannot re-open it (say it forgot the conversation)
// would stay recorded until its client closed it, which a client that went
// away never does.
//
// A session being re-opened at that moment is left alone: its turn or
// CreateSession decides its fate, and the next sweep looks again.
func (m *Manager) expireSuspended(now time.Time) {
	all := m.reg.allSuspended()
	kept := all[:0]
	for _, susp := range all {
		retention := m.cfg.SuspendedRetention
		if entry, ok := m.agents.byName[susp.rec.Agent]; ok {
			retention = entry.cfg.SuspendedRetention
		}
		if now.Sub(susp.rec.SuspendedAt) < retention {
			kept = append(kept, susp)
			continue
		}
		if susp.claim() {
			m.log.Info("ending a suspended session not re-opened within suspended_retention", "session", susp.rec.ID, "agent", susp.rec.Agent,
				"suspended_at", susp.rec.SuspendedAt, "suspended_retention", retention)
			m.forget(susp)
		}
	}
	over := len(kept) - m.cfg.Limits.MaxSuspended
	if over <= 0 {
		return
	}
	slices.SortFunc(kept, func(a, b *Suspended) int { return a.rec.SuspendedAt.Compare(b.rec.SuspendedAt) })
	for _, susp := range kept {
		if over == 0 {
			return
		}
		if susp.claim() {
			m.log.Warn("ending the session suspended longest: the suspended sessions are over limits.max_suspended", "session", susp.rec.ID, "agent", susp.rec.Agent,
				"suspended_at", susp.rec.SuspendedAt, "max_suspended", m.cfg.Limits.MaxSuspended)
			m.forget(susp)
			over--
		}
	}
}
