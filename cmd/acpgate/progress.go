package main

// Progress while nothing streams.
//
// A cold agent can take seconds to start, and a misconfigured one can keep
// a prompt silent until the gateway gives up on it: a person at a terminal
// cannot tell either from a hung command. While a prompt has shown nothing,
// one status line on stderr says what it waits on (starting the agent, cold
// or warm, or waiting on it) and for how long, with the time since the
// gateway's last heartbeat, which shows that the turn is alive. The line is
// rewritten in place with \r, never scrolls, and is erased, for good, before
// the first output of the command (the answer's first chunk, a note on
// stderr, an error). It is shown only when stderr is a terminal and output
// is for a person (not --json): in a pipe or a log it would be noise.

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// progressDelay is how long a prompt may be silent before the status line
// appears: an answer that starts sooner needs none, and a line drawn and
// erased at once would only flicker.
const progressDelay = 300 * time.Millisecond

// progressTick is how often the status line's times are rewritten.
const progressTick = time.Second

// agentInfoTimeout bounds the ListAgents call that tells a cold start from
// a warm one; the status line does without when it does not answer in time.
const agentInfoTimeout = 2 * time.Second

// progress is the status line of a prompt on a terminal. Its methods may be
// called on a nil *progress, which does nothing: stderr is not a terminal.
type progress struct {
	term  io.Writer // the terminal stderr
	width int       // the terminal's columns

	mu        sync.Mutex
	start     time.Time
	phase     string    // "starting agent NAME", "waiting on agent NAME"
	detail    string    // about the phase: a cold or a warm start
	heartbeat time.Time // the last heartbeat's arrival; zero: none yet
	visible   bool      // progressDelay has passed
	line      string    // the line as last drawn
	shown     int       // columns written since the line was last erased; 0: none
	stopped   bool

	stop chan struct{} // closed by Stop: the drawing goroutine returns
	done chan struct{} // closed when it has
}

// newProgress starts the status line on stderr with phase, or returns nil
// when stderr is not a terminal. Stop ends it.
func newProgress(stderr io.Writer, phase string) *progress {
	f, ok := stderr.(*os.File)
	if !ok {
		return nil
	}
	if _, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS); err != nil {
		return nil
	}
	width := 80
	if ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col > 0 {
		width = int(ws.Col)
	}
	p := &progress{term: f, width: width, start: time.Now(), phase: phase,
		stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

// run draws the line once progressDelay has passed, then every
// progressTick, until Stop.
func (p *progress) run() {
	defer close(p.done)
	t := time.NewTimer(progressDelay)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.mu.Lock()
			p.visible = true
			p.draw()
			p.mu.Unlock()
			t.Reset(progressTick)
		}
	}
}

// draw rewrites the line; p.mu is held.
func (p *progress) draw() {
	if p.stopped || !p.visible {
		return
	}
	line := fmt.Sprintf("· %s… %s", p.phase, since(p.start))
	if p.detail != "" {
		line += " (" + p.detail + ")"
	}
	if !p.heartbeat.IsZero() {
		line += fmt.Sprintf(" · last heartbeat %s ago", since(p.heartbeat))
	}
	line = fitColumns(oneLine(line), p.width-1) // the last column would wrap on some terminals
	if line == p.line {
		return // a heartbeat within the same second: nothing to rewrite
	}
	// Over the old line, blanking what the new one does not cover.
	n := utf8.RuneCountInString(line)
	_, _ = io.WriteString(p.term, "\r"+line+strings.Repeat(" ", max(p.shown-n, 0)))
	p.line, p.shown = line, max(p.shown, n)
}

// erase blanks the line on the terminal, leaving the cursor at its start;
// p.mu is held.
func (p *progress) erase() {
	if p.shown > 0 {
		_, _ = io.WriteString(p.term, "\r"+strings.Repeat(" ", p.shown)+"\r")
		p.line, p.shown = "", 0
	}
}

// since renders the time since t in whole seconds.
func since(t time.Time) string {
	return fmt.Sprintf("%ds", int(time.Since(t).Seconds()))
}

// fitColumns cuts s to at most n runes (one column each: the line is text
// this file writes, and names).
func fitColumns(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:max(n-1, 0)]) + "…"
}

