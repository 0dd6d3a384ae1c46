package acp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/acp/agentproc"
	"github.com/acpgate/acpgate/internal/acp/clientreq"
	"github.com/acpgate/acpgate/internal/acp/jsonrpc"
	"github.com/acpgate/acpgate/outcome"
)

// Session is one ACP session on an agent process: its own process, or
// one it shares with other sessions (see Conn).
type Session struct {
	cfg    Config
	log    *slog.Logger
	tracer trace.Tracer
	interp outcome.Interpreter
	proc   *agentproc.Process // host's
	conn   *jsonrpc.Conn      // host's
	host   *Conn
	info   AgentInfo
	cwd    string // resolved, symlink-free

	// The answers to the agent's requests (agentrequests.go).
	permissions  *clientreq.Permissions
	elicitations *clientreq.Elicitations
	files        clientreq.Files

	mu       sync.Mutex
	id       string
	turn     *turn
	replay   func(*acpgatev1.PromptEvent)
	closed   bool
	commands *acpgatev1.AvailableCommands
	usage    sessionUsage
	early    earlyUpdates
	// settings are the session's modes and config options (settings.go).
	settings sessionSettings

	closeOnce sync.Once
	cancels   sync.WaitGroup // session/cancel notifications being written
}

// Open starts the agent, performs the ACP handshake (initialize, then
// authenticate when configured) and opens a session (session/new, or
// session/load when opts.LoadSessionID is set). Every failure the agent
// causes is an *Error; the agent is stopped before Open returns one.
func Open(ctx context.Context, cfg Config, opts OpenOptions) (_ *Session, err error) {
	cfg = cfg.withDefaults()
	ctx, span := cfg.tracer().Start(ctx, SpanAgentStart, trace.WithAttributes(AttrAgent.String(cfg.Agent), AttrLoadSession.Bool(opts.LoadSessionID != ""), AttrWarm.Bool(false)))
	defer func() { endStartSpan(span, err) }()
	hctx, cancel := context.WithTimeoutCause(ctx, cfg.HandshakeTimeout, errHandshakeTimeout)
	defer cancel()
	s, err := launch(hctx, cfg, opts.Cwd)
	if err != nil {
		return nil, err
	}
	if opts.Started != nil {
		opts.Started()
	}
	if err := s.open(hctx, opts); err != nil {
		return nil, err
	}
	span.SetAttributes(AttrACPSession.String(s.id))
	return s, nil
}

// Start starts the agent in dir and performs the ACP handshake up to, not
// including, a session: spawn, initialize, authenticate. The result is a
// warm process: Begin opens its one session later, sparing that session
// the agent's start-up. Failures are as Open's.
func Start(ctx context.Context, cfg Config, dir string) (_ *Session, err error) {
	cfg = cfg.withDefaults()
	ctx, span := cfg.tracer().Start(ctx, SpanAgentWarm, trace.WithAttributes(AttrAgent.String(cfg.Agent)))
	defer func() { endStartSpan(span, err) }()
	hctx, cancel := context.WithTimeoutCause(ctx, cfg.HandshakeTimeout, errHandshakeTimeout)
	defer cancel()
	return launch(hctx, cfg, dir)
}

// Begin opens the session of a process made by Start (session/new, or
// session/load when opts.LoadSessionID is set) in the directory it was
// started in, which opts.Cwd, when set, must name. It may be called once;
// the handshake timeout bounds it. On failure the agent is stopped, as
// for Open.
func (s *Session) Begin(ctx context.Context, opts OpenOptions) (err error) {
	ctx, span := s.tracer.Start(ctx, SpanAgentStart, trace.WithAttributes(AttrAgent.String(s.cfg.Agent), AttrLoadSession.Bool(opts.LoadSessionID != ""), AttrWarm.Bool(true)))
	defer func() { endStartSpan(span, err) }()
	if s.ID() != "" {
		return errors.New("acp: Begin on a session already open")
	}
	if opts.Cwd != "" {
		if cwd, err := filepath.EvalSymlinks(opts.Cwd); err != nil || cwd != s.cwd {
			err := &Error{Proto: s.interp.SpawnFailed(fmt.Sprintf("the warm agent process runs in %q, not in %q", s.cwd, opts.Cwd))}
			s.abort(err)
			return err
		}
	}
	hctx, cancel := context.WithTimeoutCause(ctx, s.cfg.HandshakeTimeout, errHandshakeTimeout)
	defer cancel()
	if err := s.open(hctx, opts); err != nil {
		return err
	}
	span.SetAttributes(AttrACPSession.String(s.id))
	return nil
}

// endStartSpan ends a start-up span, classifying an agent's failure.
func endStartSpan(span trace.Span, err error) {
	if agentErr := (*Error)(nil); errors.As(err, &agentErr) {
		span.SetAttributes(attribute.String("acpgate.error.class", outcome.Class(agentErr.Proto)))
	}
	failSpan(span, err)
	span.End()
}

