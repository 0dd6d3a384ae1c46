package acp

import (
	"context"
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/types/known/structpb"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/acp/clientreq"
	"github.com/acpgate/acpgate/internal/acp/jsonrpc"
)

// The requests the agent makes of its client, routed to the session they
// name (see Conn.request) and answered by package clientreq, and the
// answers a client gives to those that wait for one.

// request serves the agent's own requests.
func (s *Session) request(ctx context.Context, method string, params json.RawMessage) (result any, rpcErr *jsonrpc.ErrorObject) {
	s.mu.Lock()
	t := s.turn
	s.mu.Unlock()
	ctx, span := serveSpan(ctx, s.tracer, s.cfg.Agent, method, t)
	defer func() {
		if rpcErr != nil {
			rpcError(span, rpcErr)
		}
		span.End()
	}()
	switch method {
	case "session/request_permission":
		return s.permissions.Serve(ctx, s.runningTurn(), s.log, params)
	case "fs/read_text_file":
		return s.files.Read(ctx, params)
	case "fs/write_text_file":
		return s.files.Write(params)
	case "elicitation/create":
		return s.elicitations.Serve(ctx, s.runningTurn(), s.ID(), s.log, params)
	default:
		return nil, &jsonrpc.ErrorObject{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("acpgate does not serve %s", method)}
	}
}

// runningTurn is the running turn as the agent's requests see it; nil
// (not a nil *turn) outside turns.
func (s *Session) runningTurn() clientreq.Turn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.turn == nil {
		return nil
	}
	return s.turn
}

// ResolvePermission answers a permission request that waits for a client.
// An empty optionID answers cancelled.
func (s *Session) ResolvePermission(requestID, optionID string) error {
	return s.permissions.Resolve(requestID, optionID)
}

// ResolveElicitation answers an elicitation request that waits for a
// client. Accepted content must match the requested schema's top-level
// properties (types, enums, required); decline and cancel ignore content.
func (s *Session) ResolveElicitation(requestID string, action acpgatev1.ElicitationAction, content *structpb.Struct) error {
	return s.elicitations.Resolve(requestID, action, content)
}
