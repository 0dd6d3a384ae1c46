package cluster

import (
	"context"
	"errors"
	"io"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/access"
	"github.com/acpgate/acpgate/internal/admission"
	"github.com/acpgate/acpgate/internal/auth"
	"github.com/acpgate/acpgate/internal/store"
	"github.com/acpgate/acpgate/internal/turn/wire"
)

// Forwarding: a call that needs a session's agent process is served by the
// replica that runs it, whichever replica the client reached. The replica
// reached relays the call and its answer (a stream message by message, as
// the owner encoded it), so the client never needs affinity and never sees
// a redirect. A forwarded call is served where it lands or not at all:
// it is never forwarded again, so two replicas that disagree for a moment
// about an owner cannot bounce a call between them.

const promptMethod = "/" + access.ServiceName + "/Prompt"

// sessionMethods are the calls about one session (its session_id) that
// need the session's agent, or its live state: they run on its owner.
// placedMethods open a session on whichever replica has room: here, or,
// when this replica is at its session limit, on another. Both come from
// the declaration of every RPC (access.Rules).
var (
	sessionMethods = access.MethodsRouted(access.RouteSessionOwner)
	placedMethods  = access.MethodsRouted(access.RoutePlaced)
)

// PeerAuth wraps the authentication interceptors: a call carrying the
// cluster secret speaks for the caller the forwarding replica
// authenticated, and is marked forwarded; any other call is authenticated
// as usual (authUnary/authStream; nil when the gateway authenticates no
// one). A call with a wrong secret is UNAUTHENTICATED.
func (r *Replica) PeerAuth(authUnary grpc.UnaryServerInterceptor, authStream grpc.StreamServerInterceptor) (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, forwarded, err := r.incoming(ctx)
		if err != nil {
			return nil, err
		}
		if forwarded || authUnary == nil {
			return handler(ctx, req)
		}
		return authUnary(ctx, req, info, handler)
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, forwarded, err := r.incoming(ss.Context())
		if err != nil {
			return err
		}
		ss = withContext(ss, ctx)
		if forwarded || authStream == nil {
			return handler(srv, ss)
		}
		return authStream(srv, ss, info, handler)
	}
	return unary, stream
}

// incoming checks a call's claim to be forwarded.
func (r *Replica) incoming(ctx context.Context) (context.Context, bool, error) {
	p, ok, forwarded, err := r.secret.Incoming(ctx)
	if err != nil {
		return ctx, false, status.Error(codes.Unauthenticated, err.Error())
	}
	if !forwarded {
		return ctx, false, nil
	}
	ctx = MarkForwarded(ctx)
	if ok {
		ctx = auth.NewContext(ctx, p)
	}
	return ctx, true, nil
}

// ForwardUnary serves a unary call here or on the replica it belongs to.
func (r *Replica) ForwardUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if Forwarded(ctx) {
		return handler(ctx, req)
	}
	switch {
	case sessionMethods[info.FullMethod]:
		addr, err := r.ownerOf(ctx, req.(interface{ GetSessionId() string }).GetSessionId())
		if err != nil {
			return nil, err
		}
		if addr != "" {
			return r.unary(ctx, addr, info.FullMethod, req)
		}
	case placedMethods[info.FullMethod]:
		resp, err := handler(ctx, req)
		if !admission.AtSessionLimit(err) {
			return resp, err
		}
		var out any
		placed := r.placeElsewhere(ctx, func(addr string) error {
			var err error
			out, err = r.unary(ctx, addr, info.FullMethod, req)
			return err
		})
		if placed != nil {
			return nil, placed
		}
		return out, nil
	}
	return handler(ctx, req)
}

// ForwardStream serves a Prompt here or on the replica it belongs to: a
// turn on a session runs on the session's owner; a one-shot turn runs
// here, or, when this replica is at its session limit, on another.
func (r *Replica) ForwardStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx := ss.Context()
	if Forwarded(ctx) || info.FullMethod != promptMethod {
		return handler(srv, ss)
	}
	req := &acpgatev1.PromptRequest{}
	if err := ss.RecvMsg(req); err != nil {
		return err
	}
	if id := req.GetSessionId(); id != "" {
		addr, err := r.ownerOf(ctx, id)
		if err != nil {
			return err
		}
		if addr != "" {
			return r.relay(ctx, ss, addr, req)
		}
		return handler(srv, &prereadStream{ServerStream: ss, first: req})
	}
	counted := &prereadStream{ServerStream: ss, first: req}
	err := handler(srv, counted)
	if !admission.AtSessionLimit(err) || counted.sent {
		return err
	}
	return r.placeElsewhere(ctx, func(addr string) error { return r.relay(ctx, ss, addr, req) })
}

// ownerOf is the address of the replica a call about session id must run
// on: "" for this one (it holds the session, or nobody does and it has
// adopted it, or there is no such session and the local answer is
// NOT_FOUND).
func (r *Replica) ownerOf(ctx context.Context, id string) (string, error) {
	for range 2 {
		if r.o.Local.Holds(id) {
			return "", nil
		}
		rec, ok, err := r.sessionRecord(ctx, id)
		if err != nil || !ok {
			return "", err
		}
		if rec.Replica != "" && rec.Replica != r.o.ID {
			peers, err := r.Live(ctx)
			if err != nil {
				return "", err
			}
			if i := slices.IndexFunc(peers, func(p store.Replica) bool { return p.ID == rec.Replica }); i >= 0 {
				return peers[i].Address, nil
			}
		}
		// Nobody live runs it: it is suspended, and this replica takes it.
		adopted, err := r.adopt(ctx, id)
		if err != nil || adopted {
			return "", err
		}
		// Another replica took it meanwhile: look again, once.
	}
	return "", status.Errorf(codes.Unavailable, "session %q is changing hands between replicas; retry", id)
}

