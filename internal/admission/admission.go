// Package admission decides what may start in the gateway: a session,
// under the gateway-wide and per-agent limits and the caller's quotas; a
// warm process, under limits.max_warm; a turn, under the caller's quotas
// and while the gateway is not draining; an agent process's start-up,
// under limits.max_starting_agents (Starts, which waits where the others
// refuse). Every such rule is checked here
// and nowhere else, under one lock, so that concurrent calls cannot slip
// past a limit between a check and a count.
//
// Refusals are gRPC statuses: RESOURCE_EXHAUSTED with a RetryInfo for a
// quota (rpcerr.OverQuota), with an ErrorInfo for a session limit
// (AtSessionLimit tells them apart), UNAVAILABLE while draining.
package admission

import (
	"context"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/acpgate/acpgate/internal/config"
	"github.com/acpgate/acpgate/outcome"
)

// msgShuttingDown is what a call refused while the gateway drains is told.
const msgShuttingDown = outcome.CauseShutdown

// Controller decides what may start: a session, against the gateway-wide
// and the per-agent limit, and a turn, while the gateway is not draining.
// Every such rule is checked here and nowhere else.
//
// A session is counted from the moment it is admitted, before its agent is
// spawned, not from the moment its handshake completes: counting only
// finished handshakes let fifty concurrent CreateSession calls past a limit
// of six, since none of them had finished when the others were checked. A
// slot is released exactly once, when the session fails to open or when it
// is closed.
//
// Warm processes (package sessions' warm pool) are counted here too,
// against maxWarm and apart from the sessions: a warm process serves no one
// until it is taken, so it must not refuse a caller a session. Taking one
// turns it into a session, which a session slot (reserved before the take)
// already counts; the warm slot is then given back.
//
// Each caller's quotas (see quota.go) are counted under the same lock: a
// session slot and an admitted turn carry the principal they were admitted
// for and give its count back exactly once.
type Controller struct {
	maxSessions int
	maxWarm     int
	quotas      config.Quotas

	mu       sync.Mutex
	open     int                   // sessions open or opening, all agents
	warm     int                   // warm processes ready or starting, all agents
	perAgent map[string]int        // the same, by agent
	callers  map[string]*callerUse // what each principal holds, by name
	turnsOf  map[string]string     // admitted turns not yet ended: id → principal
	draining bool
	turns    sync.WaitGroup // turns admitted and not yet ended
}

// New is a Controller of at most maxSessions sessions and maxWarm warm
// processes, all agents together, and of each caller's quotas.
func New(maxSessions, maxWarm int, quotas config.Quotas) *Controller {
	return &Controller{
		maxSessions: maxSessions,
		maxWarm:     maxWarm,
		quotas:      quotas,
		perAgent:    make(map[string]int),
		callers:     make(map[string]*callerUse),
		turnsOf:     make(map[string]string),
	}
}

// Slot is one admitted session's place under the limits.
type Slot struct {
	a         *Controller
	agent     string
	principal string
	once      sync.Once
}

// reserveSession admits one more session of agent for principal; agent's
// own limit is agentMax (0: none). Otherwise it says which limit or quota
// refuses it.
func (a *Controller) ReserveSession(principal, agent string, agentMax int) (*Slot, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.draining:
		return nil, status.Error(codes.Unavailable, msgShuttingDown)
	case a.open >= a.maxSessions:
		return nil, sessionLimit("the gateway is at its limit of %d open sessions", a.maxSessions)
	case agentMax > 0 && a.perAgent[agent] >= agentMax:
		return nil, sessionLimit("agent %q is at its limit of %d open sessions", agent, agentMax)
	}
	if err := a.checkSessionQuota(principal); err != nil {
		return nil, err
	}
	a.open++
	a.perAgent[agent]++
	a.use(principal).sessions++
	return &Slot{a: a, agent: agent, principal: principal}, nil
}

// Release gives the slot back; later calls do nothing.
func (s *Slot) Release() {
	s.once.Do(func() {
		s.a.mu.Lock()
		defer s.a.mu.Unlock()
		s.a.open--
		s.a.perAgent[s.agent]--
		u := s.a.use(s.principal)
		u.sessions--
		s.a.forget(s.principal, u)
	})
}

// WarmSlot is one warm process's place under limits.max_warm.
type WarmSlot struct {
	a    *Controller
	once sync.Once
}

// reserveWarm admits one more warm process, or reports false while the
// gateway drains or holds limits.max_warm of them.
func (a *Controller) ReserveWarm() (*WarmSlot, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.draining || a.warm >= a.maxWarm {
		return nil, false
	}
	a.warm++
	return &WarmSlot{a: a}, true
}

// Release gives the warm slot back; later calls do nothing.
func (w *WarmSlot) Release() {
	w.once.Do(func() {
		w.a.mu.Lock()
		defer w.a.mu.Unlock()
		w.a.warm--
	})
}

// AdmitTurn admits turn id for principal unless the gateway is draining
// or the principal's quota refuses it (a gRPC status); the caller calls
// TurnEnded(id) when the turn has ended.
func (a *Controller) AdmitTurn(principal, id string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.draining {
		return status.Error(codes.Unavailable, msgShuttingDown)
	}
	if err := a.takeTurnQuota(principal); err != nil {
		return err
	}
	a.turnsOf[id] = principal
	a.turns.Add(1)
	return nil
}

// TurnEnded gives back what AdmitTurn took for turn id; later calls, and
// calls for a turn never admitted, do nothing.
func (a *Controller) TurnEnded(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	principal, ok := a.turnsOf[id]
	if !ok {
		return
	}
	delete(a.turnsOf, id)
	u := a.use(principal)
	u.turns--
	a.forget(principal, u)
	a.turns.Done()
}

// Drain refuses everything from now on: the gateway is shutting down.
func (a *Controller) Drain() {
	a.mu.Lock()
	a.draining = true
	a.mu.Unlock()
}

// IsDraining reports whether Drain was called.
func (a *Controller) IsDraining() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.draining
}

// WaitTurns waits until every admitted turn has ended or ctx ends, and
// reports whether they all ended: shutdown waits for them before it
// stops their agents.
func (a *Controller) WaitTurns(ctx context.Context) bool {
	done := make(chan struct{})
	go func() {
		a.turns.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}
