package server

import (
	"os"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/acpgate/acpgate/acp"
	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// liveSession is an open session and the gateway's bookkeeping about it.
type liveSession struct {
	sess    *acp.Session
	agent   *agentEntry
	oneShot bool
	tempDir string // removed on close; "" when the session runs in a configured workspace
	created time.Time

	mu         sync.Mutex
	running    string // the running turn's id, "" when idle
	turns      uint64
	lastActive time.Time
	closed     bool
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
		Id:                l.sess.ID(),
		Agent:             l.agent.cfg.Name,
		Cwd:               l.sess.Cwd(),
		State:             state,
		CreatedAt:         timestamppb.New(l.created),
		LastActiveAt:      timestamppb.New(l.lastActive),
		Turns:             l.turns,
		CurrentTurnId:     l.running,
		AvailableCommands: l.sess.AvailableCommands(),
	}
}

// close stops the agent and removes a temporary workspace. Safe to call
// more than once and from several goroutines: it reports true to the one
// call that did the closing, so bookkeeping is undone exactly once.
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
	return true
}
