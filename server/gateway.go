// Package server is acpgate's gRPC service: acpgate.v1.AgentGateway over
// the ACP runtime (package acp) and the outcome contract.
//
// Every Prompt stream that starts a turn carries exactly one terminal event
// as its last message and ends with status OK; a non-OK status means no turn
// ran. Agents are chosen by configured name only: a client never supplies a
// command, a path or an environment.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/acpgate/acpgate/acp"
	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/config"
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
	// TempDir creates a fresh temporary working directory for a session of
	// the agent named, for agents without a workspace; a directory of the
	// system's temporary directory when nil. A gateway that may be killed
	// passes one whose leftovers the next start removes (package scratch).
	TempDir func(agent string) (string, error)
}

// Gateway implements acpgatev1.AgentGatewayServer.
type Gateway struct {
	acpgatev1.UnimplementedAgentGatewayServer

	cfg    *config.Config
	log    *slog.Logger
	agents []*agentEntry
	byName map[string]*agentEntry
	interp outcome.Interpreter

	mu       sync.Mutex
	sessions map[string]*liveSession
	order    []string // session ids, oldest first
	draining bool

	turns     sync.WaitGroup // running Prompt handlers
	turnSeq   atomic.Uint64
	janitor   chan struct{}
	janitorWG sync.WaitGroup
	tempDir   func(agent string) (string, error)
}

// agentEntry is a configured agent and what the gateway learned of it.
type agentEntry struct {
	cfg  config.Agent
	acp  acp.Config
	mu   sync.Mutex
	caps *acpgatev1.AgentCapabilities
	open int // sessions currently open
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
	g := &Gateway{
		cfg:      opts.Config,
		log:      log,
		byName:   make(map[string]*agentEntry),
		sessions: make(map[string]*liveSession),
		janitor:  make(chan struct{}),
		tempDir:  opts.TempDir,
	}
	if g.tempDir == nil {
		g.tempDir = func(agent string) (string, error) { return os.MkdirTemp("", "acpgate-"+agent+"-") }
	}
	containment := probeContainment(log)
	for _, a := range opts.Config.Agents {
		entry := &agentEntry{cfg: a, acp: acpConfig(a, opts, lookup, log)}
		entry.acp.Process.Containment = containment
		g.agents = append(g.agents, entry)
		g.byName[a.Name] = entry
	}
	interval := opts.JanitorInterval
	if interval <= 0 {
		interval = time.Second
	}
	g.janitorWG.Add(1)
	go g.sweep(interval)
	return g, nil
}

// probeContainment finds, once per gateway, how agents' process trees can
// be held, and says so: an operator must be able to tell whether a
// descendant that leaves its process group, or a SIGKILLed gateway, can
// leave agent processes running.
func probeContainment(log *slog.Logger) acp.Containment {
	c, refused := acp.ProbeContainment()
	if c.KernelEnforced() {
		log.Info("agent containment", "kind", c.String())
	} else {
		log.Warn("agent containment is the weaker process-group kind: the kernel refused a PID namespace, so a descendant that calls setsid() can outlive its session, and descendants can outlive a gateway killed with SIGKILL",
			"kind", c.String(), "refused", refused)
	}
	return c
}

func acpConfig(a config.Agent, opts Options, lookup func(string) (string, bool), log *slog.Logger) acp.Config {
	var mcp []acpsdk.McpServer
	for _, m := range a.MCPServers {
		stdio := &acpsdk.McpServerStdio{Name: m.Name, Command: m.Command, Args: m.Args, Env: []acpsdk.EnvVariable{}}
		if stdio.Args == nil {
			stdio.Args = []string{}
		}
		for k, v := range m.Env {
			stdio.Env = append(stdio.Env, acpsdk.EnvVariable{Name: k, Value: v})
		}
		mcp = append(mcp, acpsdk.McpServer{Stdio: stdio})
	}
	return acp.Config{
		Agent:         a.Name,
		Process:       acp.ProcessSpec{Command: a.Command, Args: a.Args, Env: a.Environ(lookup)},
		ClientVersion: opts.Version,
		AuthMethod:    a.AuthMethod,
		FS:            acp.FSAccess{Read: a.FS.Read, Write: a.FS.Write},
		Permission:    acp.PermissionPolicy{Mode: acp.Policy(a.PermissionPolicy), Timeout: a.PermissionTimeout},
		MCPServers:    mcp,
		StrictFraming: a.StrictFraming,
		MaxFrameBytes: opts.Config.Limits.MaxFrameBytes,
		CancelGrace:   a.CancelGrace,
		Logger:        log,
	}
}

