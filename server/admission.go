package server

import (
	"context"
	"sync"

	"github.com/acpgate/acpgate/outcome"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// msgShuttingDown is what a call refused while the gateway drains is told.
const msgShuttingDown = outcome.CauseShutdown

// admission decides what may start: a session, against the gateway-wide and
// the per-agent limit, and a turn, while the gateway is not draining. Every
// such rule is checked here and nowhere else.
//
// A session is counted from the moment it is admitted, before its agent is
// spawned, not from the moment its handshake completes: counting only
// finished handshakes let fifty concurrent CreateSession calls past a limit
// of six, since none of them had finished when the others were checked. A
// slot is released exactly once, when the session fails to open or when it
// is closed.
type admission struct {
	maxSessions int

	mu       sync.Mutex
	open     int            // sessions open or opening, all agents
	perAgent map[string]int // the same, by agent
	draining bool
	turns    sync.WaitGroup // turns admitted and not yet ended
}

func newAdmission(maxSessions int) *admission {
	return &admission{maxSessions: maxSessions, perAgent: make(map[string]int)}
}

// slot is one admitted session's place under the limits.
type slot struct {
	a     *admission
	agent string
	once  sync.Once
}

// reserveSession admits one more session of agent, whose own limit is
// agentMax (0: none), or says which limit refuses it.
func (a *admission) reserveSession(agent string, agentMax int) (*slot, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.draining:
		return nil, status.Error(codes.Unavailable, msgShuttingDown)
	case a.open >= a.maxSessions:
		return nil, status.Errorf(codes.ResourceExhausted, "the gateway is at its limit of %d open sessions", a.maxSessions)
	case agentMax > 0 && a.perAgent[agent] >= agentMax:
		return nil, status.Errorf(codes.ResourceExhausted, "agent %q is at its limit of %d open sessions", agent, agentMax)
	}
	a.open++
	a.perAgent[agent]++
	return &slot{a: a, agent: agent}, nil
}

// release gives the slot back; later calls do nothing.
func (s *slot) release() {
	s.once.Do(func() {
		s.a.mu.Lock()
		defer s.a.mu.Unlock()
		s.a.open--
		s.a.perAgent[s.agent]--
	})
}

// admitTurn admits a turn unless the gateway is draining; the caller calls
// turnEnded when the turn has ended.
func (a *admission) admitTurn() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.draining {
		return status.Error(codes.Unavailable, msgShuttingDown)
	}
	a.turns.Add(1)
	return nil
}

func (a *admission) turnEnded() { a.turns.Done() }

// drain refuses everything from now on.
func (a *admission) drain() {
	a.mu.Lock()
	a.draining = true
	a.mu.Unlock()
}

func (a *admission) isDraining() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.draining
}

// waitTurns waits until every admitted turn has ended or ctx ends, and
// reports whether they all ended.
func (a *admission) waitTurns(ctx context.Context) bool {
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