// set changes the phase and its detail and redraws.
func (p *progress) set(phase, detail string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.phase, p.detail = phase, detail
	p.draw()
}

// setDetail sets the detail of phase, if the line is still in it.
func (p *progress) setDetail(phase, detail string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.phase == phase {
		p.detail = detail
		p.draw()
	}
}

// beat notes a heartbeat.
func (p *progress) beat() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.heartbeat = time.Now()
	p.draw()
}

// Stop erases the line for good and ends its goroutine. It may be called
// more than once.
func (p *progress) Stop() {
	if p == nil {
		return
	}
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return
	}
	p.stopped = true
	p.erase()
	p.mu.Unlock()
	close(p.stop)
	<-p.done
}

// writer is w with the line erased (and stopped) before the first write:
// the command's own output replaces it.
func (p *progress) writer(w io.Writer) io.Writer {
	if p == nil {
		return w
	}
	return stoppingWriter{w: w, p: p}
}

type stoppingWriter struct {
	w io.Writer
	p *progress
}

func (s stoppingWriter) Write(b []byte) (int, error) {
	s.p.Stop()
	return s.w.Write(b)
}

// progressSink is a sink that tells the status line of the events that
// change what a prompt waits on; showing them is the sink's.
type progressSink struct {
	eventSink
	p *progress
}

func (s progressSink) event(ev *acpgatev1.PromptEvent) {
	switch ev.GetEvent().(type) {
	case *acpgatev1.PromptEvent_Started:
		s.p.set("waiting on agent "+ev.GetStarted().GetAgent(), "")
	case *acpgatev1.PromptEvent_Heartbeat:
		s.p.beat()
	}
	s.eventSink.event(ev)
}

// startProgress starts the status line of a command that streams a turn,
// in phase, when stderr is a terminal; p is nil otherwise. With agent set,
// the starting phase says whether the agent starts cold or warm. out and
// errw are stdout and stderr, erasing the line before the first write;
// stop erases it and ends what it started.
func startProgress(ctx context.Context, client acpgatev1.AgentGatewayClient, phase, agent string,
	stdout, stderr io.Writer) (p *progress, out, errw io.Writer, stop func()) {
	p = newProgress(stderr, phase)
	if p == nil {
		return nil, stdout, stderr, func() {}
	}
	if agent == "" {
		return p, p.writer(stdout), p.writer(stderr), p.Stop
	}
	infoCtx, cancelInfo := context.WithCancel(ctx)
	infoDone := make(chan struct{})
	go func() {
		defer close(infoDone)
		describeStart(infoCtx, client, p, agent)
	}()
	return p, p.writer(stdout), p.writer(stderr), func() {
		cancelInfo()
		<-infoDone
		p.Stop()
	}
}

// startingPhase is the status line's first phase for req.
func startingPhase(req *acpgatev1.PromptRequest) string {
	if req.GetAgent() != "" {
		return "starting agent " + req.GetAgent()
	}
	return "waiting for the turn to start"
}

// describeStart asks the gateway about agent's warm pool and last start-up
// and sets what it says as the starting phase's detail: whether a warm
// process is ready, how long the last cold start took, whether the last
// start-up failed. It returns when it has, or after agentInfoTimeout.
func describeStart(ctx context.Context, client acpgatev1.AgentGatewayClient, p *progress, agent string) {
	ctx, cancel := context.WithTimeout(ctx, agentInfoTimeout)
	defer cancel()
	resp, err := client.ListAgents(ctx, &acpgatev1.ListAgentsRequest{})
	if err != nil {
		return // the line says less; the prompt's own call reports errors
	}
	for _, a := range resp.GetAgents() {
		if a.GetName() == agent {
			p.setDetail("starting agent "+agent, startDetail(a))
			return
		}
	}
}

// startDetail says what starting a session of a will take.
func startDetail(a *acpgatev1.Agent) string {
	switch {
	case a.GetLastStartupFailure() != nil:
		return "its last start-up failed: " + a.GetLastStartupFailure().GetMessage()
	case a.GetWarmReady() > 0:
		return "warm: a started process is ready"
	case a.GetLastStartupDuration() != nil:
		return fmt.Sprintf("cold start; the last took %.1fs", a.GetLastStartupDuration().AsDuration().Seconds())
	}
	return "cold start"
}
