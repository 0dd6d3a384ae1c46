package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"

	"go.opentelemetry.io/otel/trace"

	"github.com/acpgate/acpgate/internal/acp/agentproc"
	"github.com/acpgate/acpgate/internal/acp/clientreq"
	"github.com/acpgate/acpgate/internal/acp/jsonrpc"
	"github.com/acpgate/acpgate/internal/acp/translate"
	"github.com/acpgate/acpgate/internal/throttle"
	"github.com/acpgate/acpgate/outcome"
)

// ErrProcessGone is Join's answer when the process's last session has left
// and it is stopping: the caller starts another process instead.
var ErrProcessGone = errors.New("the agent process is stopping: its last session has ended")

// Conn is one agent process and the JSON-RPC connection to it, and the
// sessions open on it. A process serves one session (Open, or Start then
// Begin), or several when the gateway lets sessions share it (Join): ACP
// allows several session/new on one connection, and every session-scoped
// message names its session, by which Conn routes the agent's updates and
// requests to the right Session.
//
// The process lives as long as one of its sessions does: the session that
// leaves last stops it (Session.Close). A session that leaves while others
// stay is closed on the agent (session/close, when advertised), whether or
// not its client asked, so that a long-lived process does not accumulate
// sessions it no longer serves; re-opening it later restores it from what
// the agent keeps, as after a restart. Anything that ends the process (its
// crash, Kill, a cancel the agent ignores past the cancel grace) ends every
// session on it.
type Conn struct {
	cfg    Config
	log    *slog.Logger // the agent's and the pid's, no session's
	tracer trace.Tracer
	interp outcome.Interpreter
	proc   *agentproc.Process
	rpc    *jsonrpc.Conn
	cwd    string            // resolved, symlink-free: every session's
	info   AgentInfo         // set once by the handshake, before any session opens
	ids    translate.IDCache // the ids the agent's chunks repeat; notify's alone
	// strays spaces the warnings about updates the gateway cannot use
	// (see warnStray).
	strays throttle.Throttle

	// openMu lets one session open at a time (session/new, load or
	// resume), so that updates the agent sends for a session whose id is
	// not known yet belong to the one opening.
	openMu sync.Mutex

	mu       sync.Mutex
	sessions map[string]*Session // open ones, by ACP session id
	opening  *Session            // the one whose open is in flight
	attached int                 // sessions opening or open
	joined   bool                // a session has joined: it is shared
	stopped  bool                // the last one left: the process is stopping
}

// newSession makes a session of c, not attached yet.
func (c *Conn) newSession() *Session {
	return &Session{
		cfg:          c.cfg,
		log:          c.log,
		tracer:       c.tracer,
		interp:       c.interp,
		proc:         c.proc,
		conn:         c.rpc,
		host:         c,
		info:         c.info,
		cwd:          c.cwd,
		permissions:  clientreq.NewPermissions(c.cfg.Permission),
		elicitations: clientreq.NewElicitations(c.cfg.Elicitation),
		files:        clientreq.NewFiles(c.cfg.FS, c.cwd),
	}
}

// attach counts s among c's sessions (the process is shared from the
// second on); it reports false when c is stopping.
func (c *Conn) attach(s *Session) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return false
	}
	c.attached++
	c.joined = c.joined || c.attached > 1
	return true
}

// detach removes s; it reports true to the caller that removed the last
// session, which stops the process.
func (c *Conn) detach(s *Session) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, x := range c.sessions {
		if x == s {
			delete(c.sessions, id)
		}
	}
	if c.opening == s {
		c.opening = nil
	}
	c.attached--
	if c.attached > 0 || c.stopped {
		return false
	}
	c.stopped = true
	return true
}

// others reports whether sessions other than s are attached.
func (c *Conn) others() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.attached > 1
}

// Sessions returns how many sessions are opening or open on the process.
func (c *Conn) Sessions() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.attached
}

// Done is closed when the connection to the agent has ended.
func (c *Conn) Done() <-chan struct{} { return c.rpc.Done() }

// Pid returns the agent's process id.
func (c *Conn) Pid() int { return c.proc.Pid() }

// stop stops the process, after its last session left.
func (c *Conn) stop() {
	c.proc.Stop(c.cfg.StopGrace)
	c.rpc.Close()
}

// openingAs marks s as the session opening.
func (c *Conn) openingAs(s *Session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.opening = s
}

// opened registers s under id, its open done.
func (c *Conn) opened(s *Session, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sessions == nil {
		c.sessions = make(map[string]*Session)
	}
	c.sessions[id] = s
	if c.opening == s {
		c.opening = nil
	}
}

