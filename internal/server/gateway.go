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
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/access"
	"github.com/acpgate/acpgate/internal/acp/clientreq"
	"github.com/acpgate/acpgate/internal/admission"
	"github.com/acpgate/acpgate/internal/cluster"
	"github.com/acpgate/acpgate/internal/config"
	"github.com/acpgate/acpgate/internal/metrics"
	"github.com/acpgate/acpgate/internal/notify"
	"github.com/acpgate/acpgate/internal/sessions"
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

// unimplemented answers UNIMPLEMENTED for an RPC a newer contract adds
// before the gateway serves it. It is embedded at one remove, so that the
// RPCs an embedded part serves (turnReads) take precedence over its
// defaults: at the same depth, the two would be ambiguous.
type unimplemented struct {
	acpgatev1.UnimplementedAgentGatewayServer
}

// Gateway implements acpgatev1.AgentGatewayServer.
type Gateway struct {
	unimplemented

	cfg    *config.Config
	log    *slog.Logger
	interp outcome.Interpreter

	sessions *sessions.Manager     // the agents, the sessions, the warm pools
	starters starters              // start the agents below the gateway's priority; closed after sessions
	admit    *admission.Controller // the sessions', the warm processes' and the turns'
	// turnReads serves the RPCs that read turns, and holds the store,
	// the authorization, the running turns and their readers, which the
	// rest of the gateway uses too.
	turnReads
	commits  *turn.Committer  // writes the running turns' journals behind them
	replicas *cluster.Replica // nil for a gateway on its own
	notifier *notify.Notifier // nil without webhooks (notify.go)

	metrics   *metrics.Metrics // nil: none
	tracer    trace.Tracer     // records nothing without a TracerProvider
	traceOpts Options          // TracerProvider and Propagator, for the gRPC server
	janitor   chan struct{}
	janitorWG sync.WaitGroup
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
		cfg:   opts.Config,
		log:   log,
		admit: admission.New(opts.Config.Limits.MaxSessions, opts.Config.Limits.MaxWarm, opts.Config.Quotas),
		turnReads: turnReads{
			store:    opts.Store,
			turns:    &turn.Table{},
			watchers: turn.NewWatchLimits(opts.Config.Limits.MaxWatchersPerTurn, opts.Config.Limits.MaxWatchersPerPrincipal),
		},
		janitor:   make(chan struct{}),
		metrics:   opts.Metrics,
		tracer:    opts.tracer(),
		traceOpts: Options{TracerProvider: opts.TracerProvider, Propagator: opts.Propagator},
	}
	if g.store == nil {
		g.store = memory.New()
	}
	g.commits = turn.NewCommitter(g.store)
	g.reader = turn.NewReader(turn.ReaderOptions{Turns: g.turns, Store: g.store, Budget: turn.NewReadBudget(turn.ReadBudgetBytes, turn.ReadBudgetWait), Heartbeat: opts.Config.HeartbeatInterval})
	var err error
	if g.authz, err = access.NewAuthz(opts.Config); err != nil {
		return nil, err
	}
	self, err := cluster.ReplicaID(opts.Config.Cluster)
	if err != nil {
		return nil, err
	}
	// The sessions exist before the gateway joins the cluster: its lease
	// reads how many are open.
	starts, starters := agentStarts(opts, lookup, log)
	g.starters = starters
	g.sessions = sessions.New(sessions.Options{
		Config:      opts.Config,
		Logger:      log,
		Store:       g.store,
		TempDir:     opts.TempDir,
		Metrics:     opts.Metrics,
		Authz:       g.authz,
		Admission:   g.admit,
		StartConfig: starts,
		Replica:     self,
	})
	// A replica's turns and sessions of its last run are other replicas'
	// business as much as its own: joining reaps them (startReplicas). A
	// gateway on its own ends and suspends them itself.
	if err := g.join(self); err != nil {
		// No agent has started yet (the pools start below).
		g.starters.close()
		return nil, err
	}
	g.sessions.StartPools()
	interval := opts.JanitorInterval
	if interval <= 0 {
		interval = time.Second
	}
	g.janitorWG.Add(1)
	go g.sweep(interval)
	return g, nil
}

// join takes the gateway's part of what its last run left, in the cluster
// or on its own, and starts its notifier.
func (g *Gateway) join(self string) error {
	if err := g.startReplicas(context.Background(), self); err != nil {
		return err
	}
	if g.replicas == nil {
		if err := g.endStopped(context.Background()); err != nil {
			return fmt.Errorf("ending the turns that ran when the gateway last stopped: %w", err)
		}
		if err := g.sessions.SuspendRecorded(context.Background()); err != nil {
			return fmt.Errorf("reading the sessions open when the gateway last stopped: %w", err)
		}
	}
	if err := g.startNotifier(); err != nil {
		if g.replicas != nil {
			g.replicas.Stop(context.Background())
		}
		return err
	}
	return nil
}