// sessionRecord reads the record of session id from the store.
func (r *Replica) sessionRecord(ctx context.Context, id string) (store.Session, bool, error) {
	rec, err := r.o.Store.Session(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Session{}, false, nil
	}
	if err != nil {
		return store.Session{}, false, status.Errorf(codes.Unavailable, "reading the record of session %q: %v", id, err)
	}
	return rec, true, nil
}

// adopt claims a session no live replica runs and registers it here as
// suspended, to be re-opened by the call that needs it. A session that
// cannot be re-opened here (its agent is not configured with a workspace)
// has ended: its record goes. It reports false when another replica
// claimed it first.
func (r *Replica) adopt(ctx context.Context, id string) (bool, error) {
	rec, claimed, err := r.st.ClaimSession(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return true, nil // gone meanwhile: the local answer is NOT_FOUND
	case err != nil:
		return false, status.Errorf(codes.Unavailable, "claiming session %q: %v", id, err)
	case !claimed:
		return false, nil
	}
	if err := r.o.Local.Adopt(ctx, rec); err != nil {
		return false, err
	}
	return true, nil
}

// placeElsewhere runs call on the other live replicas with room for a
// session, the most room first, until one takes it; RESOURCE_EXHAUSTED
// when every replica is full.
func (r *Replica) placeElsewhere(ctx context.Context, call func(addr string) error) error {
	peers, err := r.Live(ctx)
	if err != nil {
		return err
	}
	slices.SortStableFunc(peers, func(a, b store.Replica) int { return headroom(b) - headroom(a) })
	for _, p := range peers {
		if headroom(p) <= 0 {
			continue
		}
		err := call(p.Address)
		if !admission.AtSessionLimit(err) {
			return err
		}
	}
	return status.Errorf(codes.ResourceExhausted, "every replica is at its session limit")
}

// headroom is how many more sessions a replica takes, as its lease last
// said.
func headroom(r store.Replica) int {
	if r.MaxSessions <= 0 {
		return 1 << 30
	}
	return r.MaxSessions - r.Sessions
}

// unary forwards a unary call to the replica at addr.
func (r *Replica) unary(ctx context.Context, addr, method string, req any) (any, error) {
	conn, err := r.peers.Conn(addr)
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	resp, err := responseFor(method)
	if err != nil {
		return nil, err
	}
	out, err := r.outgoing(ctx)
	if err != nil {
		return nil, err
	}
	r.metrics.Relayed(method)
	if err := conn.Invoke(out, method, req, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// relay forwards a Prompt to the replica at addr and relays its events to
// ss as the owner encoded them. The owner's status is the call's status;
// the client going away cancels the forwarded call, and so the turn, as it
// would a local one.
func (r *Replica) relay(ctx context.Context, ss grpc.ServerStream, addr string, req *acpgatev1.PromptRequest) error {
	conn, err := r.peers.Conn(addr)
	if err != nil {
		return status.Error(codes.Unavailable, err.Error())
	}
	out, err := r.outgoing(ctx)
	if err != nil {
		return err
	}
	r.metrics.Relayed(promptMethod)
	cs, err := Stream(out, conn, promptMethod, req)
	if err != nil {
		return err
	}
	for {
		var f Frame
		if err := cs.RecvMsg(&f); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := ss.SendMsg(wire.Encoded{Data: f}); err != nil {
			return err
		}
	}
}

// outgoing is ctx for a call to another replica on behalf of ctx's caller.
func (r *Replica) outgoing(ctx context.Context) (context.Context, error) {
	p, ok := auth.FromContext(ctx)
	out, err := r.secret.Outgoing(ctx, p, ok)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return out, nil
}

// responseFor is a new response message of method, by the service's
// descriptor.
func responseFor(method string) (proto.Message, error) {
	name := access.MethodName(method)
	md := acpgatev1.File_acpgate_v1_gateway_proto.Services().ByName(protoreflect.Name("AgentGateway")).Methods().ByName(protoreflect.Name(name))
	if md == nil {
		return nil, status.Errorf(codes.Internal, "no method %s to forward", method)
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
	if err != nil {
		return nil, status.Errorf(codes.Internal, "the response of %s: %v", method, err)
	}
	return mt.New().Interface(), nil
}

// prereadStream is a Prompt stream whose request was read before the
// handler ran: it hands that request over, and notes whether anything was
// sent (once something was, the call is this replica's to the end).
type prereadStream struct {
	grpc.ServerStream
	first *acpgatev1.PromptRequest
	sent  bool
}

func (s *prereadStream) RecvMsg(m any) error {
	if s.first == nil {
		return io.EOF
	}
	proto.Merge(m.(proto.Message), s.first)
	s.first = nil
	return nil
}

func (s *prereadStream) SendMsg(m any) error {
	s.sent = true
	return s.ServerStream.SendMsg(m)
}

// ctxStream is a server stream with another context.
type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s ctxStream) Context() context.Context { return s.ctx }

func withContext(ss grpc.ServerStream, ctx context.Context) grpc.ServerStream {
	if ctx == ss.Context() {
		return ss
	}
	return ctxStream{ServerStream: ss, ctx: ctx}
}
