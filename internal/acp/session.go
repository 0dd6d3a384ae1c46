package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/acp/agentproc"
	"github.com/acpgate/acpgate/internal/acp/answer"
	"github.com/acpgate/acpgate/internal/acp/clientreq"
	"github.com/acpgate/acpgate/internal/acp/jsonrpc"
	"github.com/acpgate/acpgate/internal/acp/translate"
	"github.com/acpgate/acpgate/outcome"
)

// ProtocolVersion is the ACP protocol version the gateway speaks.
const ProtocolVersion = 1

// Defaults for Config's durations.
const (
	DefaultCancelGrace       = 10 * time.Second
	DefaultStopGrace         = 2 * time.Second
	DefaultHandshakeTimeout  = 60 * time.Second
	DefaultPermissionTimeout = 5 * time.Minute
)

// DefaultMaxAgentRequests is Config.MaxAgentRequests when it is zero; see
// jsonrpc.DefaultMaxInFlightRequests for why 16.
const DefaultMaxAgentRequests = jsonrpc.DefaultMaxInFlightRequests

// DefaultMaxAgentReplyBytes is Config.MaxAgentReplyBytes when it is zero;
// see jsonrpc.DefaultMaxReplyBytes.
const DefaultMaxAgentReplyBytes = jsonrpc.DefaultMaxReplyBytes

// MinMaxAgentReplyBytes is the least Config.MaxAgentReplyBytes may be: a
// read of the largest file the gateway serves, with lines selected from
// it (the file and the selection, each reserved before it is allocated),
// must fit, or no wait could ever make room for it.
const MinMaxAgentReplyBytes = 2*clientreq.DefaultMaxReadBytes + 1<<10

// Config is how to run one agent and what it may do.
type Config struct {
	// Agent is the configured agent name, used in events and logs.
	Agent string
	// Process says how to start the agent; Open sets its Dir.
	Process agentproc.Spec
	// ClientVersion is reported in clientInfo at initialize.
	ClientVersion string
	// AuthMethod, when set, is passed to authenticate after initialize.
	AuthMethod string
	// FS says which fs/* requests the agent may make.
	FS clientreq.FSAccess
	// Permission says how session/request_permission is answered.
	Permission clientreq.PermissionPolicy
	// Elicitation says how elicitation/create is answered; the zero value
	// declines.
	Elicitation clientreq.ElicitationPolicy
	// MCPServers are passed to session/new and session/load.
	MCPServers []acpsdk.McpServer
	// StrictFraming makes non-JSON lines on stdout a protocol violation.
	StrictFraming bool
	// MaxFrameBytes bounds one line from the agent.
	MaxFrameBytes int
	// MaxAgentRequests bounds the agent's requests (permission, fs) served
	// at once; beyond it the gateway stops reading the agent until one is
	// answered. With FS.MaxReadBytes it bounds what answers waiting for an
	// agent that does not read can hold: their product.
	// DefaultMaxAgentRequests when zero.
	MaxAgentRequests int
	// MaxAgentReplyBytes bounds the bytes the answers to the agent's
	// requests hold, from before they are built until the agent has read
	// them; a request whose answer does not fit waits, then is answered
	// with an error (see jsonrpc's replies.go).
	// DefaultMaxAgentReplyBytes when zero.
	MaxAgentReplyBytes int64
	// CancelGrace is how long a cancelled turn waits for the agent's
	// answer before the agent is stopped. DefaultCancelGrace when zero.
	CancelGrace time.Duration
	// StopGrace is how long closing waits after closing stdin, and again
	// after SIGTERM, before escalating. DefaultStopGrace when zero.
	StopGrace time.Duration
	// HandshakeTimeout bounds Open: spawn, initialize, authenticate and
	// session/new or session/load together. DefaultHandshakeTimeout when
	// zero. Without it an agent that never answers initialize would hold
	// its caller until the caller's own deadline, which may be never.
	HandshakeTimeout time.Duration
	// PartialCap bounds PartialOutput.text; see outcome.Interpreter.
	PartialCap int
	// AnswerBudget bounds the answer text held for outcomes by the turns of
	// every session sharing it (a gateway's limits.max_answer_bytes); nil:
	// unbounded. A turn over it completes with its text omitted
	// (TEXT_OMISSION_ANSWER_LIMIT).
	AnswerBudget *answer.Budget
	// Logger receives diagnostics; slog.Default() when nil.
	Logger *slog.Logger
	// Tracer makes the spans of the agent's start-up, of the requests
	// sent to it and of those it sends; nil makes none.
	Tracer trace.Tracer
	// Propagator writes the current span's context into the _meta of
	// every request and notification sent to the agent (ACP reserves
	// traceparent, tracestate and baggage there), so that an agent that
	// traces continues the trace. Nil sends no _meta, as without tracing.
	Propagator propagation.TextMapPropagator
}

