package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/acpgate/acpgate/internal/throttle"
)

// requestReadBound ends a call whose request message has not arrived
// within request_read_timeout of its headers.
//
// gRPC reads a call's request before any handler (for a unary call, before
// any interceptor) sees it, and waits for it as long as the connection
// lives: a client that opened calls and never sent their requests held
// about 14 KiB per call, up to max_connections × max_streams_per_connection
// calls, none of which a handler could refuse, and only shutdown ended
// them. The bound starts where gRPC first hands the gateway a call (its
// tap, as the headers are read) and stops where the request has been read
// (the outermost interceptor: a unary call's request is in before
// interceptors run; a streaming call's at its first RecvMsg). When it runs
// out, the call's context is cancelled, which ends the pending read, and
// gRPC answers the call CANCELLED ("context canceled") itself.
//
// It costs a timer per call and nothing per message: the hot path of a
// Prompt stream does not pay for it (a stats handler, gRPC's other hook
// before the interceptors, is called for every message sent).
type requestReadBound struct {
	timeout  time.Duration
	log      *slog.Logger
	warnings throttle.Throttle // of late requests
}

// errRequestLate is the cause of a call's context cancelled by the bound.
var errRequestLate = errors.New("the request message did not arrive within request_read_timeout")

// requestArrival is a call's bound: pending, then arrived or late, once.
type requestArrival struct {
	state atomic.Int32
	timer *time.Timer
}

const (
	requestPending int32 = iota
	requestArrived
	requestLate
)

type requestArrivalKey struct{}

// tap starts the bound of a new call (grpc.InTapHandle).
func (b *requestReadBound) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	a := &requestArrival{}
	method := info.FullMethodName
	a.timer = time.AfterFunc(b.timeout, func() {
		if a.state.CompareAndSwap(requestPending, requestLate) {
			cancel(errRequestLate)
			b.warn(method)
		}
	})
	// Otherwise cancel is called through the parent, when gRPC ends the
	// call.
	return context.WithValue(ctx, requestArrivalKey{}, a), nil
}

func (b *requestReadBound) warn(method string) {
	b.warnings.Warn(b.log, "a call's request message did not arrive within request_read_timeout; the call was ended",
		"rpc", method, "request_read_timeout", b.timeout)
}

// arrived stops ctx's bound; it reports false when the bound ran out
// first.
func arrived(ctx context.Context) bool {
	a, _ := ctx.Value(requestArrivalKey{}).(*requestArrival)
	if a == nil {
		return true
	}
	if a.state.CompareAndSwap(requestPending, requestArrived) {
		a.timer.Stop()
		return true
	}
	return a.state.Load() == requestArrived
}

// lateError is what the gateway's own interceptors (log, audit, metrics)
// record for a call whose request came too late; the caller got CANCELLED
// from gRPC.
func (b *requestReadBound) lateError() error {
	return status.Error(codes.Canceled, fmt.Sprintf("%v (%s)", errRequestLate, b.timeout))
}

// unary stops the bound of a unary call, whose request gRPC has read.
func (b *requestReadBound) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if !arrived(ctx) {
		return nil, b.lateError()
	}
	return handler(ctx, req)
}

// stream stops the bound of a streaming call at its first received
// message, or when its handler returns without one.
func (b *requestReadBound) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	defer arrived(ss.Context())
	return handler(srv, &arrivalStream{ServerStream: ss, bound: b})
}

// arrivalStream is a streaming call whose first message is awaited.
type arrivalStream struct {
	grpc.ServerStream
	bound *requestReadBound
	in    bool // the first message's read has returned
}

func (s *arrivalStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if !s.in {
		s.in = true
		if !arrived(s.Context()) {
			return s.bound.lateError()
		}
	}
	return err
}
