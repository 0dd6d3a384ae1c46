package sessions

import (
	"fmt"
	"maps"
	"slices"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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
//
// It also holds the suspended sessions (see Suspended), under the
// same ids: an id is either open or suspended, never both, so a new
// session cannot take the id of one that will be re-opened.
type registry struct {
	mu        sync.Mutex
	sessions  map[string]*Live
	suspended map[string]*Suspended
	order     []string // ids, oldest first
}

func newRegistry() *registry {
	return &registry{sessions: make(map[string]*Live), suspended: make(map[string]*Suspended)}
}

// add registers live under a unique id derived from its ACP id and sets
// live.id.
func (r *registry) add(live *Live) {
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
func (r *registry) delete(live *Live) bool {
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
func (r *registry) reopened(live *Live, susp *Suspended) bool {
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
func (r *registry) takeSuspended(susp *Suspended) bool {
	if r.suspended[susp.rec.ID] != susp {
		return false
	}
	delete(r.suspended, susp.rec.ID)
	return true
}

// suspend replaces live, whose agent is gone, by susp under the same id, in
// its place in the order. It reports false when live was not registered.
func (r *registry) suspend(live *Live, susp *Suspended) bool {
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
func (r *registry) addSuspended(susp *Suspended) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.suspended[susp.rec.ID] = susp
	r.order = append(r.order, susp.rec.ID)
}

// deleteSuspended unregisters susp; it reports false when susp was not
// registered.
func (r *registry) deleteSuspended(susp *Suspended) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.takeSuspended(susp) {
		return false
	}
	r.order = slices.DeleteFunc(r.order, func(x string) bool { return x == susp.rec.ID })
	return true
}

// allSuspended returns the suspended sessions, in no particular order.
func (r *registry) allSuspended() []*Suspended {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Collect(maps.Values(r.suspended))
}

// lookupSuspended finds a suspended session by id; nil when there is none.
func (r *registry) lookupSuspended(id string) *Suspended {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.suspended[id]
}

// findSuspended finds a suspended session of agent by its id or by its ACP
// session id; nil when there is none.
func (r *registry) findSuspended(agent, id string) *Suspended {
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
	Proto() *acpgatev1.Session
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
func (r *registry) lookup(id string) (*Live, error) {
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
func (r *registry) all() []*Live {
	r.mu.Lock()
	defer r.mu.Unlock()
	lives := make([]*Live, 0, len(r.order))
	for _, id := range r.order {
		if live := r.sessions[id]; live != nil {
			lives = append(lives, live)
		}
	}
	return lives
}
