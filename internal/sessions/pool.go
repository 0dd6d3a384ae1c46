package sessions

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/acpgate/acpgate/internal/acp"
	"github.com/acpgate/acpgate/internal/admission"
	"github.com/acpgate/acpgate/internal/metrics"
)

// Warm pool timing: how long a failing agent waits before its next
// warm start-up, doubling from minBackoff to maxBackoff and reset by a
// success, and how many warm start-ups of one agent run at once.
const (
	minBackoff  = time.Second
	maxBackoff  = time.Minute
	maxRefill   = 4
	slotRecheck = time.Second
	// startRecheck is how soon a pool that found every start-up slot
	// taken (limits.max_starting_agents) looks again.
	startRecheck = 100 * time.Millisecond
)

// warmProcess is an agent process started, initialized and authenticated,
// with no session yet. Taken, it becomes one session's agent and is
// discarded with it, so two callers never share a process (or its memory,
// its files, its caches); under reuse_process, later sessions of the same
// caller in the same directory may join it (see sharing).
type warmProcess struct {
	sess    *acp.Session
	slot    *admission.WarmSlot // its place under limits.max_warm, until taken
	dir     string              // the directory it runs in, symlink-free
	tempDir string              // dir, when it is a temporary one made for it; "" in a configured workspace
	born    time.Time
	taken   chan struct{} // closed when it leaves the pool: ends its watcher
}

// key is what a session must want for this process to serve it: its
// configured workspace directory, or "" for a fresh temporary directory.
func (w *warmProcess) key() string {
	if w.tempDir != "" {
		return ""
	}
	return w.dir
}

// discard stops a warm process that will serve no session at once: it
// has no work to lose, so it gets no grace.
func (w *warmProcess) discard() {
	w.sess.Kill()
	w.sess.Close()
	if w.tempDir != "" {
		_ = os.RemoveAll(w.tempDir)
	}
	w.slot.Release()
}

// retire stops a warm process gracefully (stdin closed, then the
// signals of acp.Session.Close), for one that aged out or whose pool is
// stopping while time remains.
func (w *warmProcess) retire() {
	w.sess.Close()
	if w.tempDir != "" {
		_ = os.RemoveAll(w.tempDir)
	}
	w.slot.Release()
}

// poolOptions configure a pool.
type poolOptions struct {
	// Agent is the agent's configured name, for logs.
	Agent string
	// Size is how many warm processes to keep (agents[].warm).
	Size int
	// MaxAge is how long a warm process may wait before it is replaced.
	MaxAge time.Duration
	// Launch starts one warm process; ctx ends when the pool stops.
	Launch func(ctx context.Context) (*warmProcess, error)
	// Admit counts warm processes against limits.max_warm.
	Admit *admission.Controller
	// Starts is the gateway's bound on start-ups at once; a warm
	// start-up takes a slot only when one is free (see fill).
	Starts *admission.Starts
	// Status receives each start-up's duration or failure.
	Status *startupStatus
	// Metrics records the pool's gauges and start-ups; nil records none.
	Metrics *metrics.Agent
	// Logger receives the pool's logs.
	Logger *slog.Logger
}

// pool keeps one agent's warm processes: Size of them ready or starting,
// as limits.max_warm allows. One owner goroutine (run) decides what to
// start and what to retire; the start-ups it launches (at most maxRefill
// at once) and the watchers of ready processes report back to it through
// wake. Everything the pool started ends before stop returns.
//
// A start-up that fails, or a ready process that exits while it waits,
// makes the pool wait before the next start-up: minBackoff, doubling up to
// maxBackoff, reset by a success. A failing agent therefore costs a
// start-up a minute at most, never a busy loop.
type pool struct {
	opts   poolOptions
	ctx    context.Context // ends when the pool stops, cancelling start-ups
	cancel context.CancelFunc
	wake   chan struct{} // something changed: run looks again
	done   chan struct{} // closed when run and everything it started have ended
	wg     sync.WaitGroup

	mu       sync.Mutex
	ready    []*warmProcess // oldest first
	starting int
	backoff  time.Duration // the last wait after a failure; 0 after a success
	retryAt  time.Time     // no start-up before it
	refused  bool          // the last reservation was refused by limits.max_warm
	busy     bool          // every start-up slot was taken at the last fill
	live     map[*warmProcess]struct{}
}