// ListAgents returns the configured agents.
func (g *Gateway) ListAgents(context.Context, *acpgatev1.ListAgentsRequest) (*acpgatev1.ListAgentsResponse, error) {
	resp := &acpgatev1.ListAgentsResponse{}
	for _, a := range g.agents {
		a.mu.Lock()
		caps := a.caps
		a.mu.Unlock()
		resp.Agents = append(resp.Agents, &acpgatev1.Agent{
			Name:             a.cfg.Name,
			Description:      a.cfg.Description,
			Capabilities:     caps,
			PermissionPolicy: string(a.cfg.PermissionPolicy),
			FsRead:           a.cfg.FS.Read,
			FsWrite:          a.cfg.FS.Write,
		})
	}
	return resp, nil
}

// CreateSession starts an agent and opens a session on it.
func (g *Gateway) CreateSession(ctx context.Context, req *acpgatev1.CreateSessionRequest) (*acpgatev1.Session, error) {
	live, err := g.open(ctx, req.GetAgent(), req.GetCwd(), req.GetLoadSessionId(), false)
	if err != nil {
		return nil, statusOf(err)
	}
	return live.proto(), nil
}

// GetSession describes an open session.
func (g *Gateway) GetSession(_ context.Context, req *acpgatev1.GetSessionRequest) (*acpgatev1.Session, error) {
	live, err := g.lookup(req.GetSessionId())
	if err != nil {
		return nil, err
	}
	return live.proto(), nil
}

// ListSessions lists the open sessions, oldest first.
func (g *Gateway) ListSessions(context.Context, *acpgatev1.ListSessionsRequest) (*acpgatev1.ListSessionsResponse, error) {
	g.mu.Lock()
	lives := make([]*liveSession, 0, len(g.order))
	for _, id := range g.order {
		lives = append(lives, g.sessions[id])
	}
	g.mu.Unlock()
	resp := &acpgatev1.ListSessionsResponse{}
	for _, l := range lives {
		resp.Sessions = append(resp.Sessions, l.proto())
	}
	return resp, nil
}

// CloseSession closes a session, cancelling its turn first.
func (g *Gateway) CloseSession(_ context.Context, req *acpgatev1.CloseSessionRequest) (*acpgatev1.CloseSessionResponse, error) {
	live, err := g.lookup(req.GetSessionId())
	if err != nil {
		return nil, err
	}
	g.remove(live)
	return &acpgatev1.CloseSessionResponse{}, nil
}

// Cancel cancels the turn running on a session.
func (g *Gateway) Cancel(_ context.Context, req *acpgatev1.CancelRequest) (*acpgatev1.CancelResponse, error) {
	live, err := g.lookup(req.GetSessionId())
	if err != nil {
		return nil, err
	}
	return &acpgatev1.CancelResponse{Cancelled: live.sess.Cancel("cancel requested through the Cancel call")}, nil
}