// launch spawns the agent in dir and runs initialize and authenticate
// under ctx, which carries the handshake timeout.
func launch(ctx context.Context, cfg Config, dir string) (*Session, error) {
	tracer := cfg.tracer()
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("agent", cfg.Agent)
	interp := outcome.Interpreter{PartialCap: cfg.PartialCap}
	cwd, err := filepath.EvalSymlinks(dir)
	if err == nil && !filepath.IsAbs(cwd) {
		err = fmt.Errorf("working directory %q is not absolute", dir)
	}
	if err != nil {
		return nil, &Error{Proto: interp.SpawnFailed(err.Error())}
	}
	spec := cfg.Process
	spec.Dir = cwd
	if spec.StderrLine == nil {
		spec.StderrLine = func(line string) { log.Debug("agent stderr", "line", line) }
	}
	if spec.Wrap != nil {
		spec.Command, spec.Args, err = spec.Wrap(cwd, spec.Command, spec.Args)
		if err != nil {
			return nil, &Error{Proto: interp.SpawnFailed(err.Error())}
		}
	}
	_, spawnSpan := tracer.Start(ctx, SpanAgentSpawn, trace.WithAttributes(AttrAgent.String(cfg.Agent), semconv.ProcessExecutablePath(spec.Command)))
	proc, err := agentproc.Start(spec)
	if err != nil {
		failSpan(spawnSpan, err)
		spawnSpan.End()
		return nil, &Error{Proto: interp.SpawnFailed(err.Error())}
	}
	spawnSpan.SetAttributes(semconv.ProcessPID(proc.Pid()), AttrContainment.String(proc.Containment().String()))
	spawnSpan.End()
	if got := proc.Containment(); got != spec.Containment {
		log.Warn("the kernel refused this agent the configured containment; its descendants are held by the weaker kind",
			"pid", proc.Pid(), "configured", spec.Containment, "in_force", got)
	}
	c := &Conn{cfg: cfg, log: log.With("pid", proc.Pid()), tracer: tracer, interp: interp, proc: proc, cwd: cwd}
	c.rpc = jsonrpc.New(proc.Stdout(), proc.Stdin(), agentHandler{c}, jsonrpc.Options{
		MaxFrameBytes:       cfg.MaxFrameBytes,
		StrictFraming:       cfg.StrictFraming,
		Logger:              c.log,
		MaxInFlightRequests: cfg.MaxAgentRequests,
		MaxReplyBytes:       cfg.MaxAgentReplyBytes,
	})
	// The process's first session, attached from the start: it makes the
	// handshake, and the process ends with it unless others join.
	s := c.newSession()
	c.attach(s)
	if err := s.hello(ctx); err != nil {
		s.abort(err)
		return nil, err
	}
	c.info = s.info
	return s, nil
}

// open runs session/new or session/load; on failure the agent is
// stopped.
func (s *Session) open(ctx context.Context, opts OpenOptions) error {
	if err := s.begin(ctx, opts); err != nil {
		s.abort(err)
		return err
	}
	s.log = s.log.With("session", s.id)
	return nil
}

// abort stops an agent whose start-up failed with err, and tells err what
// the agent said at initialize, when it got that far.
func (s *Session) abort(err error) {
	s.proc.Kill()
	s.conn.Close()
	var agentErr *Error
	if errors.As(err, &agentErr) && s.info.ProtocolVersion == ProtocolVersion {
		info := s.info
		agentErr.Info = &info
	}
}

// ID returns the ACP session id the agent minted or reloaded.
func (s *Session) ID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

// Cwd returns the session's resolved working directory.
func (s *Session) Cwd() string { return s.cwd }

// Info returns what the agent said about itself at initialize.
func (s *Session) Info() AgentInfo { return s.info }

// Conn returns the process the session runs on, which other sessions may
// Join.
func (s *Session) Conn() *Conn { return s.host }

// Done is closed when the connection to the agent has ended (the agent
// exited or closed its stdout, or the session was closed).
func (s *Session) Done() <-chan struct{} { return s.conn.Done() }

// Pid returns the agent's process id.
func (s *Session) Pid() int { return s.proc.Pid() }

// Kill stops the agent at once, its whole process tree, without the grace
// periods of Close: for a shutdown whose time is up. A running turn then
// ends as its agent's channel breaks, and a Close in progress or to come
// returns promptly.
func (s *Session) Kill() {
	s.markClosed()
	s.proc.Kill()
}

// Close cancels a running turn (waiting up to the cancel grace for it to
// end), then stops the agent: close stdin, grace, SIGTERM, grace, SIGKILL,
// reap. It returns when the agent process group is gone. On a process that
// other sessions still use, it closes the session on the agent instead
// (session/close, when advertised) and leaves the process to them.
func (s *Session) Close() { s.shut(false) }

// shut is Close, and End when askAgent.
func (s *Session) shut(askAgent bool) {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		t := s.turn
		s.mu.Unlock()
		if t != nil {
			t.requestCancel(s, "the session is closing")
			select {
			case <-t.ended:
			case <-time.After(s.cfg.CancelGrace + time.Second):
			}
		}
		if askAgent || s.host.others() {
			s.closeOnAgent()
		}
		if s.host.detach(s) {
			s.host.stop()
			s.cancels.Wait() // the agent is gone: their writes have failed
		}
	})
}
