package admission

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
)

// ErrStartWaitExpired is the error of a start-up that waited its whole bound
// for one of the gateway's start-up slots (limits.max_starting_agents):
// the gateway was busy starting other agents, and nothing is known to be
// wrong with this one.
var ErrStartWaitExpired = errors.New("the gateway was busy starting other agents")

// Starts bounds the agent processes starting at once across a gateway's
// agents (limits.max_starting_agents), cold and warm alike: from the spawn
// until the agent has answered initialize (and authenticate), not through
// session/new or session/load, whose replay of a long session's history
// would hold a slot for as long as it takes. A caller's start-up waits for a slot (Wait); a
// warm pool's takes a free one or none (TryTake), so that no caller's
// start-up ever waits behind a warm process nobody has asked for yet.
//
// Why: a start-up is the costliest thing an agent process does. When
// fifty turns start in the same second, fifty launchers, namespaces and
// agent runtimes start together on the machine's few cores, and every
// chunk of every turn already running waits behind them (on two cores,
// fifty starts at once put 0.1 – 0.2 s on the worst of those turns'
// chunks). Bounded, the same start-ups take turns: the turns already
// running keep their pace, and the median turn's first chunk comes
// sooner. The price is the last turns of a burst, which start later
// than they would have with every start-up sharing the CPU at once
// (docs/performance.md has both sides measured).
//
// Slots are given in the order they were asked for (x/sync's semaphore
// is FIFO), so that no start-up waits behind later ones.
type Starts struct {
	sem   *semaphore.Weighted
	limit int
}

// NewStarts bounds start-ups to limit at once; 0 sets no bound, and a nil
// *Starts is then returned, which never waits.
func NewStarts(limit int) *Starts {
	if limit <= 0 {
		return nil
	}
	return &Starts{sem: semaphore.NewWeighted(int64(limit)), limit: limit}
}

// Wait waits until one more agent may start, for at most bound, and
// returns the function that gives the slot back (exactly once, when the
// start-up has ended, well or not) and how long it waited. It fails with
// ErrStartWaitExpired once bound has passed, and with ctx's error when ctx
// ends first.
func (s *Starts) Wait(ctx context.Context, bound time.Duration) (release func(), waited time.Duration, err error) {
	if s == nil {
		return func() {}, 0, nil
	}
	if s.sem.TryAcquire(1) {
		return s.releaser(), 0, nil
	}
	began := time.Now()
	wctx, cancel := context.WithTimeoutCause(ctx, bound, ErrStartWaitExpired)
	defer cancel()
	err = s.sem.Acquire(wctx, 1)
	waited = time.Since(began)
	if err != nil {
		if errors.Is(context.Cause(wctx), ErrStartWaitExpired) && ctx.Err() == nil {
			return nil, waited, fmt.Errorf("%w: as many start-ups as limits.max_starting_agents allows (%d) were under way, and none ended within %s", ErrStartWaitExpired, s.limit, bound)
		}
		return nil, waited, fmt.Errorf("waiting to start the agent: %w", ctx.Err())
	}
	return s.releaser(), waited, nil
}

// TryTake takes a slot if one is free now, and never waits: for the warm
// pools' start-ups, which serve no caller yet and so must never make a
// caller's start-up wait behind them. The function it returns gives the
// slot back (exactly once).
func (s *Starts) TryTake() (release func(), ok bool) {
	if s == nil {
		return func() {}, true
	}
	if !s.sem.TryAcquire(1) {
		return nil, false
	}
	return s.releaser(), true
}

func (s *Starts) releaser() func() { return sync.OnceFunc(func() { s.sem.Release(1) }) }