// ResolvePermission answers a pending permission request.
func (g *Gateway) ResolvePermission(_ context.Context, req *acpgatev1.ResolvePermissionRequest) (*acpgatev1.ResolvePermissionResponse, error) {
	live, err := g.lookup(req.GetSessionId())
	if err != nil {
		return nil, err
	}
	switch err := live.sess.ResolvePermission(req.GetRequestId(), req.GetOptionId()); {
	case errors.Is(err, acp.ErrNoSuchPermission):
		return nil, withDetail(codes.FailedPrecondition, g.interp.StaleTarget(err.Error()))
	case errors.Is(err, acp.ErrNoSuchOption):
		return nil, status.Error(codes.InvalidArgument, err.Error())
	case err != nil:
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &acpgatev1.ResolvePermissionResponse{}, nil
}

// Prompt runs one turn and streams its events.
func (g *Gateway) Prompt(req *acpgatev1.PromptRequest, stream acpgatev1.AgentGateway_PromptServer) error {
	blocks, err := g.promptBlocks(req)
	if err != nil {
		return err
	}
	ctx := stream.Context()
	if err := g.enter(); err != nil {
		return err
	}
	defer g.turns.Done()

	turnID := fmt.Sprintf("turn-%d", g.turnSeq.Add(1))
	out := &sender{stream: stream, log: g.log, coalesce: req.GetCoalesceChunks()}
	var live *liveSession
	if req.GetSessionId() != "" {
		live, err = g.lookup(req.GetSessionId())
		if err != nil {
			return err
		}
		select {
		case <-live.sess.Done():
			// Its agent has gone; the janitor has not swept it yet.
			g.remove(live)
			return status.Errorf(codes.NotFound, "session %q has ended: its agent is gone", req.GetSessionId())
		default:
		}
		if !live.claim(turnID) {
			return status.Errorf(codes.FailedPrecondition, "session %q is already running a turn (ACP allows one at a time)", req.GetSessionId())
		}
	} else {
		live, err = g.open(ctx, req.GetAgent(), req.GetCwd(), "", true)
		if err != nil {
			var agentErr *acp.Error
			if !errors.As(err, &agentErr) {
				return statusOf(err)
			}
			// A one-shot caller handles one shape: the failure to start
			// or handshake is the turn's in-band terminal.
			out.send(started(turnID, "", req.GetAgent()))
			out.send(terminal(outcome.Result{Error: agentErr.Proto}))
			g.logTerminal(turnID, req.GetAgent(), "", agentErr.Proto, nil)
			return nil
		}
		defer g.remove(live)
		live.claim(turnID)
	}
	defer live.release()

	out.send(started(turnID, live.sess.ID(), live.agent.cfg.Name))
	opts := acp.PromptOptions{
		TurnID:   turnID,
		Timeout:  live.agent.cfg.TurnTimeout,
		Emit:     out.send,
		OmitText: req.GetOmitOutcomeText(),
	}
	if out.coalesce {
		// Only a coalescing sender holds anything back; without it the
		// reader need not stop at the turn on every drained read.
		opts.Idle = out.flush
	}
	result, err := live.sess.Prompt(ctx, blocks, opts)
	if err != nil {
		// Not a turn's ending (busy or closed underneath us), but the
		// stream has announced a turn: it still gets a terminal.
		g.log.Error("the turn could not start", "turn", turnID, "err", err)
		result = outcome.Result{Error: g.interp.StaleTarget("the session ended before the turn could start: " + err.Error())}
	}
	out.send(terminal(result))
	g.logTerminal(turnID, live.agent.cfg.Name, live.sess.ID(), result.Error, out.err)
	if result.Error != nil && result.Error.GetTransport() != nil {
		g.remove(live) // the agent is gone; so is the session
	}
	return nil
}

func started(turnID, sessionID, agent string) *acpgatev1.PromptEvent {
	return &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_Started{Started: &acpgatev1.TurnStarted{TurnId: turnID, SessionId: sessionID, Agent: agent}}}
}

func terminal(r outcome.Result) *acpgatev1.PromptEvent {
	if r.Outcome != nil {
		return &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_Outcome{Outcome: r.Outcome}}
	}
	return &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_Error{Error: r.Error}}
}

func (g *Gateway) logTerminal(turnID, agent, sessionID string, e *acpgatev1.HarnessError, sendErr error) {
	attrs := []any{"turn", turnID, "agent", agent, "session", sessionID}
	if sendErr != nil {
		attrs = append(attrs, "delivered", false, "send_err", sendErr.Error())
	}
	if e == nil {
		g.log.Info("turn completed", attrs...)
		return
	}
	g.log.Info("turn ended without completing", append(attrs, "class", outcome.Class(e), "message", e.GetMessage())...)
}

// sender numbers events and sends them. Once the client is gone it keeps
// numbering and drops events, so the turn's bookkeeping goes on without a
// consumer and the agent is never left blocked on a dead stream.
//
// With coalesce (PromptRequest.coalesce_chunks) it holds a text chunk back
// while the next event is another text chunk of the same message, and sends
// them as one when anything else comes, when the held text reaches
// maxCoalescedBytes, or when the agent has no more output buffered (flush,
// called through acp.PromptOptions.Idle): never waiting for output that has
// not arrived.
type sender struct {
	stream   acpgatev1.AgentGateway_PromptServer
	log      *slog.Logger
	seq      uint64
	err      error
	coalesce bool
	held     *acpgatev1.MessageChunk // the first chunk held back, if any
	parts    []string                // the held chunks' texts
	size     int                     // their length
}