// newPool starts a pool's owner; stop ends it.
func newPool(opts poolOptions) *pool {
	ctx, cancel := context.WithCancel(context.Background())
	p := &pool{
		opts:   opts,
		ctx:    ctx,
		cancel: cancel,
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
		live:   make(map[*warmProcess]struct{}),
	}
	go p.run()
	return p
}

// poke tells run that something changed; it never blocks.
func (p *pool) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run is the pool's owner: it starts what is missing, retires what aged
// out, and sleeps until something changes or a deadline (the end of a
// back-off, the next process to age out) comes.
func (p *pool) run() {
	defer close(p.done)
	defer p.wg.Wait()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		p.retireAged()
		p.fill()
		timer.Reset(p.nextDeadline())
		select {
		case <-p.ctx.Done():
			p.retireReady()
			return
		case <-p.wake:
		case <-timer.C:
		}
	}
}

// fill launches start-ups until the pool is full, refill concurrency is
// reached, a back-off is running, limits.max_warm refuses or every
// start-up slot is taken. A warm start-up takes a start-up slot only when
// one is free, and never queues for one: queued, it would make the
// start-ups of callers' turns, which come after it, wait behind a process
// nobody has asked for yet.
func (p *pool) fill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refused, p.busy = false, false
	for len(p.ready)+p.starting < p.opts.Size && p.starting < min(p.opts.Size, maxRefill) && !time.Now().Before(p.retryAt) {
		slot, ok := p.opts.Admit.ReserveWarm()
		if !ok {
			p.refused = true
			break
		}
		started, ok := p.opts.Starts.TryTake()
		if !ok {
			slot.Release()
			p.busy = true
			break
		}
		p.starting++
		p.wg.Add(1)
		go p.launch(slot, started)
	}
	p.gauges()
}

// nextDeadline is how long run may sleep: until a back-off ends or a
// process ages out, or a moment when limits.max_warm refused (another
// agent's pool may have given a slot back).
func (p *pool) nextDeadline() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	next := time.Hour
	short := len(p.ready)+p.starting < p.opts.Size
	if short && p.retryAt.After(time.Now()) {
		next = min(next, time.Until(p.retryAt))
	}
	if short && p.refused {
		next = min(next, slotRecheck)
	}
	if short && p.busy {
		next = min(next, startRecheck)
	}
	if len(p.ready) > 0 {
		next = min(next, time.Until(p.ready[0].born.Add(p.opts.MaxAge)))
	}
	return max(next, time.Millisecond)
}

// launch runs one start-up, holding the start-up slot started until it
// ends, and hands its process to the pool.
func (p *pool) launch(slot *admission.WarmSlot, started func()) {
	defer p.wg.Done()
	defer p.poke()
	began := time.Now()
	w, err := p.opts.Launch(p.ctx)
	started()
	took := time.Since(began)
	if err == nil || p.ctx.Err() == nil {
		// A start-up the pool's own stop cancelled is no failure of the
		// agent's.
		noteStart(p.opts.Metrics, took, err)
	}
	if err == nil {
		w.slot, w.born, w.taken = slot, time.Now(), make(chan struct{})
	}
	p.mu.Lock()
	p.starting--
	stopping := p.ctx.Err() != nil
	switch {
	case err != nil:
		slot.Release()
		if !stopping {
			p.failedLocked(fmt.Sprintf("warm start-up failed: %v", err))
		}
	case !stopping:
		p.backoff, p.retryAt = 0, time.Time{}
		p.opts.Status.succeeded(took)
		p.ready = append(p.ready, w)
		p.live[w] = struct{}{}
		p.wg.Add(1)
		go p.watch(w)
		p.opts.Logger.Debug("warm agent process ready", "agent", p.opts.Agent, "pid", w.sess.Pid(), "took", took)
	}
	p.gauges()
	p.mu.Unlock()
	if err == nil && stopping {
		w.discard()
	}
}

