// Package server is acpgate's gRPC service: acpgate.v1.AgentGateway over
// the ACP runtime (package acp) and the outcome contract.
//
// Every Prompt stream that starts a turn carries exactly one terminal event
// as its last message and ends with status OK; a non-OK status means no turn
// ran. Agents are chosen by configured name only: a client never supplies a
// command, a path or an environment.
package server

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/access"
	"github.com/acpgate/acpgate/internal/acp"
	"github.com/acpgate/acpgate/internal/acp/agentproc"
	"github.com/acpgate/acpgate/internal/acp/answer"
	"github.com/acpgate/acpgate/internal/acp/clientreq"
	"github.com/acpgate/acpgate/internal/admission"
	"github.com/acpgate/acpgate/internal/config"
	"github.com/acpgate/acpgate/internal/mcpoffer"
	"github.com/acpgate/acpgate/internal/metrics"
	"github.com/acpgate/acpgate/internal/notify"
	"github.com/acpgate/acpgate/internal/spelling"
	"github.com/acpgate/acpgate/internal/store"
	"github.com/acpgate/acpgate/internal/store/memory"
	"github.com/acpgate/acpgate/internal/tracing"
	"github.com/acpgate/acpgate/internal/turn"
	"github.com/acpgate/acpgate/outcome"
)

// Options configure a Gateway.
type Options struct {
	// Config is the validated configuration.
	Config *config.Config
	// Version is reported to agents in clientInfo.
	Version string
	// LookupEnv resolves agents' pass-through variables; os.LookupEnv
	// when nil.
	LookupEnv func(string) (string, bool)
	// Logger receives the gateway's logs; slog.Default() when nil.
	Logger *slog.Logger
	// JanitorInterval is how often idle and dead sessions are swept; one
	// second when zero.
	JanitorInterval time.Duration
	// Store keeps the turns and their journals; an empty memory store when
	// nil. The gateway does not close it.
	Store store.Store
	// TempDir creates a fresh temporary working directory for a session of
	// the agent named, for agents without a workspace; a directory of the
	// system's temporary directory when nil. A gateway that may be killed
	// passes one whose leftovers the next start removes (package scratch).
	TempDir func(agent string) (string, error)
	// SandboxLauncher is the acpgate executable, which completes agents'
	// namespace containment with a /proc of their own and confines agents
	// with sandbox.enabled (see package sandbox); without it, agents see
	// the gateway's /proc, an unprivileged gateway's agents get no user
	// namespace unless the gateway is dumpable, and agents with the
	// sandbox fail to start.
	SandboxLauncher string
	// Metrics records the gateway's metrics; nil records none.
	Metrics *metrics.Metrics
	// TracerProvider makes the gateway's spans: the gRPC calls', the
	// turns' and the agents' (start-up, requests, cancels); nil makes none.
	// With it, agents also get the gateway's OTLP variables (see
	// tracing.AgentEnv) so that their spans reach the same collector.
	TracerProvider trace.TracerProvider
	// Propagator reads callers' trace context from gRPC metadata and
	// writes it into the _meta of every request sent to an agent; nil
	// means tracing.Propagator() with a TracerProvider, and without one
	// reads none and sends no _meta.
	Propagator propagation.TextMapPropagator
	// Environ is the gateway's environment ("K=V"), from which agents get
	// the OTLP variables when tracing; os.Environ() when nil.
	Environ []string
}

// Gateway implements acpgatev1.AgentGatewayServer.
type Gateway struct {
	acpgatev1.UnimplementedAgentGatewayServer

	cfg    *config.Config
	log    *slog.Logger
	agents []*agentEntry
	byName map[string]*agentEntry
	interp outcome.Interpreter

	admit    *admission.Controller
	watchers *turn.WatchLimits // WatchTurn streams open
	authz    access.Authz
	sessions *registry
	store    store.Store
	turns    turn.Table
	reader   *turn.Reader     // every stream of a turn reads through it
	replicas *replicas        // nil for a gateway on its own
	notifier *notify.Notifier // nil without webhooks (notify.go)

	metrics   *metrics.Metrics // nil: none
	tracer    trace.Tracer     // records nothing without a TracerProvider
	traceOpts Options          // TracerProvider and Propagator, for the gRPC server
	janitor   chan struct{}
	janitorWG sync.WaitGroup
	tempDir   func(agent string) (string, error)
}