// maxCoalescedBytes bounds the text of one coalesced chunk, far under the
// 4 MiB that gRPC clients accept by default.
const maxCoalescedBytes = 64 << 10

func (s *sender) send(e *acpgatev1.PromptEvent) {
	if s.coalesce {
		if c := e.GetAgentMessageChunk(); isTextChunk(c) {
			if s.held != nil && (c.GetMessageId() != s.held.GetMessageId() || s.size+len(c.GetText()) > maxCoalescedBytes) {
				s.flush()
			}
			if s.held == nil {
				s.held = c
			}
			s.parts = append(s.parts, c.GetText())
			s.size += len(c.GetText())
			return
		}
		s.flush()
	}
	s.write(e)
}

// flush sends the held chunks as one.
func (s *sender) flush() {
	if s.held == nil {
		return
	}
	c := s.held
	if len(s.parts) > 1 {
		text := strings.Join(s.parts, "")
		c = &acpgatev1.MessageChunk{
			MessageId: c.GetMessageId(),
			Text:      text,
			Content:   &acpgatev1.ContentBlock{Block: &acpgatev1.ContentBlock_Text{Text: text}},
		}
	}
	s.held, s.parts, s.size = nil, s.parts[:0], 0
	s.write(&acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_AgentMessageChunk{AgentMessageChunk: c}})
}

func isTextChunk(c *acpgatev1.MessageChunk) bool {
	_, ok := c.GetContent().GetBlock().(*acpgatev1.ContentBlock_Text)
	return ok
}

func (s *sender) write(e *acpgatev1.PromptEvent) {
	s.seq++
	if s.err != nil {
		return
	}
	e.Seq = s.seq
	e.Time = timestamppb.Now()
	if err := s.stream.Send(e); err != nil {
		s.err = err
		s.log.Debug("the client stopped receiving the stream", "err", err)
	}
}

// promptBlocks validates a PromptRequest and builds its ACP content.
func (g *Gateway) promptBlocks(req *acpgatev1.PromptRequest) ([]acpsdk.ContentBlock, error) {
	if (req.GetSessionId() == "") == (req.GetAgent() == "") {
		return nil, status.Error(codes.InvalidArgument, "set exactly one of session_id (a turn on an open session) and agent (a one-shot turn)")
	}
	if req.GetSessionId() != "" && req.GetCwd() != "" {
		return nil, status.Error(codes.InvalidArgument, "cwd applies to one-shot turns only; a session's working directory is fixed when it is created")
	}
	if n := proto.Size(req); n > g.cfg.Limits.MaxPromptBytes {
		return nil, status.Errorf(codes.InvalidArgument, "the prompt is %d bytes, over the gateway's limit of %d bytes", n, g.cfg.Limits.MaxPromptBytes)
	}
	var blocks []acpsdk.ContentBlock
	for i, b := range req.GetPrompt() {
		block, err := acp.ContentFromProto(b)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "prompt[%d]: %v", i, err)
		}
		blocks = append(blocks, block)
	}
	if req.GetText() != "" {
		blocks = append(blocks, acpsdk.TextBlock(req.GetText()))
	}
	if len(blocks) == 0 {
		return nil, status.Error(codes.InvalidArgument, "the prompt is empty: set prompt or text")
	}
	return blocks, nil
}

// enter admits a Prompt unless the gateway is draining.
func (g *Gateway) enter() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.draining {
		return status.Error(codes.Unavailable, "the gateway is shutting down")
	}
	g.turns.Add(1)
	return nil
}

func (g *Gateway) lookup(id string) (*liveSession, error) {
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "session_id is required")
	}
	g.mu.Lock()
	live, ok := g.sessions[id]
	g.mu.Unlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no open session %q", id)
	}
	return live, nil
}