// failedLocked starts or lengthens the back-off after a failure; p.mu is
// held.
func (p *pool) failedLocked(message string) {
	p.backoff = min(max(2*p.backoff, minBackoff), maxBackoff)
	now := time.Now()
	p.retryAt = now.Add(p.backoff)
	p.opts.Status.failed(message, now, p.retryAt)
	p.opts.Logger.Warn("the warm pool backs off after a failed agent start-up", "agent", p.opts.Agent, "err", message, "retry_in", p.backoff)
}

// watch replaces w if it exits while it waits to be taken.
func (p *pool) watch(w *warmProcess) {
	defer p.wg.Done()
	select {
	case <-w.taken:
		return
	case <-w.sess.Done():
	}
	p.mu.Lock()
	if !p.removeLocked(w) {
		p.mu.Unlock()
		return // taken or retired meanwhile
	}
	if p.ctx.Err() == nil {
		p.failedLocked(fmt.Sprintf("the warm agent process (pid %d) exited while waiting to be taken", w.sess.Pid()))
	}
	p.gauges()
	p.mu.Unlock()
	w.discard()
	p.forget(w)
	p.poke()
}

// removeLocked takes w out of the ready list and reports whether it was
// there; p.mu is held.
func (p *pool) removeLocked(w *warmProcess) bool {
	for i, x := range p.ready {
		if x == w {
			p.ready = append(p.ready[:i], p.ready[i+1:]...)
			close(w.taken)
			return true
		}
	}
	return false
}

// forget drops w from the processes stop would kill.
func (p *pool) forget(w *warmProcess) {
	p.mu.Lock()
	delete(p.live, w)
	p.mu.Unlock()
}

// take hands out a ready process whose key is key, nil when there is
// none. The process leaves the pool, and its warm slot is given back: the
// caller holds a session slot for it already.
func (p *pool) take(key string) *warmProcess {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range p.ready {
		if w.key() != key {
			continue
		}
		select {
		case <-w.sess.Done():
			continue // dead: its watcher replaces it
		default:
		}
		p.removeLocked(w)
		delete(p.live, w)
		w.slot.Release()
		p.gauges()
		p.poke()
		return w
	}
	return nil
}

// retireAged retires the ready processes older than MaxAge, so that none
// serves a session with state from long ago.
func (p *pool) retireAged() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.ready) > 0 && time.Since(p.ready[0].born) >= p.opts.MaxAge {
		w := p.ready[0]
		p.removeLocked(w)
		p.opts.Logger.Info("replacing a warm agent process that waited past warm_max_age", "agent", p.opts.Agent, "pid", w.sess.Pid(), "warm_max_age", p.opts.MaxAge)
		p.retireAsync(w)
	}
	p.gauges()
}

// retireReady retires every ready process, as the pool stops.
func (p *pool) retireReady() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.ready) > 0 {
		w := p.ready[0]
		p.removeLocked(w)
		p.retireAsync(w)
	}
	p.gauges()
}

// retireAsync retires w on a goroutine the pool waits for; p.mu is held.
func (p *pool) retireAsync(w *warmProcess) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		w.retire()
		p.forget(w)
	}()
}

// gauges publishes the counts; p.mu is held.
func (p *pool) gauges() {
	p.opts.Metrics.Warm(len(p.ready), p.starting)
}

// counts returns the ready and starting processes.
func (p *pool) counts() (ready, starting int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ready), p.starting
}

// stop ends the pool: start-ups are cancelled (their agents killed) and
// ready processes retired gracefully; when ctx ends first, whatever is
// still running is killed. It returns once every process the pool
// started has been reaped.
func (p *pool) stop(ctx context.Context) {
	p.cancel()
	select {
	case <-p.done:
		return
	case <-ctx.Done():
	}
	p.mu.Lock()
	left := make([]*warmProcess, 0, len(p.live))
	for w := range p.live {
		left = append(left, w)
	}
	p.mu.Unlock()
	for _, w := range left {
		w.sess.Kill()
	}
	<-p.done
}
