package sessions

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/acp"
)

// StatusOf turns an open failure into a gRPC status: an agent-caused
// failure (*acp.Error) carries its HarnessError as a status detail, so
// that a client reads the same ending it would from a turn.
func StatusOf(err error) error {
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
	switch t := agentErr.Proto.GetTransport(); {
	case t.GetReason() == acpgatev1.TransportReason_TRANSPORT_REASON_HANDSHAKE_TIMEOUT:
		code = codes.DeadlineExceeded
	case t != nil, agentErr.Proto.GetGateway() != nil:
		// The agent's channel, or the gateway (busy starting other
		// agents): a later call may succeed.
		code = codes.Unavailable
	}
	return WithDetail(code, agentErr.Proto)
}

// WithDetail is a status of code whose message is e's and which carries e
// as a detail.
func WithDetail(code codes.Code, e *acpgatev1.HarnessError) error {
	st, err := status.New(code, e.GetMessage()).WithDetails(e)
	if err != nil {
		return status.Error(code, e.GetMessage())
	}
	return st.Err()
}