// admit checks the session limits for one more session of entry.
func (g *Gateway) admit(entry *agentEntry) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.draining {
		return status.Error(codes.Unavailable, "the gateway is shutting down")
	}
	if len(g.sessions) >= g.cfg.Limits.MaxSessions {
		return status.Errorf(codes.ResourceExhausted, "the gateway is at its limit of %d open sessions", g.cfg.Limits.MaxSessions)
	}
	entry.mu.Lock()
	defer entry.mu.Unlock()
	if max := entry.cfg.MaxSessions; max > 0 && entry.open >= max {
		return status.Errorf(codes.ResourceExhausted, "agent %q is at its limit of %d open sessions", entry.cfg.Name, max)
	}
	return nil
}

// open starts an agent session and registers it. Errors are gRPC status
// errors, or *acp.Error when the agent caused the failure.
func (g *Gateway) open(ctx context.Context, agent, cwd, loadID string, oneShot bool) (*liveSession, error) {
	entry, ok := g.byName[agent]
	if agent == "" {
		return nil, status.Error(codes.InvalidArgument, "agent is required")
	}
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no agent named %q is configured", agent)
	}
	if err := g.admit(entry); err != nil {
		return nil, err
	}
	// Reserve the slot before the (slow) start, so concurrent opens
	// cannot overshoot the limits.
	entry.mu.Lock()
	entry.open++
	entry.mu.Unlock()
	release := func() {
		entry.mu.Lock()
		entry.open--
		entry.mu.Unlock()
	}
	dir, tempDir, err := sessionDir(entry.cfg, cwd, g.tempDir)
	if err != nil {
		release()
		return nil, err
	}
	sess, err := acp.Open(ctx, entry.acp, acp.OpenOptions{Cwd: dir, LoadSessionID: loadID})
	if err != nil {
		var agentErr *acp.Error
		if errors.As(err, &agentErr) && agentErr.Info != nil {
			entry.noteCapabilities(*agentErr.Info)
		}
		release()
		if tempDir != "" {
			_ = os.RemoveAll(tempDir)
		}
		return nil, err
	}
	entry.noteCapabilities(sess.Info())
	now := time.Now()
	live := &liveSession{sess: sess, agent: entry, oneShot: oneShot, tempDir: tempDir, created: now, lastActive: now}
	g.mu.Lock()
	_, clash := g.sessions[sess.ID()]
	if !clash && !g.draining {
		g.sessions[sess.ID()] = live
		g.order = append(g.order, sess.ID())
	}
	draining := g.draining
	g.mu.Unlock()
	if clash || draining {
		live.close()
		release()
		if draining {
			return nil, status.Error(codes.Unavailable, "the gateway is shutting down")
		}
		return nil, status.Errorf(codes.AlreadyExists, "agent %q minted session id %q, which is already open", agent, sess.ID())
	}
	g.log.Info("session opened", "agent", agent, "session", sess.ID(), "cwd", sess.Cwd(), "pid", sess.Pid(), "one_shot", oneShot)
	return live, nil
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
	}
	e.mu.Lock()
	e.caps = caps
	e.mu.Unlock()
}

// remove unregisters a session and closes it.
func (g *Gateway) remove(live *liveSession) {
	id := live.sess.ID()
	g.mu.Lock()
	if g.sessions[id] == live {
		delete(g.sessions, id)
		for i, x := range g.order {
			if x == id {
				g.order = append(g.order[:i], g.order[i+1:]...)
				break
			}
		}
	}
	g.mu.Unlock()
	if live.close() {
		live.agent.mu.Lock()
		live.agent.open--
		live.agent.mu.Unlock()
		g.log.Info("session closed", "agent", live.agent.cfg.Name, "session", id)
	}
}

