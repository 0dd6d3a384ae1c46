package server

import (
	"path/filepath"
	"sync"

	"google.golang.org/protobuf/types/known/timestamppb"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/store"
)

// suspendedSession is a recorded session without an agent: one the gateway
// had open when it last stopped, or one whose agent went away while it was
// idle. Its next Prompt (or CreateSession with its id as load_session_id)
// starts the agent again and re-opens it (see Gateway.reopen); until then
// it holds no process and no place under the session limits.
type suspendedSession struct {
	rec store.Session
	dir string // its absolute working directory, as Session.cwd shows it

	mu        sync.Mutex
	reopening bool // a turn or CreateSession is re-opening it
}

func newSuspended(rec store.Session, workspace string) *suspendedSession {
	return &suspendedSession{rec: rec, dir: filepath.Join(workspace, rec.Cwd)}
}

// claim reserves the session for re-opening: one caller at a time, as a
// session runs one turn at a time.
func (s *suspendedSession) claim() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reopening {
		return false
	}
	s.reopening = true
	return true
}

// unclaim gives the session back after a re-opening that did not happen.
func (s *suspendedSession) unclaim() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reopening = false
}

func (s *suspendedSession) ownedBy() string { return s.rec.Owner }

func (s *suspendedSession) proto() *acpgatev1.Session {
	out := &acpgatev1.Session{
		Id:           s.rec.ID,
		AcpSessionId: s.rec.ACPSessionID,
		Agent:        s.rec.Agent,
		Cwd:          s.dir,
		State:        acpgatev1.SessionState_SESSION_STATE_SUSPENDED,
		CreatedAt:    timestamppb.New(s.rec.CreatedAt),
	}
	recordedSettingsProto(s.rec.Mode, s.rec.ConfigOptions, out)
	return out
}
