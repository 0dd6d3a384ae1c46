package server

import (
	"fmt"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/acpgate/acpgate/acp"
	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
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
type registry struct {
	mu       sync.Mutex
	sessions map[string]*liveSession
	order    []string // ids, oldest first
}

func newRegistry() *registry {
	return &registry{sessions: make(map[string]*liveSession)}
}

// add registers live under a unique id derived from its ACP id and sets
// live.id.
func (r *registry) add(live *liveSession) {
	r.mu.Lock()
	defer r.mu.Unlock()
	acpID := live.sess.ID()
	id := acpID
	for n := 2; r.sessions[id] != nil; n++ {
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
	for i, x := range r.order {
		if x == live.id {
			r.order = append(r.order[:i], r.order[i+1:]...)
			break
		}
	}
	return true
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
		lives = append(lives, r.sessions[id])
	}
	return lives
}

// liveSession is an open session and the gateway's bookkeeping about it.
type liveSession struct {
	id      string // unique among open sessions; see registry
	sess    *acp.Session
	agent   *agentEntry
	slot    *slot  // its place under the session limits
	owner   string // the principal that created it; "" when unauthenticated
	oneShot bool
	tempDir string // removed on close; "" when the session runs in a configured workspace
	created time.Time

	mu         sync.Mutex
	running    string // the running turn's id, "" when idle
	turns      uint64
	lastActive time.Time
	closed     bool

	costReported float64 // the cumulative cost last reported; see costAdded
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
	return &acpgatev1.Session{
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
	}
}

// close stops the agent, removes a temporary workspace and gives the
// session's slot back. Safe to call more than once and from several
// goroutines: it reports true to the one call that did the closing.
func (l *liveSession) close() bool {
	l.mu.Lock()
	already := l.closed
	l.closed = true
	l.mu.Unlock()
	if already {
		return false
	}
	l.sess.Close()
	if l.tempDir != "" {
		_ = os.RemoveAll(l.tempDir)
	}
	l.slot.release()
	l.agent.m.SessionClosed()
	return true
}

// kill stops the agent at once, without grace, for a shutdown whose time is
// up. A close in progress then finishes promptly.
func (l *liveSession) kill() {
	l.sess.Kill()
	l.close()
}
