package server

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/access"
)

// ServiceName is the gRPC service's full name, as health checks name it.
const ServiceName = access.ServiceName

// Keepalive enforcement: clients may ping at most every 10 s, also without
// an active stream; the server pings an idle connection after 1 min and
// drops it when the ping goes unanswered for 20 s, so a vanished client's
// turn is cancelled rather than left running.
var (
	keepaliveEnforcement = keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}
	keepaliveParams      = keepalive.ServerParameters{Time: time.Minute, Timeout: 20 * time.Second}
)

// GRPCServer is the gRPC server around a Gateway, with the standard health
// service and server reflection.
type GRPCServer struct {
	*grpc.Server
	Health *health.Server
}

// NewGRPCServer builds the gRPC server for g: panic recovery, structured
// request logging, request validation, keepalive enforcement, message size
// limits, health (SERVING) and reflection.
//
// Receive limit: the largest prompt the gateway accepts plus
// recvMarginBytes, so that a prompt somewhat over the limit is read and
// measured (INVALID_ARGUMENT naming its size and the limit) rather than
// refused by gRPC; a request over even that is refused by gRPC and still
// refused by gRPC. A request that does not decode (invalid UTF-8 in a
// string field) is INVALID_ARGUMENT, not INTERNAL (see requestCodec). Send limit: unbounded,
// since a completed turn's outcome carries the whole answer; a client
// receiving a very large outcome may need to raise its own receive limit
// (grpc's default is 4 MiB).
//
// Concurrent streams per connection: limits.max_streams_per_connection, so
// one client connection cannot open calls without bound. Request headers:
// limits.max_header_bytes, advertised to clients (SETTINGS_MAX_HEADER_LIST_SIZE)
// and enforced on those that ignore it (the stream is reset before any
// handler sees it); gRPC's default let one connection's calls hold 16 MiB
// of metadata each for as long as they ran.
//
// Request message: request_read_timeout from the call's headers (see
// requestReadBound).
//
// sec, when not nil, adds TLS and caller authentication (see Security).
func NewGRPCServer(g *Gateway, sec *access.Security) *GRPCServer {
	log := g.log
	recover := recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
		log.Error("a handler panicked", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		return status.Error(codes.Internal, "internal error")
	})
	logger := logging.LoggerFunc(func(ctx context.Context, level logging.Level, msg string, fields ...any) {
		log.Log(ctx, slog.Level(level), msg, fields...)
	})
	logOpts := []logging.Option{logging.WithLogOnEvents(logging.FinishCall)}
	if g.cfg.Audit.Enabled {
		// The audit record is the call's one line at INFO (principal,
		// RPC, code, class, duration); the call's own line would repeat
		// it, so it goes to DEBUG.
		logOpts = append(logOpts, logging.WithLevels(func(codes.Code) logging.Level { return logging.LevelDebug }))
	}
	codec := newRequestCodec()
	read := &requestReadBound{timeout: g.cfg.RequestReadTimeout, log: log}
	unary := []grpc.UnaryServerInterceptor{read.unary, logging.UnaryServerInterceptor(logger, logOpts...)}
	stream := []grpc.StreamServerInterceptor{read.stream, logging.StreamServerInterceptor(logger, logOpts...)}
	// The audit record is written outside recovery, so a panic is audited
	// as the INTERNAL the caller got, and outside authentication, so a
	// refused caller is audited too.
	var audit *access.Auditor
	if g.cfg.Audit.Enabled {
		audit = access.NewAuditor(log, g.cfg.Audit.IncludeText)
		unary, stream = append(unary, audit.Unary), append(stream, audit.Stream)
	}
	unary = append(unary, recovery.UnaryServerInterceptor(recover))
	stream = append(stream, recovery.StreamServerInterceptor(recover))
	// Authentication comes before anything looks at the request, so an
	// unauthenticated caller learns nothing from validation messages.
	authUnary, authStream := sec.Interceptors()
	if g.replicas != nil {
		authUnary, authStream = g.replicas.PeerAuth(authUnary, authStream)
	}
	if authUnary != nil {
		unary, stream = append(unary, authUnary), append(stream, authStream)
	}
	if audit != nil {
		unary, stream = append(unary, audit.NoteUnary), append(stream, audit.NoteStream)
	}
	var ex func(context.Context) prometheus.Labels
	if g.traceOpts.TracerProvider != nil {
		ex = exemplar
	}
	unary, stream = g.metrics.Interceptors(unary, stream, ex)
	unary, stream = append(unary, codec.checkUnary, validateUnary), append(stream, codec.checkStream)
	if g.replicas != nil {
		// Last, after the request is checked: a call is served here or
		// relayed to the replica it belongs to.
		unary, stream = append(unary, g.replicas.ForwardUnary), append(stream, g.replicas.ForwardStream)
	}
	opts := append(sec.ServerOptions(),
		grpc.ForceServerCodecV2(codec),
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
		grpc.KeepaliveEnforcementPolicy(keepaliveEnforcement),
		grpc.KeepaliveParams(keepaliveParams),
		grpc.MaxRecvMsgSize(g.cfg.Limits.MaxPromptBytes+recvMarginBytes),
		grpc.MaxSendMsgSize(math.MaxInt32),
		grpc.MaxConcurrentStreams(uint32(g.cfg.Limits.MaxStreamsPerConnection)),
		grpc.MaxHeaderListSize(uint32(g.cfg.Limits.MaxHeaderBytes)),
		grpc.InTapHandle(read.tap),
	)
	if tp := g.traceOpts.TracerProvider; tp != nil {
		// A stats handler, not an interceptor: it sees every call, also
		// those refused before the interceptors run, and its span is in
		// the context every interceptor (the exemplars', the logs') sees.
		// Message events are off: a Prompt stream sends a message per
		// chunk, and a span event per chunk would cost what a span does.
		opts = append(opts, grpc.StatsHandler(otelgrpc.NewServerHandler(
			otelgrpc.WithTracerProvider(tp),
			otelgrpc.WithPropagators(g.traceOpts.Propagator),
			otelgrpc.WithMeterProvider(metricnoop.NewMeterProvider()),
		)))
	}
	s := grpc.NewServer(opts...)
	acpgatev1.RegisterAgentGatewayServer(s, g)
	h := health.NewServer()
	h.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	h.SetServingStatus(ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(s, h)
	if g.replicas != nil {
		g.replicas.WatchHealth(h)
	}
	reflection.Register(s)
	g.metrics.InitializeGRPC(s)
	return &GRPCServer{Server: s, Health: h}
}