// sessionDir resolves a session's working directory. With a configured
// workspace, cwd is relative to it and must stay inside it; without one the
// session gets a fresh temporary directory from newTemp, removed when it
// closes.
func sessionDir(a config.Agent, cwd string, newTemp func(agent string) (string, error)) (dir, tempDir string, err error) {
	if strings.ContainsRune(cwd, 0) {
		return "", "", status.Error(codes.InvalidArgument, "cwd contains a NUL byte")
	}
	if filepath.IsAbs(cwd) {
		return "", "", status.Errorf(codes.InvalidArgument, "cwd %q must be relative to the agent's workspace", cwd)
	}
	root := a.Workspace
	if root == "" {
		if root, err = newTemp(a.Name); err != nil {
			return "", "", status.Errorf(codes.Internal, "creating a session directory: %v", err)
		}
		tempDir = root
	}
	fail := func(err error) (string, string, error) {
		if tempDir != "" {
			_ = os.RemoveAll(tempDir)
		}
		return "", "", err
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return fail(status.Errorf(codes.FailedPrecondition, "agent %q's workspace is unusable: %v", a.Name, err))
	}
	target, err := filepath.EvalSymlinks(filepath.Join(realRoot, cwd))
	if err != nil {
		return fail(status.Errorf(codes.InvalidArgument, "cwd %q does not exist in the agent's workspace", cwd))
	}
	rel, err := filepath.Rel(realRoot, target)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fail(status.Errorf(codes.InvalidArgument, "cwd %q leaves the agent's workspace", cwd))
	}
	if info, err := os.Stat(target); err != nil || !info.IsDir() {
		return fail(status.Errorf(codes.InvalidArgument, "cwd %q is not a directory", cwd))
	}
	return target, tempDir, nil
}

// statusOf turns an open failure into a gRPC status: an agent-caused
// failure carries its HarnessError as a status detail.
func statusOf(err error) error {
	var agentErr *acp.Error
	if !errors.As(err, &agentErr) {
		if _, ok := status.FromError(err); ok {
			return err
		}
		if errors.Is(err, context.Canceled) {
			return status.Error(codes.Canceled, err.Error())
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return status.Error(codes.DeadlineExceeded, err.Error())
		}
		return status.Error(codes.Internal, err.Error())
	}
	code := codes.FailedPrecondition
	if agentErr.Proto.GetTransport() != nil {
		code = codes.Unavailable
	}
	return withDetail(code, agentErr.Proto)
}

func withDetail(code codes.Code, e *acpgatev1.HarnessError) error {
	st, err := status.New(code, e.GetMessage()).WithDetails(e)
	if err != nil {
		return status.Error(code, e.GetMessage())
	}
	return st.Err()
}

// sweep closes sessions that have been idle past their agent's idle
// timeout and sessions whose agent has gone away.
func (g *Gateway) sweep(interval time.Duration) {
	defer g.janitorWG.Done()
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-g.janitor:
			return
		case <-ticker.C:
		}
		g.mu.Lock()
		var stale []*liveSession
		for _, live := range g.sessions {
			since, idle := live.idleSince()
			select {
			case <-live.sess.Done():
				if idle {
					stale = append(stale, live)
				}
				continue
			default:
			}
			if idle && !live.oneShot && live.agent.cfg.IdleTimeout > 0 && time.Since(since) > live.agent.cfg.IdleTimeout {
				stale = append(stale, live)
			}
		}
		g.mu.Unlock()
		for _, live := range stale {
			g.log.Info("closing an idle or ended session", "session", live.sess.ID())
			g.remove(live)
		}
	}
}

// Drain begins shutdown: new calls are refused, running turns are
// cancelled through session/cancel, and Drain waits (until ctx ends) for
// every running Prompt to deliver its terminal. Then it closes every
// session, stopping the agents.
func (g *Gateway) Drain(ctx context.Context) {
	g.mu.Lock()
	g.draining = true
	lives := make([]*liveSession, 0, len(g.sessions))
	for _, l := range g.sessions {
		lives = append(lives, l)
	}
	g.mu.Unlock()
	for _, l := range lives {
		l.sess.Cancel("the gateway is shutting down")
	}
	done := make(chan struct{})
	go func() {
		g.turns.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		g.log.Warn("shutdown grace elapsed with turns still running; stopping their agents")
	}
	g.closeAll()
	// Stopping the agents ends every remaining turn; a stream still blocked
	// on a client that stopped reading is ended by the server's hard stop.
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
}

// Close stops the janitor and closes every session.
func (g *Gateway) Close() {
	select {
	case <-g.janitor:
	default:
		close(g.janitor)
	}
	g.janitorWG.Wait()
	g.closeAll()
}

func (g *Gateway) closeAll() {
	g.mu.Lock()
	lives := make([]*liveSession, 0, len(g.sessions))
	for _, l := range g.sessions {
		lives = append(lives, l)
	}
	g.mu.Unlock()
	var wg sync.WaitGroup
	for _, l := range lives {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.remove(l)
		}()
	}
	wg.Wait()
}
