package sessions

import (
	"os"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/acp"
	"github.com/acpgate/acpgate/internal/admission"
	"github.com/acpgate/acpgate/internal/store"
)

// Live is an open session and the gateway's bookkeeping about it.
type Live struct {
	id      string // unique among open sessions; see registry
	sess    *acp.Session
	agent   *agentEntry
	slot    *admission.Slot // its place under the session limits
	owner   string          // the principal that created it; "" when unauthenticated
	oneShot bool
	tempDir string // removed on close; "" when the session runs in a configured workspace
	created time.Time
	replica string // the replica it runs on, with several; "" for a gateway on its own

	mu         sync.Mutex
	running    string // the running turn's id, "" when idle
	turns      uint64
	lastActive time.Time
	closed     bool
	resumed    bool // re-opened, and no turn has started on it since
	// rec is the session's record in the store, from which it can be
	// re-opened; nil when it is not kept (a one-shot session, one in a
	// temporary directory, or one the store failed to record).
	rec *store.Session

	costReported float64 // the cumulative cost last reported; see CostAdded

	// recordMu orders the writes of the session's settings to its record
	// (see watchSettings).
	recordMu sync.Mutex
}

// ID is the id clients address the session with; see registry.
func (l *Live) ID() string { return l.id }

// ACP is the session on its agent, which runs its turns.
func (l *Live) ACP() *acp.Session { return l.sess }

// AgentName is the configured name of the session's agent.
func (l *Live) AgentName() string { return l.agent.cfg.Name }

// TurnTimeout bounds each of the session's turns (the agent's
// turn_timeout; 0: none).
func (l *Live) TurnTimeout() time.Duration { return l.agent.cfg.TurnTimeout }

// OneShot reports whether the session serves one turn only, and is
// closed after it.
func (l *Live) OneShot() bool { return l.oneShot }

// Claim reserves the session for a turn; ACP allows one at a time.
func (l *Live) Claim(turnID string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running != "" || l.closed {
		return false
	}
	l.running = turnID
	l.lastActive = time.Now()
	return true
}

// TakeResumed reports, once, whether the session was re-opened: the first
// turn after re-opening says so in TurnStarted.
func (l *Live) TakeResumed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.resumed
	l.resumed = false
	return r
}

func (l *Live) ownedBy() string { return l.owner }

// keep notes the session's record; it reports false when the session has
// closed meanwhile, and then its closer did not see the record to delete.
func (l *Live) keep(rec *store.Session) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.rec = rec
	return true
}

// setRecord replaces the session's record, closed or not: a suspension
// stamps it after the session left the registry.
func (l *Live) setRecord(rec *store.Session) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rec = rec
}

// record is the session's record; nil when it is not kept.
func (l *Live) record() *store.Session {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rec
}

func (l *Live) lastActiveAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastActive
}

// Unclaim undoes a claim for a turn that did not run.
func (l *Live) Unclaim() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.running = ""
}

// Release frees the session for its next turn.
func (l *Live) Release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.running = ""
	l.turns++
	l.lastActive = time.Now()
}

// CostAdded is what a turn's reported cost adds to the session's: ACP
// reports the session's cumulative cost. The session is released before
// its turn is recorded, so the next turn may already run: hence the lock.
func (l *Live) CostAdded(total float64) float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	added := total - l.costReported
	if added < 0 { // the agent's count restarted
		added = total
	}
	l.costReported = total
	return added
}

// stale says why the janitor should close (or suspend) the session: its
// agent has gone, or it has been idle past its agent's idle timeout; ""
// when it should not.
func (l *Live) stale() string {
	since, idle := l.idleSince()
	if !idle {
		return ""
	}
	select {
	case <-l.sess.Done():
		return "its agent has gone"
	default:
	}
	if timeout := l.agent.cfg.IdleTimeout; !l.oneShot && timeout > 0 && time.Since(since) > timeout {
		return "idle past its agent's idle_timeout"
	}
	return ""
}

// idleSince reports when the session became idle, or false while a turn
// runs.
func (l *Live) idleSince() (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastActive, l.running == ""
}

// Proto describes the session as the API shows it.
func (l *Live) Proto() *acpgatev1.Session {
	l.mu.Lock()
	defer l.mu.Unlock()
	state := acpgatev1.SessionState_SESSION_STATE_IDLE
	switch {
	case l.closed:
		state = acpgatev1.SessionState_SESSION_STATE_CLOSED
	case l.running != "":
		state = acpgatev1.SessionState_SESSION_STATE_RUNNING
	}
	out := &acpgatev1.Session{
		Id:                l.id,
		AcpSessionId:      l.sess.ID(),
		Agent:             l.agent.cfg.Name,
		Cwd:               l.sess.Cwd(),
		State:             state,
		CreatedAt:         timestamppb.New(l.created),
		LastActiveAt:      timestamppb.New(l.lastActive),
		Turns:             l.turns,
		CurrentTurnId:     l.running,
		AvailableCommands: l.sess.AvailableCommands(),
		Usage:             l.sess.Usage(),
		Replica:           l.replica,
	}
	settingsProto(l.sess.Settings(), out)
	return out
}

// close stops the agent, removes a temporary workspace and gives the
// session's slot back. Safe to call more than once and from several
// goroutines: it reports true to the one call that did the closing.
func (l *Live) close() bool { return l.shut(false) }

// end is close for a session its client closed (CloseSession): the agent
// is asked to close the session first, when it offers that (acp.Session.End).
func (l *Live) end() bool { return l.shut(true) }

func (l *Live) shut(asked bool) bool {
	l.mu.Lock()
	already := l.closed
	l.closed = true
	l.mu.Unlock()
	if already {
		return false
	}
	if asked {
		l.sess.End()
	} else {
		l.sess.Close()
	}
	if l.tempDir != "" {
		_ = os.RemoveAll(l.tempDir)
	}
	l.slot.Release()
	l.agent.m.SessionClosed()
	return true
}

// kill stops the agent at once, without grace, for a shutdown whose time is
// up. A close in progress then finishes promptly.
func (l *Live) kill() {
	l.sess.Kill()
	l.close()
}
