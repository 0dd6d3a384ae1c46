package admission

import (
	"time"

	"golang.org/x/time/rate"

	"github.com/acpgate/acpgate/internal/rpcerr"
)

// callerUse is what one principal holds under its quota.
type callerUse struct {
	sessions int
	turns    int
	bucket   *rate.Limiter // nil when turns_per_minute is unlimited
}

// idle reports whether the entry holds nothing and may be forgotten:
// no sessions, no turns and a full bucket (a new one would be the same).
func (u *callerUse) idle(now time.Time) bool {
	return u.sessions == 0 && u.turns == 0 && (u.bucket == nil || u.bucket.TokensAt(now) >= float64(u.bucket.Burst()))
}

// use is principal's entry, created on first use. Called with a.mu held.
func (a *Controller) use(principal string) *callerUse {
	u, ok := a.callers[principal]
	if !ok {
		u = &callerUse{}
		if n := a.quotas.For(principal).TurnsPerMinute; n > 0 {
			// A minute's worth of turns may be started at once; then one
			// every 60/n seconds.
			u.bucket = rate.NewLimiter(rate.Limit(float64(n)/60), n)
		}
		a.callers[principal] = u
	}
	return u
}

// forget drops principal's entry once it holds nothing. Called with a.mu
// held.
func (a *Controller) forget(principal string, u *callerUse) {
	if u.idle(time.Now()) {
		delete(a.callers, principal)
	}
}

// checkSessionQuota refuses one more session of principal when its
// open_sessions quota is used up. Called with a.mu held.
func (a *Controller) checkSessionQuota(principal string) error {
	q := a.quotas.For(principal)
	if q.OpenSessions > 0 && a.callers[principal] != nil && a.callers[principal].sessions >= q.OpenSessions {
		return rpcerr.OverQuota(rpcerr.RetryDelay, "%s is at its quota of %d open sessions", rpcerr.Who(principal), q.OpenSessions)
	}
	return nil
}

// takeTurnQuota admits one more turn of principal under its
// concurrent_turns and turns_per_minute quotas, or says which refuses it
// and when to retry. A refusal takes nothing. Called with a.mu held.
func (a *Controller) takeTurnQuota(principal string) error {
	q := a.quotas.For(principal)
	u := a.use(principal)
	if q.ConcurrentTurns > 0 && u.turns >= q.ConcurrentTurns {
		a.forget(principal, u)
		return rpcerr.OverQuota(rpcerr.RetryDelay, "%s is at its quota of %d concurrent turns", rpcerr.Who(principal), q.ConcurrentTurns)
	}
	if u.bucket != nil {
		now := time.Now()
		r := u.bucket.ReserveN(now, 1)
		if d := r.DelayFrom(now); d > 0 {
			r.CancelAt(now)
			a.forget(principal, u)
			return rpcerr.OverQuota(d, "%s is at its quota of %d turns per minute; retry in %s", rpcerr.Who(principal), q.TurnsPerMinute, d.Round(time.Millisecond))
		}
	}
	u.turns++
	return nil
}
