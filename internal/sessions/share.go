package sessions

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/acpgate/acpgate/internal/acp"
)

// sharing keeps the processes of an agent configured with reuse_process
// that serve sessions others may join.
//
// A process is shared only by sessions of one principal in one working
// directory (shareKey). The principal, because sessions on one process
// share its memory, its files and its caches: a caller's session on
// another caller's process could read the other's conversation, which the
// gateway otherwise never lets one principal see. The directory, because a
// process's working directory, and its sandbox, are fixed when it starts.
//
// A process holds at most max sessions, counting those joining it; a
// further session starts another process, so that one crash ends a
// bounded number of sessions. Processes do not count toward any limit of
// their own: each serves at least one session, so max_sessions bounds them
// too.
type sharing struct {
	max   int
	mu    sync.Mutex
	procs []*sharedProc
}

// shareKey is who may share a process: one principal in one directory.
type shareKey struct{ dir, owner string }

// sharedProc is one shared process and the sessions joining it now.
type sharedProc struct {
	key     shareKey
	conn    *acp.Conn
	joining int // Join calls in flight, not yet counted by conn.Sessions
}

// gone reports whether the process no longer serves or will serve
// sessions: its connection ended, or its last session left. sh.mu is held.
func (p *sharedProc) gone() bool {
	select {
	case <-p.conn.Done():
		return true
	default:
	}
	return p.joining == 0 && p.conn.Sessions() == 0
}

// reserve finds a process of key with room for one more session and
// counts the session as joining it; nil when there is none.
func (sh *sharing) reserve(key shareKey) *sharedProc {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	p := sh.roomFor(key)
	if p != nil {
		p.joining++
	}
	return p
}

// roomFor is a process of key with room for one more session, nil when
// there is none; sh.mu is held.
func (sh *sharing) roomFor(key shareKey) *sharedProc {
	sh.procs = slices.DeleteFunc(sh.procs, (*sharedProc).gone)
	for _, p := range sh.procs {
		if p.key == key && p.joining+p.conn.Sessions() < sh.max {
			return p
		}
	}
	return nil
}

// hasRoom reports whether a process of key has room for one more session
// now, so that a session about to join one does not take a warm process
// it will not use.
func (sh *sharing) hasRoom(key shareKey) bool {
	if sh == nil {
		return false
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.roomFor(key) != nil
}

// joined ends a reservation, the Join done (its session, if any, is now
// counted by the process itself).
func (sh *sharing) joined(p *sharedProc) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	p.joining--
}

// add offers a process just started for a session of key to the next
// sessions of key.
func (sh *sharing) add(key shareKey, conn *acp.Conn) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.procs = append(slices.DeleteFunc(sh.procs, (*sharedProc).gone), &sharedProc{key: key, conn: conn})
}

// count returns the processes serving sessions now.
func (sh *sharing) count() int {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.procs = slices.DeleteFunc(sh.procs, (*sharedProc).gone)
	return len(sh.procs)
}

// join opens o's session on a shared process of its principal and
// directory with room for it. It reports false when there is none (or the
// one found was stopping), and the caller starts a process.
func (e *agentEntry) join(ctx context.Context, o *Opening, opts acp.OpenOptions, log *slog.Logger) (*acp.Session, bool, error) {
	p := e.share.reserve(o.shareKey())
	if p == nil {
		return nil, false, nil
	}
	began := time.Now()
	sess, err := p.conn.Join(ctx, opts)
	e.share.joined(p)
	if errors.Is(err, acp.ErrProcessGone) {
		return nil, false, nil
	}
	noteStart(e.m, time.Since(began), err)
	if err != nil {
		e.startup.failed(err.Error(), time.Now(), time.Time{})
		return nil, true, err
	}
	// It waited for no process to start: a warm start, as metrics count.
	e.m.SessionStarted(true)
	log.DebugContext(ctx, "session joins a shared agent process", "agent", e.cfg.Name, "pid", p.conn.Pid(), "sessions", p.conn.Sessions())
	return sess, true, nil
}

// shareKey is who may share a process with this session.
func (o *Opening) shareKey() shareKey { return shareKey{dir: o.dir, owner: o.owner} }
