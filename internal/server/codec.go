package server

import (
	"context"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	"github.com/acpgate/acpgate/internal/turn/wire"
)

// requestCodec is gRPC's own proto codec with one difference: a request
// that does not decode is the client's error, INVALID_ARGUMENT.
//
// gRPC reports a decoding failure (a string field holding invalid UTF-8,
// say) as INTERNAL, "failed to unmarshal", and writes that status itself
// before any handler or interceptor can word it otherwise. So the codec
// reports success, keeps the failure beside the message it could not fill,
// and the interceptors, which see every request of every service once it
// is received, answer with it.
type requestCodec struct {
	encoding.CodecV2
	failed sync.Map // message pointer → its decoding error
}

func newRequestCodec() *requestCodec {
	return &requestCodec{CodecV2: encoding.GetCodecV2(proto.Name)}
}

func (c *requestCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if err := c.CodecV2.Unmarshal(data, v); err != nil {
		c.failed.Store(v, err)
	}
	return nil
}

// failure takes the decoding error kept for m, as the status to answer.
func (c *requestCodec) failure(m any) error {
	err, ok := c.failed.LoadAndDelete(m)
	if !ok {
		return nil
	}
	return status.Errorf(codes.InvalidArgument, "the request does not decode: %v", err)
}

func (c *requestCodec) checkUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := c.failure(req); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (c *requestCodec) checkStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, &checkedStream{ServerStream: ss, codec: c})
}

// checkedStream is a server stream whose received messages are checked
// for decoding failures.
type checkedStream struct {
	grpc.ServerStream
	codec *requestCodec
}

func (s *checkedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return s.codec.failure(m)
}

func (c *requestCodec) Marshal(v any) (mem.BufferSlice, error) {
	if e, ok := v.(wire.Encoded); ok {
		return e.Buffers(), nil
	}
	return c.CodecV2.Marshal(v)
}