// recvMarginBytes is how far over limits.max_prompt_bytes a request is
// still read, to be measured and refused with its size. Beyond it gRPC
// refuses the request itself (RESOURCE_EXHAUSTED) before anything of the
// gateway's sees it: reading an arbitrarily large request just to word the
// refusal would let any client make the gateway buffer without bound.
const recvMarginBytes = 4 << 20

// validateUnary rejects malformed unary requests before they reach a
// handler, so every handler can assume its required fields are present.
// (Prompt, the one streaming call, validates its request itself: its rules
// depend on the gateway's limits.)
func validateUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := validate(req); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return handler(ctx, req)
}

func validate(req any) error {
	switch r := req.(type) {
	case *acpgatev1.CreateSessionRequest:
		if r.GetAgent() == "" {
			return fmt.Errorf("agent is required")
		}
	case *acpgatev1.ListAgentSessionsRequest:
		if r.GetAgent() == "" {
			return fmt.Errorf("agent is required")
		}
	case *acpgatev1.DeleteAgentSessionRequest:
		if r.GetAgent() == "" || r.GetAcpSessionId() == "" {
			return fmt.Errorf("agent and acp_session_id are required")
		}
	case *acpgatev1.GetSessionRequest:
		return requireSession(r.GetSessionId())
	case *acpgatev1.CloseSessionRequest:
		return requireSession(r.GetSessionId())
	case *acpgatev1.CancelRequest:
		return requireSession(r.GetSessionId())
	case *acpgatev1.ResolvePermissionRequest:
		return requireSessionAndRequest(r.GetSessionId(), r.GetRequestId())
	case *acpgatev1.ResolveElicitationRequest:
		if err := requireSessionAndRequest(r.GetSessionId(), r.GetRequestId()); err != nil {
			return err
		}
		if r.GetAction() == acpgatev1.ElicitationAction_ELICITATION_ACTION_UNSPECIFIED {
			return fmt.Errorf("action is required: accept, decline or cancel")
		}
	case *acpgatev1.SetSessionModeRequest:
		if err := requireSession(r.GetSessionId()); err != nil {
			return err
		}
		if r.GetModeId() == "" {
			return fmt.Errorf("mode_id is required")
		}
	case *acpgatev1.SetSessionConfigOptionRequest:
		if err := requireSession(r.GetSessionId()); err != nil {
			return err
		}
		if r.GetOptionId() == "" || r.GetValue() == "" {
			return fmt.Errorf("option_id and value are required")
		}
	}
	return nil
}

// requireSessionAndRequest checks the two ids that name an agent's pending
// request.
func requireSessionAndRequest(session, request string) error {
	if err := requireSession(session); err != nil {
		return err
	}
	if request == "" {
		return fmt.Errorf("request_id is required")
	}
	return nil
}

func requireSession(id string) error {
	if id == "" {
		return fmt.Errorf("session_id is required")
	}
	return nil
}

// Shutdown drains the service: health goes NOT_SERVING, new calls are
// refused, running turns are cancelled and get their terminal, agents are
// stopped (killed once ctx ends), and the server stops — hard, closing
// every connection, once ctx ends. It returns shortly after ctx's deadline
// at the latest, whatever clients do.
func (s *GRPCServer) Shutdown(ctx context.Context, g *Gateway) {
	s.Health.Shutdown() // every service NOT_SERVING
	g.Drain(ctx)
	stopWithin(ctx, s.Server)
	g.Close()
}

// stopWithin stops s gracefully, letting calls in progress finish, until
// ctx ends, then hard, closing every connection: it returns shortly after
// ctx's deadline at the latest, whatever clients do.
func stopWithin(ctx context.Context, s *grpc.Server) {
	stopped := make(chan struct{})
	go func() {
		s.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-ctx.Done():
		s.Stop()
		<-stopped
	}
}
