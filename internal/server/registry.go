package server

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/acp"
	"github.com/acpgate/acpgate/internal/admission"
	"github.com/acpgate/acpgate/internal/store"
)

// registry is the open sessions, by the id clients address them with.
//
// That id is the ACP session id the agent minted, unless another open
// session already has it: simple agents count sessions from 1 in each
// process, so two processes of one agent mint the same id, and keying by the
// agent's id alone made the second CreateSession fail. The second then gets
// the agent's id with "~2" appended ("~3", … as needed). A well-behaved
// agent's ids (UUIDs) never collide, so its clients see its own ids; the
// agent's id is always in Session.acp_session_id.
//
// It also holds the suspended sessions (see suspendedSession), under the
// same ids: an id is either open or suspended, never both, so a new
// session cannot take the id of one that will be re-opened.
type registry struct {
	mu        sync.Mutex
	sessions  map[string]*liveSession
	suspended map[string]*suspendedSession
	order     []string // ids, oldest first
}

func newRegistry() *registry {
	return &registry{sessions: make(map[string]*liveSession), suspended: make(map[string]*suspendedSession)}
}

// add registers live under a unique id derived from its ACP id and sets
// live.id.
func (r *registry) add(live *liveSession) {
	r.mu.Lock()
	defer r.mu.Unlock()
	acpID := live.sess.ID()
	id := acpID
	for n := 2; r.sessions[id] != nil || r.suspended[id] != nil; n++ {
		id = fmt.Sprintf("%s~%d", acpID, n)
	}
	live.id = id
	r.sessions[id] = live
	r.order = append(r.order, id)
}

// delete unregisters live; it reports false when live was not registered.
func (r *registry) delete(live *liveSession) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sessions[live.id] != live {
		return false
	}
	delete(r.sessions, live.id)
	r.order = slices.DeleteFunc(r.order, func(x string) bool { return x == live.id })
	return true
}

// reopened registers live, the re-opened susp, under susp's id, in its
// place in the order. It reports false when susp is no longer registered
// (it was closed meanwhile).
func (r *registry) reopened(live *liveSession, susp *suspendedSession) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.takeSuspended(susp) {
		return false
	}
	live.id = susp.rec.ID
	r.sessions[live.id] = live
	return true
}

// takeSuspended removes susp from the suspended sessions, but not from the
// order; it reports false when susp was not registered. r.mu is held.
func (r *registry) takeSuspended(susp *suspendedSession) bool {
	if r.suspended[susp.rec.ID] != susp {
		return false
	}
	delete(r.suspended, susp.rec.ID)
	return true
}

// suspend replaces live, whose agent is gone, by susp under the same id, in
// its place in the order. It reports false when live was not registered.
func (r *registry) suspend(live *liveSession, susp *suspendedSession) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sessions[live.id] != live {
		return false
	}
	delete(r.sessions, live.id)
	r.suspended[live.id] = susp
	return true
}

// addSuspended registers a session recorded by an earlier gateway run,
// after the ones registered so far.
func (r *registry) addSuspended(susp *suspendedSession) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.suspended[susp.rec.ID] = susp
	r.order = append(r.order, susp.rec.ID)
}

// deleteSuspended unregisters susp; it reports false when susp was not
// registered.
func (r *registry) deleteSuspended(susp *suspendedSession) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.takeSuspended(susp) {
		return false
	}
	r.order = slices.DeleteFunc(r.order, func(x string) bool { return x == susp.rec.ID })
	return true
}

// allSuspended returns the suspended sessions, in no particular order.
func (r *registry) allSuspended() []*suspendedSession {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Collect(maps.Values(r.suspended))
}

// lookupSuspended finds a suspended session by id; nil when there is none.
func (r *registry) lookupSuspended(id string) *suspendedSession {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.suspended[id]
}

// findSuspended finds a suspended session of agent by its id or by its ACP
// session id; nil when there is none.
func (r *registry) findSuspended(agent, id string) *suspendedSession {
	r.mu.Lock()
	defer r.mu.Unlock()
	if susp := r.suspended[id]; susp != nil && susp.rec.Agent == agent {
		return susp
	}
	for _, susp := range r.suspended {
		if susp.rec.Agent == agent && susp.rec.ACPSessionID == id {
			return susp
		}
	}
	return nil
}

// listed is a session as ListSessions shows it: open or suspended.
type listed interface {
	proto() *acpgatev1.Session
	ownedBy() string
}

// listing returns every session, open and suspended, oldest first.
func (r *registry) listing() []listed {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]listed, 0, len(r.order))
	for _, id := range r.order {
		if live := r.sessions[id]; live != nil {
			out = append(out, live)
		} else if susp := r.suspended[id]; susp != nil {
			out = append(out, susp)
		}
	}
	return out
}

// lookup finds an open session by id.
func (r *registry) lookup(id string) (*liveSession, error) {
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "session_id is required")
	}
	r.mu.Lock()
	live, ok := r.sessions[id]
	r.mu.Unlock()
	if !ok {
		return nil, errNoSession(id)
	}
	return live, nil
}

// errNoSession is the one answer for a session that does not exist or that
// the caller may not see.
func errNoSession(id string) error {
	return status.Errorf(codes.NotFound, "no open session %q", id)
}

// all returns the open sessions, oldest first.
func (r *registry) all() []*liveSession {
	r.mu.Lock()
	defer r.mu.Unlock()
	lives := make([]*liveSession, 0, len(r.order))
	for _, id := range r.order {
		if live := r.sessions[id]; live != nil {
			lives = append(lives, live)
		}
	}
	return lives
}

// liveSession is an open session and the gateway's bookkeeping about it.
type liveSession struct {
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

	costReported float64 // the cumulative cost last reported; see costAdded

	// recordMu orders the writes of the session's settings to its record
	// (see watchSettings).
	recordMu sync.Mutex
}

// claim reserves the session for a turn; ACP allows one at a time.
func (l *liveSession) claim(turnID string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running != "" || l.closed {
		return false
	}
	l.running = turnID
	l.lastActive = time.Now()
	return true
}

// takeResumed reports, once, whether the session was re-opened: the first
// turn after re-opening says so in TurnStarted.
func (l *liveSession) takeResumed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.resumed
	l.resumed = false
	return r
}

func (l *liveSession) ownedBy() string { return l.owner }

// keep notes the session's record; it reports false when the session has
// closed meanwhile, and then its closer did not see the record to delete.
func (l *liveSession) keep(rec *store.Session) bool {
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
func (l *liveSession) setRecord(rec *store.Session) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rec = rec
}

// record is the session's record; nil when it is not kept.
func (l *liveSession) record() *store.Session {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rec
}

func (l *liveSession) lastActiveAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastActive
}

// unclaim undoes a claim for a turn that did not run.
func (l *liveSession) unclaim() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.running = ""
}

// release frees the session for its next turn.
func (l *liveSession) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.running = ""
	l.turns++
	l.lastActive = time.Now()
}

// idleSince reports when the session became idle, or false while a turn
// runs.
func (l *liveSession) idleSince() (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastActive, l.running == ""
}

func (l *liveSession) proto() *acpgatev1.Session {
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
func (l *liveSession) close() bool { return l.shut(false) }

// end is close for a session its client closed (CloseSession): the agent
// is asked to close the session first, when it offers that (acp.Session.End).
func (l *liveSession) end() bool { return l.shut(true) }

func (l *liveSession) shut(asked bool) bool {
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
func (l *liveSession) kill() {
	l.sess.Kill()
	l.close()
}
