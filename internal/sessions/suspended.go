package sessions

import (
	"path/filepath"
	"sync"

	"google.golang.org/protobuf/types/known/timestamppb"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/store"
)

// Suspended is a recorded session without an agent: one the gateway had
// open when it last stopped, or one whose agent went away while it was
// idle. Its next Prompt (or CreateSession with its id as load_session_id)
// starts the agent again and re-opens it (see Manager.Reopen); until then
// it holds no process and no place under the session limits.
type Suspended struct {
	rec store.Session
	dir string // its absolute working directory, as Session.cwd shows it

	mu        sync.Mutex
	reopening bool // a turn or CreateSession is re-opening it
}

func newSuspended(rec store.Session, workspace string) *Suspended {
	return &Suspended{rec: rec, dir: filepath.Join(workspace, rec.Cwd)}
}

// claim reserves the session for re-opening: one caller at a time, as a
// session runs one turn at a time.
func (s *Suspended) claim() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reopening {
		return false
	}
	s.reopening = true
	return true
}

// unclaim gives the session back after a re-opening that did not happen.
func (s *Suspended) unclaim() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reopening = false
}

func (s *Suspended) ownedBy() string { return s.rec.Owner }

// ID is the session's id, which it keeps when it is re-opened.
func (s *Suspended) ID() string { return s.rec.ID }

// Agent is the configured name of the session's agent.
func (s *Suspended) Agent() string { return s.rec.Agent }

// Proto describes the session as the API shows it: SUSPENDED, with the
// settings re-opening it will set again.
func (s *Suspended) Proto() *acpgatev1.Session {
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

// RecordProto describes the session recorded as rec, whose agent's
// workspace is workspace, as the API shows a suspended session: a replica
// lists the sessions of every replica from their records.
func RecordProto(rec store.Session, workspace string) *acpgatev1.Session {
	return newSuspended(rec, workspace).Proto()
}