// OpenOptions choose the session to open.
type OpenOptions struct {
	// Cwd is the session's working directory: absolute and existing.
	Cwd string
	// LoadSessionID, when set, re-opens that session instead of opening a
	// new one, the way AgentInfo.ReopenMethod says.
	LoadSessionID string
	// Replay receives the history an agent replays during session/load;
	// nil drops it.
	Replay func(*acpgatev1.PromptEvent)
	// MCPServers are the caller's MCP servers for this session, sent
	// after Config.MCPServers. One over a transport the agent did not
	// advertise fails the open with capability_not_supported (see
	// mcp.go). Their headers may be secrets: they go to the agent only.
	MCPServers []acpsdk.McpServer
}

// Methods that re-open a session; see AgentInfo.ReopenMethod.
const (
	MethodResume = "session/resume"
	MethodLoad   = "session/load"
)

// AgentInfo is what the agent said about itself at initialize.
type AgentInfo struct {
	ProtocolVersion int
	Name            string
	Version         string
	Capabilities    acpsdk.AgentCapabilities
	AuthMethods     []string
	// DeleteSessions is sessionCapabilities.delete (session/delete),
	// which Capabilities cannot hold: the SDK's types lack it.
	DeleteSessions bool
}

// ReopenMethod is how the agent can re-open a session, or "" when it
// cannot: session/resume when it advertised sessionCapabilities.resume,
// since that restores the session without replaying its history (which the
// gateway would only discard); else session/load when it advertised
// loadSession.
func (info AgentInfo) ReopenMethod() string {
	switch {
	case info.Capabilities.SessionCapabilities.Resume != nil:
		return MethodResume
	case info.Capabilities.LoadSession:
		return MethodLoad
	}
	return ""
}

// Error is a failure the agent caused (or the gateway's own typed
// rejection), carrying its classification.
type Error struct {
	Proto *acpgatev1.HarnessError
	// Info is what the agent said at initialize, when the failure came
	// later in the handshake (for example session/new asking for
	// authentication); nil otherwise.
	Info *AgentInfo
}

func (e *Error) Error() string { return e.Proto.GetMessage() }