// ListAgents returns the configured agents.
func (g *Gateway) ListAgents(ctx context.Context, _ *acpgatev1.ListAgentsRequest) (*acpgatev1.ListAgentsResponse, error) {
	return &acpgatev1.ListAgentsResponse{Agents: g.sessions.Agents(ctx)}, nil
}

// CreateSession starts an agent and opens a session on it, or re-opens a
// suspended one (load_session_id).
func (g *Gateway) CreateSession(ctx context.Context, req *acpgatev1.CreateSessionRequest) (*acpgatev1.Session, error) {
	live, err := g.sessions.Create(ctx, req)
	if err != nil {
		return nil, sessions.StatusOf(err)
	}
	return live.Proto(), nil
}

// GetSession describes an open or suspended session.
func (g *Gateway) GetSession(ctx context.Context, req *acpgatev1.GetSessionRequest) (*acpgatev1.Session, error) {
	live, err := g.sessions.Lookup(ctx, req.GetSessionId())
	if err == nil {
		return live.Proto(), nil
	}
	if susp := g.sessions.Suspended(ctx, req.GetSessionId()); susp != nil {
		return susp.Proto(), nil
	}
	return nil, err
}

// ListSessions lists the open and suspended sessions, oldest first: of
// every replica, in a cluster.
func (g *Gateway) ListSessions(ctx context.Context, _ *acpgatev1.ListSessionsRequest) (*acpgatev1.ListSessionsResponse, error) {
	if g.replicas != nil {
		return g.listReplicaSessions(ctx)
	}
	return &acpgatev1.ListSessionsResponse{Sessions: g.sessions.List(ctx)}, nil
}

// CloseSession closes a session, cancelling its turn first, or forgets a
// suspended one.
func (g *Gateway) CloseSession(ctx context.Context, req *acpgatev1.CloseSessionRequest) (*acpgatev1.CloseSessionResponse, error) {
	if err := g.sessions.CloseSession(ctx, req.GetSessionId()); err != nil {
		return nil, err
	}
	return &acpgatev1.CloseSessionResponse{}, nil
}

// Cancel cancels the turn running on a session. A suspended session runs
// none.
func (g *Gateway) Cancel(ctx context.Context, req *acpgatev1.CancelRequest) (*acpgatev1.CancelResponse, error) {
	live, err := g.sessions.Lookup(ctx, req.GetSessionId())
	if err != nil {
		if g.sessions.Suspended(ctx, req.GetSessionId()) != nil {
			return &acpgatev1.CancelResponse{}, nil
		}
		return nil, err
	}
	return &acpgatev1.CancelResponse{Cancelled: live.ACP().Cancel("cancel requested through the Cancel call")}, nil
}

// ResolvePermission answers a pending permission request.
func (g *Gateway) ResolvePermission(ctx context.Context, req *acpgatev1.ResolvePermissionRequest) (*acpgatev1.ResolvePermissionResponse, error) {
	live, err := g.sessions.Lookup(ctx, req.GetSessionId())
	if err != nil {
		return nil, err
	}
	switch err := live.ACP().ResolvePermission(req.GetRequestId(), req.GetOptionId()); {
	case errors.Is(err, clientreq.ErrNoSuchPermission):
		return nil, sessions.WithDetail(codes.FailedPrecondition, g.interp.StaleTarget(err.Error()))
	case errors.Is(err, clientreq.ErrNoSuchOption):
		return nil, status.Error(codes.InvalidArgument, err.Error())
	case err != nil:
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &acpgatev1.ResolvePermissionResponse{}, nil
}

// ResolveElicitation answers a pending elicitation request.
func (g *Gateway) ResolveElicitation(ctx context.Context, req *acpgatev1.ResolveElicitationRequest) (*acpgatev1.ResolveElicitationResponse, error) {
	live, err := g.sessions.Lookup(ctx, req.GetSessionId())
	if err != nil {
		return nil, err
	}
	switch err := live.ACP().ResolveElicitation(req.GetRequestId(), req.GetAction(), req.GetContent()); {
	case errors.Is(err, clientreq.ErrNoSuchElicitation):
		return nil, sessions.WithDetail(codes.FailedPrecondition, g.interp.StaleTarget(err.Error()))
	case errors.Is(err, clientreq.ErrInvalidContent):
		return nil, status.Error(codes.InvalidArgument, err.Error())
	case err != nil:
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &acpgatev1.ResolveElicitationResponse{}, nil
}

// newTurnID mints a turn id: random, so that no two turns of any gateway
// run, before or after a restart, share one.
func (g *Gateway) newTurnID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "turn-" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}