// route finds the session a message of the agent's names: the open one
// with that id; else the one opening, when its id is that one or not known
// yet (the agent may name it before the gateway knows it); else, on a
// process that has only ever served one session, that session, which
// decides what to do with a message for another id as it always has. Nil
// when none fits: on a shared process a message for a session that left
// must not reach another one's stream.
func (c *Conn) route(sessionID string) *Session {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.sessions[sessionID]; s != nil {
		return s
	}
	if s := c.opening; s != nil {
		if id := s.ID(); id == "" || id == sessionID || !c.joined {
			return s
		}
	}
	if !c.joined && len(c.sessions) == 1 {
		for _, s := range c.sessions {
			return s
		}
	}
	return nil
}

// Join opens another session (session/new, or a re-opening when
// opts.LoadSessionID is set) on the process of c, in its directory, which
// opts.Cwd, when set, must name. The handshake timeout bounds it. A
// failure leaves the process to its other sessions; ErrProcessGone means
// it has none left and is stopping.
func (c *Conn) Join(ctx context.Context, opts OpenOptions) (_ *Session, err error) {
	ctx, span := c.tracer.Start(ctx, SpanAgentStart, trace.WithAttributes(AttrAgent.String(c.cfg.Agent), AttrLoadSession.Bool(opts.LoadSessionID != ""), AttrWarm.Bool(true)))
	defer func() { endStartSpan(span, err) }()
	if opts.Cwd != "" {
		if cwd, err := filepath.EvalSymlinks(opts.Cwd); err != nil || cwd != c.cwd {
			return nil, &Error{Proto: c.interp.SpawnFailed(fmt.Sprintf("the shared agent process runs in %q, not in %q", c.cwd, opts.Cwd))}
		}
	}
	s := c.newSession()
	if !c.attach(s) {
		return nil, ErrProcessGone
	}
	hctx, cancel := context.WithTimeoutCause(ctx, c.cfg.HandshakeTimeout, errHandshakeTimeout)
	defer cancel()
	if err := s.begin(hctx, opts); err != nil {
		if c.detach(s) {
			c.stop()
		}
		return nil, err
	}
	s.log = s.log.With("session", s.id)
	span.SetAttributes(AttrACPSession.String(s.id))
	return s, nil
}

// agentHandler serves what the agent sends on its own initiative. It is a
// separate, unexported type so that the exported methods of Conn and
// Session are only those a caller may use: were either the
// jsonrpc.Handler, any importer could call its Notify and forge the
// agent's updates.
type agentHandler struct{ c *Conn }

func (h agentHandler) Notify(method string, params json.RawMessage) bool {
	return h.c.notify(method, params)
}

func (h agentHandler) Request(ctx context.Context, method string, params json.RawMessage) (any, *jsonrpc.ErrorObject) {
	return h.c.request(ctx, method, params)
}

// notify handles the agent's notifications (session/update), in arrival
// order, on the connection's reader, handing each update to its session.
// It returns false only for params that are not JSON at all.
func (c *Conn) notify(method string, params json.RawMessage) bool {
	if method != "session/update" {
		if !json.Valid(params) {
			return false
		}
		c.log.Debug("ignoring a notification the gateway does not handle", "method", method)
		return true
	}
	sessionID, u, err := translate.Decode(params, &c.ids)
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		return false
	}
	if err != nil {
		c.warnStray("a session/update did not decode as its kind; passing it through raw", "err", err)
		if u.Event == nil {
			return true
		}
	}
	s := c.route(sessionID)
	if s == nil {
		c.warnStray("ignoring a session/update for a session not open on this process", "update_session", jsonrpc.Clip(sessionID))
		return true
	}
	s.update(sessionID, u)
	return true
}

// warnStray logs a warning about an update the gateway cannot use, at
// most once a minute per agent process (throttle.Every) with the number
// held back: the agent decides how many it sends, and a line of the
// gateway's log per line of the agent's output would let it flood the log.
func (c *Conn) warnStray(msg string, args ...any) {
	c.strays.Warn(c.log, msg, args...)
}

// sessionParams is what every session-scoped request of the agent's
// carries: the session it is about.
type sessionParams struct {
	SessionID string `json:"sessionId"`
}

// request serves the agent's own requests, as the session they name.
func (c *Conn) request(ctx context.Context, method string, params json.RawMessage) (any, *jsonrpc.ErrorObject) {
	var p sessionParams
	_ = json.Unmarshal(params, &p) // a request that names none is routed as one naming ""
	s := c.route(p.SessionID)
	if s == nil {
		return nil, &jsonrpc.ErrorObject{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s: no session %q is open on this connection", method, p.SessionID)}
	}
	return s.request(ctx, method, params)
}