// Errors that mean no turn ran, for reasons of the caller's making.
var (
	ErrBusy   = errors.New("the session is already running a turn (ACP allows one at a time)")
	ErrClosed = errors.New("the session is closed")
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
	settings        Settings
	settingsChanged func()

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

// withDefaults fills in Config's durations left zero.
func (cfg Config) withDefaults() Config {
	if cfg.CancelGrace <= 0 {
		cfg.CancelGrace = DefaultCancelGrace
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = DefaultStopGrace
	}
	if cfg.Permission.Timeout <= 0 {
		cfg.Permission.Timeout = DefaultPermissionTimeout
	}
	if cfg.Elicitation.Timeout <= 0 {
		cfg.Elicitation.Timeout = DefaultPermissionTimeout
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	return cfg
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

// initializeResult decodes the parts of InitializeResponse the gateway
// uses. authMethods are decoded by id only: agents describe them in shapes
// that vary between protocol revisions, and only the id is needed.
type initializeResult struct {
	ProtocolVersion   int                      `json:"protocolVersion"`
	AgentCapabilities acpsdk.AgentCapabilities `json:"agentCapabilities"`
	AgentInfo         *acpsdk.Implementation   `json:"agentInfo"`
	AuthMethods       []struct {
		ID string `json:"id"`
	} `json:"authMethods"`
	// deleteSessions is sessionCapabilities.delete, which the SDK's
	// types do not have yet.
	deleteSessions bool
}

func (r *initializeResult) UnmarshalJSON(b []byte) error {
	type plain initializeResult
	if err := json.Unmarshal(b, (*plain)(r)); err != nil {
		return err
	}
	var extra struct {
		AgentCapabilities struct {
			SessionCapabilities struct {
				Delete json.RawMessage `json:"delete"`
			} `json:"sessionCapabilities"`
		} `json:"agentCapabilities"`
	}
	if json.Unmarshal(b, &extra) == nil {
		d := string(extra.AgentCapabilities.SessionCapabilities.Delete)
		r.deleteSessions = d != "" && d != "null"
	}
	return nil
}

// hello runs initialize, then authenticate when configured.
func (s *Session) hello(ctx context.Context) error {
	var init initializeResult
	if err := s.call(ctx, "initialize", func(meta map[string]any) any {
		return acpsdk.InitializeRequest{
			Meta:            meta,
			ProtocolVersion: ProtocolVersion,
			ClientCapabilities: acpsdk.ClientCapabilities{
				Fs:          acpsdk.FileSystemCapabilities{ReadTextFile: s.cfg.FS.Read, WriteTextFile: s.cfg.FS.Write},
				Terminal:    false,
				Elicitation: s.cfg.Elicitation.Capabilities(),
			},
			ClientInfo: &acpsdk.Implementation{Name: "acpgate", Version: s.cfg.ClientVersion},
		}
	}, &init); err != nil {
		return err
	}
	if init.ProtocolVersion != ProtocolVersion {
		return &Error{Proto: s.interp.UnsupportedProtocolVersion(init.ProtocolVersion, ProtocolVersion)}
	}
	s.info = AgentInfo{ProtocolVersion: init.ProtocolVersion, Capabilities: init.AgentCapabilities, DeleteSessions: init.deleteSessions}
	if init.AgentInfo != nil {
		s.info.Name, s.info.Version = init.AgentInfo.Name, init.AgentInfo.Version
	}
	for _, m := range init.AuthMethods {
		s.info.AuthMethods = append(s.info.AuthMethods, m.ID)
	}
	if m := s.cfg.AuthMethod; m != "" {
		if !slices.Contains(s.info.AuthMethods, m) {
			return &Error{Proto: s.interp.AuthMethodNotAdvertised(m, s.info.AuthMethods)}
		}
		var ignored json.RawMessage
		if err := s.call(ctx, "authenticate", func(meta map[string]any) any {
			return acpsdk.AuthenticateRequest{Meta: meta, MethodId: m}
		}, &ignored); err != nil {
			return err
		}
	}
	return nil
}

// begin runs session/new, or session/load when opts.LoadSessionID is set,
// one session of the process at a time; the session is routed to by its
// id once it is open.
func (s *Session) begin(ctx context.Context, opts OpenOptions) error {
	c := s.host
	c.openMu.Lock()
	defer c.openMu.Unlock()
	c.openingAs(s)
	if err := s.beginLocked(ctx, opts); err != nil {
		return err
	}
	c.opened(s, s.ID())
	return nil
}

// beginLocked is begin, with the process's openMu held.
func (s *Session) beginLocked(ctx context.Context, opts OpenOptions) error {
	mcp, err := s.sessionMCP(opts)
	if err != nil {
		return err
	}
	if opts.LoadSessionID == "" {
		var result json.RawMessage
		if err := s.call(ctx, "session/new", func(meta map[string]any) any {
			return acpsdk.NewSessionRequest{Meta: meta, Cwd: s.cwd, McpServers: mcp}
		}, &result); err != nil {
			return err
		}
		var created struct {
			SessionID string `json:"sessionId"`
		}
		if err := json.Unmarshal(result, &created); err != nil {
			return &Error{Proto: s.interp.MalformedResult("session/new", err.Error(), result)}
		}
		if created.SessionID == "" {
			return &Error{Proto: s.interp.MalformedResult("session/new", "sessionId is empty", nil)}
		}
		s.adoptSettings(result)
		s.setID(created.SessionID)
		return nil
	}
	method := s.info.ReopenMethod()
	if method == "" {
		return &Error{Proto: s.interp.ReopenNotSupported()}
	}
	// The id is known before the call so the replayed history, which
	// names it, is recognised as this session's.
	s.mu.Lock()
	s.id, s.replay = opts.LoadSessionID, opts.Replay
	s.mu.Unlock()
	var result json.RawMessage
	id := acpsdk.SessionId(opts.LoadSessionID)
	err = s.call(ctx, method, func(meta map[string]any) any {
		if method == MethodResume {
			return acpsdk.ResumeSessionRequest{Meta: meta, SessionId: id, Cwd: s.cwd, McpServers: mcp}
		}
		return acpsdk.LoadSessionRequest{Meta: meta, SessionId: id, Cwd: s.cwd, McpServers: mcp}
	}, &result)
	s.mu.Lock()
	s.replay = nil
	s.mu.Unlock()
	if err == nil {
		s.adoptSettings(result)
	}
	return err
}

func (s *Session) setID(id string) {
	s.mu.Lock()
	s.id = id
	if s.early.sessionID == id {
		if s.early.commands != nil {
			s.commands = s.early.commands
		}
		applySettings(&s.settings, s.early.settings)
	}
	s.early = earlyUpdates{}
	s.mu.Unlock()
}

// earlyUpdates are the session state an agent sent for a session before
// its id was known to the gateway: sent right after answering session/new,
// and read before Open recorded the id. Only the last of each kind counts,
// as it would have later.
type earlyUpdates struct {
	sessionID string
	commands  *acpgatev1.AvailableCommands
	settings  translate.SettingsUpdate
}

// keep records u's state for the session it names, dropping what was kept
// for another one.
func (e *earlyUpdates) keep(sessionID string, u translate.Update) {
	if e.sessionID != sessionID {
		*e = earlyUpdates{sessionID: sessionID}
	}
	if u.Commands != nil {
		e.commands = u.Commands
	}
	e.settings.Merge(u.Settings)
}

// errHandshakeTimeout is the cause of a handshake context that ran out of
// Config.HandshakeTimeout, telling it apart from the caller's own deadline.
var errHandshakeTimeout = errors.New("handshake timeout")

// call makes one request of the handshake or of a session's settings and
// decodes its result. params builds
// the request given its _meta, which carries the request's own span.
func (s *Session) call(ctx context.Context, method string, params func(meta map[string]any) any, result any) error {
	ctx, span := s.startCall(ctx, method)
	reply, err := s.conn.Call(ctx, method, params(s.meta(ctx)))
	endCall(span, reply, err)
	if err != nil {
		if errors.Is(context.Cause(ctx), errHandshakeTimeout) {
			f := outcome.Failure{StderrTail: s.proc.StderrTail()}
			return &Error{Proto: s.interp.HandshakeTimedOut(method, s.cfg.HandshakeTimeout, f)}
		}
		return fmt.Errorf("%s: %w", method, err)
	}
	if reply.End != nil {
		return &Error{Proto: s.endError(method, reply.End, outcome.Text{})}
	}
	if reply.Violation != "" {
		return &Error{Proto: s.interp.ProtocolViolation(reply.Violation, outcome.Text{})}
	}
	r := reply.Response
	if len(r.Error) > 0 && string(r.Error) != "null" || len(r.Result) == 0 {
		return &Error{Proto: s.interp.Interpret(outcome.Turn{Method: method, Ending: outcome.Answered, Response: r}).Error}
	}
	if err := json.Unmarshal(r.Result, result); err != nil {
		return &Error{Proto: s.interp.MalformedResult(method, err.Error(), r.Result)}
	}
	return nil
}

// endError classifies a connection that ended with a request outstanding.
func (s *Session) endError(method string, end *jsonrpc.End, text outcome.Text) *acpgatev1.HarnessError {
	if end.Kind == jsonrpc.EndViolation {
		return s.interp.ProtocolViolation(end.Detail, text)
	}
	turn := outcome.Turn{Method: method, Ending: outcome.StreamEnded, Text: text, Failure: s.failure(end.Detail)}
	if end.Kind != jsonrpc.EndStream {
		turn.Ending = outcome.TransportFailed
	}
	return s.interp.Interpret(turn).Error
}

// failure gathers what is known about a broken channel: the agent's exit
// status (waiting briefly, since an agent that closed its stdout is
// usually exiting) and the tail of its stderr.
func (s *Session) failure(detail string) outcome.Failure {
	f := outcome.Failure{Detail: detail}
	if s.proc.WaitExit(500 * time.Millisecond) {
		f.ExitCode, f.Signal, _ = s.proc.ExitStatus()
		// Let stderr drain what the agent wrote before it exited.
		select {
		case <-s.proc.StderrDone():
		case <-time.After(200 * time.Millisecond):
		}
	}
	f.StderrTail = s.proc.StderrTail()
	return f
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

// Stats returns the connection's counters of tolerated irregularities.
func (s *Session) Stats() jsonrpc.Stats { return s.conn.Stats() }

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

// Containment returns how the agent's process tree is held.
func (s *Session) Containment() agentproc.Containment { return s.proc.Containment() }

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