// agentEntry is a configured agent and what the gateway learned of it.
type agentEntry struct {
	cfg     config.Agent
	acp     acp.Config
	m       *metrics.Agent // nil without metrics
	pool    *pool          // its warm processes; nil when it keeps none
	share   *sharing       // its processes several sessions share; nil without reuse_process
	startup startupStatus
	mcp     mcpoffer.Offer // what callers may ask of MCP servers
	mu      sync.Mutex
	caps    *acpgatev1.AgentCapabilities
	// mcpTransports are the remote MCP transports the agent advertised
	// at its last initialize, for ListAgents.
	mcpTransports []string
}

// New builds a Gateway and starts its janitor. Close stops it.
func New(opts Options) (*Gateway, error) {
	if opts.Config == nil {
		return nil, errors.New("server: no configuration")
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	lookup := opts.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	if opts.TracerProvider != nil && opts.Propagator == nil {
		opts.Propagator = tracing.Propagator()
	}
	g := &Gateway{
		cfg:       opts.Config,
		log:       log,
		byName:    make(map[string]*agentEntry),
		admit:     admission.New(opts.Config.Limits.MaxSessions, opts.Config.Limits.MaxWarm, opts.Config.Quotas),
		sessions:  newRegistry(),
		watchers:  turn.NewWatchLimits(opts.Config.Limits.MaxWatchersPerTurn, opts.Config.Limits.MaxWatchersPerPrincipal),
		janitor:   make(chan struct{}),
		tempDir:   opts.TempDir,
		store:     opts.Store,
		metrics:   opts.Metrics,
		tracer:    opts.tracer(),
		traceOpts: Options{TracerProvider: opts.TracerProvider, Propagator: opts.Propagator},
	}
	if g.store == nil {
		g.store = memory.New()
	}
	g.reader = turn.NewReader(turn.ReaderOptions{Turns: &g.turns, Store: g.store, Budget: turn.NewReadBudget(turn.ReadBudgetBytes, turn.ReadBudgetWait), Heartbeat: opts.Config.HeartbeatInterval})
	var err error
	if g.authz, err = access.NewAuthz(opts.Config); err != nil {
		return nil, err
	}
	// A replica's turns and sessions of its last run are other replicas'
	// business as much as its own: joining reaps them (startReplicas). A
	// gateway on its own ends and suspends them itself.
	if err := g.startReplicas(context.Background()); err != nil {
		return nil, err
	}
	if g.replicas == nil {
		if err := g.endStopped(context.Background()); err != nil {
			return nil, fmt.Errorf("ending the turns that ran when the gateway last stopped: %w", err)
		}
	}

	if g.tempDir == nil {
		g.tempDir = func(agent string) (string, error) { return os.MkdirTemp("", "acpgate-"+agent+"-") }
	}
	containment, hostProc := probeContainment(log, opts.SandboxLauncher)
	noSandbox := probeSandbox(opts.Config.Agents, log)
	// One budget for every agent: the bound is on what the gateway holds.
	budget := answer.NewBudget(opts.Config.Limits.MaxAnswerBytes)
	for _, a := range opts.Config.Agents {
		entry := &agentEntry{cfg: a, acp: acpConfig(a, opts, lookup, log), m: opts.Metrics.Agent(a.Name), mcp: mcpoffer.New(opts.Config.MCP, a)}
		entry.acp.Process.Containment = containment
		entry.acp.Process.Launcher = opts.SandboxLauncher
		entry.acp.Process.HostProc = hostProc
		if a.Sandbox.Enabled {
			entry.acp.Process.Wrap = sandboxWrap(a, opts.SandboxLauncher, noSandbox)
		}
		entry.acp.AnswerBudget = budget
		if a.ReuseProcess {
			entry.share = &sharing{max: a.MaxSessionsPerProcess}
		}
		g.agents = append(g.agents, entry)
		g.byName[a.Name] = entry
	}
	if g.replicas == nil {
		if err := g.suspendRecorded(context.Background()); err != nil {
			return nil, fmt.Errorf("reading the sessions open when the gateway last stopped: %w", err)
		}
	}
	if err := g.startNotifier(); err != nil {
		g.stopReplicas(context.Background())
		return nil, err
	}
	g.startPools()
	interval := opts.JanitorInterval
	if interval <= 0 {
		interval = time.Second
	}
	g.janitorWG.Add(1)
	go g.sweep(interval)
	return g, nil
}

// probeContainment finds, once per gateway, how agents' process trees can
// be held, and says so, with why each stronger kind was refused: an
// operator must be able to tell whether a descendant that leaves its
// process group, or a SIGKILLed gateway, can leave agent processes
// running, and whether agents see the host's processes.
func probeContainment(log *slog.Logger, launcher string) (agentproc.Containment, bool) {
	c, hostProc, refused := agentproc.ProbeContainment(launcher)
	switch {
	case !c.KernelEnforced():
		log.Warn("agent containment is the weaker process-group kind: the kernel refused the namespaces, so a descendant that calls setsid() can outlive its session, descendants can outlive a gateway killed with SIGKILL, and agents see the host's processes",
			"kind", c.String(), "refused", refused)
	case hostProc:
		log.Warn("agent containment: agents see the host's processes in /proc (the kernel refused them a /proc of their own)",
			"kind", c.String(), "own_proc", false, "refused", refused)
	case refused != nil:
		log.Info("agent containment", "kind", c.String(), "own_proc", true, "refused", refused)
	default:
		log.Info("agent containment", "kind", c.String(), "own_proc", true)
	}
	return c, hostProc
}

func acpConfig(a config.Agent, opts Options, lookup func(string) (string, bool), log *slog.Logger) acp.Config {
	var mcp []acpsdk.McpServer
	for _, m := range a.MCPServers {
		mcp = append(mcp, acp.MCPStdio(m.Name, m.Command, m.Args, m.Env))
	}
	return acp.Config{
		Agent:              a.Name,
		Process:            agentproc.Spec{Command: a.Command, Args: a.Args, Env: agentEnviron(a, opts, lookup)},
		ClientVersion:      opts.Version,
		AuthMethod:         a.AuthMethod,
		FS:                 clientreq.FSAccess{Read: a.FS.Read, Write: a.FS.Write},
		Permission:         clientreq.PermissionPolicy{Mode: a.PermissionPolicy, Timeout: a.PermissionTimeout},
		Elicitation:        clientreq.ElicitationPolicy{Mode: a.Elicitation, Timeout: a.ElicitationTimeout},
		MCPServers:         mcp,
		StrictFraming:      a.StrictFraming,
		MaxFrameBytes:      opts.Config.Limits.MaxFrameBytes,
		CancelGrace:        a.CancelGrace,
		HandshakeTimeout:   a.HandshakeTimeout,
		MaxAgentRequests:   opts.Config.Limits.MaxAgentRequests,
		MaxAgentReplyBytes: opts.Config.Limits.MaxAgentReplyBytes,
		Logger:             log,
		Tracer:             opts.tracer(),
		Propagator:         opts.Propagator,
	}
}

// ListAgents returns the configured agents.
func (g *Gateway) ListAgents(ctx context.Context, _ *acpgatev1.ListAgentsRequest) (*acpgatev1.ListAgentsResponse, error) {
	resp := &acpgatev1.ListAgentsResponse{}
	for _, a := range g.agents {
		if !g.authz.MayUse(ctx, a.cfg.Name) {
			continue
		}
		a.mu.Lock()
		caps, transports := a.caps, a.mcpTransports
		a.mu.Unlock()
		info := &acpgatev1.Agent{
			Name:              a.cfg.Name,
			Description:       a.cfg.Description,
			Capabilities:      caps,
			PermissionPolicy:  string(a.cfg.PermissionPolicy),
			ElicitationPolicy: string(a.cfg.Elicitation),
			FsRead:            a.cfg.FS.Read,
			FsWrite:           a.cfg.FS.Write,
			WarmTarget:        uint32(a.cfg.Warm),
			McpOffered:        a.mcp.Names(),
			McpTransports:     transports,
			McpUrlPrefixes:    a.mcp.Prefixes(),
		}
		if a.pool != nil {
			ready, starting := a.pool.counts()
			info.WarmReady, info.WarmStarting = uint32(ready), uint32(starting)
		}
		if a.share != nil {
			info.ReuseProcess, info.MaxSessionsPerProcess = true, uint32(a.cfg.MaxSessionsPerProcess)
			info.SharedProcesses = uint32(a.share.count())
		}
		a.startup.fill(info)
		resp.Agents = append(resp.Agents, info)
	}
	return resp, nil
}

// CreateSession starts an agent and opens a session on it, or re-opens a
// suspended one (load_session_id).
func (g *Gateway) CreateSession(ctx context.Context, req *acpgatev1.CreateSessionRequest) (*acpgatev1.Session, error) {
	var live *liveSession
	want := wantedSettings{mode: req.GetModeId(), options: req.GetConfigOptions(), strict: true}
	mcp, err := g.callerMCP(ctx, req.GetAgent(), req.GetMcpServers())
	if err != nil {
		return nil, err
	}
	susp, err := g.suspendedToLoad(ctx, req.GetAgent(), req.GetLoadSessionId())
	if err == nil && susp != nil {
		live, err = g.reopenNow(ctx, susp, want, mcp)
	} else if err == nil {
		live, err = g.open(ctx, req.GetAgent(), req.GetCwd(), req.GetLoadSessionId(), want, mcp)
	}
	if err != nil {
		return nil, statusOf(err)
	}
	return live.proto(), nil
}

// GetSession describes an open or suspended session.
func (g *Gateway) GetSession(ctx context.Context, req *acpgatev1.GetSessionRequest) (*acpgatev1.Session, error) {
	live, err := g.session(ctx, req.GetSessionId())
	if err == nil {
		return live.proto(), nil
	}
	if susp := g.suspended(ctx, req.GetSessionId()); susp != nil {
		return susp.proto(), nil
	}
	return nil, err
}

// ListSessions lists the open and suspended sessions, oldest first: of
// every replica, in a cluster.
func (g *Gateway) ListSessions(ctx context.Context, _ *acpgatev1.ListSessionsRequest) (*acpgatev1.ListSessionsResponse, error) {
	if g.replicas != nil {
		return g.listReplicaSessions(ctx)
	}
	resp := &acpgatev1.ListSessionsResponse{}
	for _, l := range g.sessions.listing() {
		if !g.authz.Sees(ctx, l.ownedBy()) {
			continue
		}
		resp.Sessions = append(resp.Sessions, l.proto())
	}
	return resp, nil
}

// CloseSession closes a session, cancelling its turn first, or forgets a
// suspended one.
func (g *Gateway) CloseSession(ctx context.Context, req *acpgatev1.CloseSessionRequest) (*acpgatev1.CloseSessionResponse, error) {
	live, err := g.session(ctx, req.GetSessionId())
	if err == nil {
		g.removeWith(live, live.end)
		return &acpgatev1.CloseSessionResponse{}, nil
	}
	susp := g.suspended(ctx, req.GetSessionId())
	if susp == nil {
		return nil, err
	}
	if !susp.claim() {
		return nil, errReopening(susp.rec.ID)
	}
	g.forget(susp)
	return &acpgatev1.CloseSessionResponse{}, nil
}

// Cancel cancels the turn running on a session. A suspended session runs
// none.
func (g *Gateway) Cancel(ctx context.Context, req *acpgatev1.CancelRequest) (*acpgatev1.CancelResponse, error) {
	live, err := g.session(ctx, req.GetSessionId())
	if err != nil {
		if g.suspended(ctx, req.GetSessionId()) != nil {
			return &acpgatev1.CancelResponse{}, nil
		}
		return nil, err
	}
	return &acpgatev1.CancelResponse{Cancelled: live.sess.Cancel("cancel requested through the Cancel call")}, nil
}

// ResolvePermission answers a pending permission request.
func (g *Gateway) ResolvePermission(ctx context.Context, req *acpgatev1.ResolvePermissionRequest) (*acpgatev1.ResolvePermissionResponse, error) {
	live, err := g.session(ctx, req.GetSessionId())
	if err != nil {
		return nil, err
	}
	switch err := live.sess.ResolvePermission(req.GetRequestId(), req.GetOptionId()); {
	case errors.Is(err, clientreq.ErrNoSuchPermission):
		return nil, withDetail(codes.FailedPrecondition, g.interp.StaleTarget(err.Error()))
	case errors.Is(err, clientreq.ErrNoSuchOption):
		return nil, status.Error(codes.InvalidArgument, err.Error())
	case err != nil:
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &acpgatev1.ResolvePermissionResponse{}, nil
}

// ResolveElicitation answers a pending elicitation request.
func (g *Gateway) ResolveElicitation(ctx context.Context, req *acpgatev1.ResolveElicitationRequest) (*acpgatev1.ResolveElicitationResponse, error) {
	live, err := g.session(ctx, req.GetSessionId())
	if err != nil {
		return nil, err
	}
	switch err := live.sess.ResolveElicitation(req.GetRequestId(), req.GetAction(), req.GetContent()); {
	case errors.Is(err, clientreq.ErrNoSuchElicitation):
		return nil, withDetail(codes.FailedPrecondition, g.interp.StaleTarget(err.Error()))
	case errors.Is(err, clientreq.ErrInvalidContent):
		return nil, status.Error(codes.InvalidArgument, err.Error())
	case err != nil:
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &acpgatev1.ResolveElicitationResponse{}, nil
}

// opening is a session admitted under the limits, with its directory,
// whose agent has not been started yet.
type opening struct {
	entry   *agentEntry
	slot    *admission.Slot
	dir     string
	rel     string       // dir relative to the workspace, for the session's record
	tempDir string       // "" when the session runs in a configured workspace
	owner   string       // the principal opening it
	warm    *warmProcess // the warm process taken for it; nil: start cold
	// loadID, when set, is the ACP session to re-open rather than a new
	// one; reopen, when set, is the suspended session being re-opened
	// (claimed), whose id and record the session takes.
	loadID string
	reopen *suspendedSession
	// want are the settings to apply once the session is open, in order:
	// a re-opened session's recorded ones, then those the caller asked for.
	want []wantedSettings
	// mcp are the caller's MCP servers (package mcpoffer); a session opened with
	// them is not recorded for re-opening.
	mcp []acpsdk.McpServer
}

// abandon gives back what prepare took, when the session is not started.
func (o *opening) abandon() {
	o.slot.Release()
	if o.warm != nil {
		o.warm.discard()
	}
	if o.tempDir != "" {
		_ = os.RemoveAll(o.tempDir)
	}
	if o.reopen != nil {
		o.reopen.unclaim()
	}
}

// agentFor is the configured agent named agent, when the caller may use
// it: NOT_FOUND or the authorization's refusal otherwise.
func (g *Gateway) agentFor(ctx context.Context, agent string) (*agentEntry, error) {
	entry, ok := g.byName[agent]
	if !ok {
		return nil, status.Error(codes.NotFound, g.unknownAgent(ctx, agent))
	}
	if err := g.authz.Use(ctx, agent); err != nil {
		return nil, err
	}
	return entry, nil
}

// unknownAgent says that no agent is named agent, suggests the nearest
// names and lists the agents the caller may use: a mistyped name is the
// usual cause, and the list is what to choose from. Both leave out the
// agents the caller's allow excludes, whose names are not the caller's to
// learn.
func (g *Gateway) unknownAgent(ctx context.Context, agent string) string {
	var usable []string
	for _, a := range g.agents {
		if g.authz.MayUse(ctx, a.cfg.Name) {
			usable = append(usable, a.cfg.Name)
		}
	}
	msg := fmt.Sprintf("no agent named %q is configured", agent)
	if near := spelling.Nearest(agent, usable); len(near) > 0 {
		quoted := make([]string, len(near))
		for i, n := range near {
			quoted[i] = strconv.Quote(n)
		}
		msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(quoted, " or "))
	}
	if len(usable) == 0 {
		return msg + "; no agent configured is one you may use"
	}
	return msg + "; the agents you may use: " + strings.Join(usable, ", ")
}

// prepare admits a session of agent and resolves its directory: every
// failure that is the caller's (a gRPC status), before anything is
// started.
func (g *Gateway) prepare(ctx context.Context, agent, cwd string) (*opening, error) {
	if agent == "" {
		return nil, status.Error(codes.InvalidArgument, "agent is required")
	}
	entry, err := g.agentFor(ctx, agent)
	if err != nil {
		return nil, err
	}
	slot, err := g.admit.ReserveSession(access.Caller(ctx).Name, agent, entry.cfg.MaxSessions)
	if err != nil {
		return nil, err
	}
	o := &opening{entry: entry, slot: slot, owner: access.Caller(ctx).Name}
	if o.warm = takeFresh(entry, cwd); o.warm != nil {
		o.dir, o.tempDir = o.warm.dir, o.warm.tempDir
		return o, nil
	}
	if o.dir, o.rel, o.tempDir, err = sessionDir(entry.cfg, cwd, g.tempDir); err != nil {
		slot.Release()
		return nil, err
	}
	if entry.pool != nil && o.tempDir == "" && !entry.share.hasRoom(o.shareKey()) {
		o.warm = entry.pool.take(o.dir)
	}
	return o, nil
}

// start starts a prepared session's agent and registers the session. An
// error is *acp.Error when the agent caused it; either way o is abandoned.
func (g *Gateway) start(ctx context.Context, o *opening, oneShot bool) (*liveSession, error) {
	entry := o.entry
	var replayed atomic.Int64
	sess, err := g.startAgent(ctx, o, acp.OpenOptions{Cwd: o.dir, LoadSessionID: o.loadID, MCPServers: o.mcp,
		// The history a session/load replays is the client's already;
		// it is not streamed to anyone.
		Replay: func(*acpgatev1.PromptEvent) { replayed.Add(1) }})
	if err != nil {
		var agentErr *acp.Error
		if errors.As(err, &agentErr) && agentErr.Info != nil {
			entry.noteCapabilities(*agentErr.Info)
		}
		o.abandon()
		return nil, err
	}
	entry.noteCapabilities(sess.Info())
	callerMode := ""
	for _, w := range o.want {
		callerMode = cmp.Or(w.mode, callerMode)
		if err := w.apply(ctx, g, sess); err != nil {
			sess.Close()
			o.abandon()
			return nil, err
		}
	}
	if err := matchApproval(ctx, g.log, entry.cfg.PermissionPolicy, callerMode, sess); err != nil {
		sess.Close()
		o.abandon()
		return nil, err
	}
	now := time.Now()
	live := &liveSession{sess: sess, agent: entry, slot: o.slot, owner: o.owner, oneShot: oneShot, tempDir: o.tempDir, created: now, lastActive: now, resumed: o.loadID != ""}
	if g.replicas != nil {
		live.replica = g.replicas.self
	}
	entry.m.SessionOpened()
	if !g.register(ctx, live, o) {
		live.close()
		if o.reopen != nil {
			o.reopen.unclaim()
		}
		return nil, status.Error(codes.Unavailable, msgShuttingDown)
	}
	attrs := []any{"agent", entry.cfg.Name, "session", live.id, "acp_session", sess.ID(), "cwd", sess.Cwd(), "pid", sess.Pid(), "one_shot", oneShot, "warm", o.warm != nil, "kept", live.rec != nil}
	if o.loadID != "" {
		attrs = append(attrs, "reopened_with", sess.Info().ReopenMethod(), "replayed_events", replayed.Load())
	}
	g.log.InfoContext(ctx, "session opened", attrs...)
	g.watchSettings(live)
	return live, nil
}

// session finds an open session the caller may see; NOT_FOUND otherwise,
// worded as for an id that does not exist.
func (g *Gateway) session(ctx context.Context, id string) (*liveSession, error) {
	live, err := g.sessions.lookup(id)
	if err != nil {
		return nil, err
	}
	if !g.authz.Sees(ctx, live.owner) {
		return nil, errNoSession(id)
	}
	return live, nil
}

// open prepares and starts a session for CreateSession. Errors are gRPC
// status errors, or *acp.Error when the agent caused the failure.
func (g *Gateway) open(ctx context.Context, agent, cwd, loadID string, want wantedSettings, mcp []acpsdk.McpServer) (*liveSession, error) {
	o, err := g.prepare(ctx, agent, cwd)
	if err != nil {
		return nil, err
	}
	o.loadID, o.want, o.mcp = loadID, append(o.want, want), mcp
	return g.start(ctx, o, false)
}

func (e *agentEntry) noteCapabilities(info acp.AgentInfo) {
	caps := &acpgatev1.AgentCapabilities{
		ProtocolVersion:       int32(info.ProtocolVersion),
		AgentName:             info.Name,
		AgentVersion:          info.Version,
		LoadSession:           info.Capabilities.LoadSession,
		PromptImage:           info.Capabilities.PromptCapabilities.Image,
		PromptAudio:           info.Capabilities.PromptCapabilities.Audio,
		PromptEmbeddedContext: info.Capabilities.PromptCapabilities.EmbeddedContext,
		AuthMethods:           info.AuthMethods,
		ObservedAt:            timestamppb.Now(),
		SessionResume:         info.Capabilities.SessionCapabilities.Resume != nil,
		SessionList:           info.Capabilities.SessionCapabilities.List != nil,
		SessionClose:          info.Capabilities.SessionCapabilities.Close != nil,
		SessionDelete:         info.DeleteSessions,
	}
	var transports []string
	if info.Capabilities.McpCapabilities.Http {
		transports = append(transports, "http")
	}
	if info.Capabilities.McpCapabilities.Sse {
		transports = append(transports, "sse")
	}
	e.mu.Lock()
	e.caps, e.mcpTransports = caps, transports
	e.mu.Unlock()
}

// remove unregisters a session and closes it: it has ended for good, and
// its record goes too, unless the gateway is stopping (then every session
// is closed, and the kept ones are re-opened after the restart).
//
// Only the call that unregisters live deletes the record: a session another
// call suspended or removed meanwhile is that call's.
func (g *Gateway) remove(live *liveSession) { g.removeWith(live, live.close) }

// removeWith is remove, stopping the session with stop.
func (g *Gateway) removeWith(live *liveSession, stop func() bool) {
	registered := g.sessions.delete(live)
	if stop() {
		g.log.Info("session closed", "agent", live.agent.cfg.Name, "session", live.id)
	}
	if rec := live.record(); registered && rec != nil && (!g.admit.IsDraining() || live.tempDir != "") {
		g.unrecord(rec.ID)
	}
}

// callerMCP checks a caller's MCP servers for agent and builds what
// session/new carries for them; nil when there are none. The caller must
// be allowed to use the agent: the offer is the agent's business only.
func (g *Gateway) callerMCP(ctx context.Context, agent string, servers []*acpgatev1.McpServer) ([]acpsdk.McpServer, error) {
	if len(servers) == 0 {
		return nil, nil
	}
	entry, err := g.agentFor(ctx, agent)
	if err != nil {
		return nil, err
	}
	return entry.mcp.Build(agent, servers)
}

// newTurnID mints a turn id: random, so that no two turns of any gateway
// run, before or after a restart, share one.
func (g *Gateway) newTurnID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "turn-" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}
