package agentproc

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// MaxNice is the largest nice value Linux gives a thread: the lowest CPU
// priority. A Starter's increment that would pass it stops at it.
const MaxNice = 19

// A Starter starts agent processes at a lower CPU priority than the
// gateway's own, by a nice increment (agents[].nice).
//
// Why: the gateway is the one hop every turn's chunks share, while each
// agent is one turn's producer. When the CPUs are busy, as when many turns
// stream at once while more agents start, an agent at the gateway's
// priority takes CPU time from the gateway's readers and writers, and every
// turn's chunks wait for them: with 50 LLM-paced turns at once on 2 cores,
// that doubled the per-turn p99 (see docs/performance.md). On an idle
// machine it costs a cold turn a little: its agent's start waits for the
// hand-off to the Starter's thread (about 0.2 ms) and runs below the
// gateway's own work for the turn (the first chunk 0.4 - 0.8 ms later in
// all, at the median).
//
// How: a process starts with the nice value of the thread that forks it,
// and each thread it makes starts with the nice value of the thread making
// it. So a Starter forks every process from one OS thread of its own, whose
// nice value it raised once; the gateway's other threads keep theirs (on
// Linux the nice value is a thread's, not a process's). Raising the
// process's priority after it has started would race it: a Go or Node
// agent makes its threads within microseconds, each keeping the priority
// it was made with, and an unprivileged gateway could not lower it back
// for the ones it caught.
//
// The thread lives until Close, and Close must come after every process it
// started has been reaped: the kernel sends an agent its parent-death
// signal (Pdeathsig, which keeps agents from outliving the gateway) when
// the thread that forked it exits, not the process.
type Starter struct {
	nice   int // the thread's nice value
	starts chan func()
	done   chan struct{}
	ended  chan struct{}
	close  sync.Once
}

// NewStarter returns a Starter whose processes run increment nice levels
// below the calling gateway's own priority (a higher nice value, at most
// MaxNice). It fails, ending its thread, if the kernel refuses the change.
func NewStarter(increment int) (*Starter, error) {
	if increment < 0 {
		return nil, fmt.Errorf("a nice increment of %d would start agents ahead of the gateway: use 0 to %d", increment, MaxNice)
	}
	s := &Starter{starts: make(chan func()), done: make(chan struct{}), ended: make(chan struct{})}
	ready := make(chan error, 1)
	go s.run(increment, ready)
	if err := <-ready; err != nil {
		<-s.ended
		return nil, err
	}
	return s, nil
}

// run is the Starter's thread: it raises the thread's nice value, then runs
// the starts it is given until Close. It returns with the thread still
// locked, so the runtime ends the thread rather than handing it, at its
// lower priority, to other goroutines.
func (s *Starter) run(increment int, ready chan<- error) {
	defer close(s.ended)
	runtime.LockOSThread()
	own, err := threadNice()
	if err == nil {
		s.nice = min(own+increment, MaxNice)
		err = unix.Setpriority(unix.PRIO_PROCESS, 0, s.nice)
	}
	if err != nil {
		ready <- fmt.Errorf("lowering the agents' CPU priority (nice %d over the gateway's own): %w", increment, err)
		return
	}
	ready <- nil
	for {
		select {
		case start := <-s.starts:
			start()
		case <-s.done:
			return
		}
	}
}

// threadNice is the calling thread's nice value (-20 to 19). The system
// call returns 20 minus it, so that no value of it looks like an error.
func threadNice() (int, error) {
	raw, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
	if err != nil {
		return 0, err
	}
	return 20 - raw, nil
}

// Nice is the nice value the Starter's processes start with.
func (s *Starter) Nice() int { return s.nice }

// errStarterClosed is why a start after Close fails.
var errStarterClosed = errors.New("the gateway is stopping: its agent starter is closed")

// start starts cmd from the Starter's thread.
func (s *Starter) start(cmd *exec.Cmd) error {
	errc := make(chan error, 1)
	select {
	case s.starts <- func() { errc <- cmd.Start() }:
		return <-errc
	case <-s.done:
		return errStarterClosed
	}
}

// Close ends the Starter's thread once the start it may be running
// returns. Call it only once every process it started has been reaped (see
// Starter).
func (s *Starter) Close() {
	s.close.Do(func() { close(s.done) })
	<-s.ended
}
