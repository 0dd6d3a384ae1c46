package server

import (
	"context"

	acpsdk "github.com/coder/acp-go-sdk"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/acp"
	"github.com/acpgate/acpgate/internal/acp/translate"
	"github.com/acpgate/acpgate/outcome"
)

// Prompt runs one turn, or attaches to the turn an earlier submission of
// the same request_id started, and streams its events.
//
// The turn runs on a goroutine of its own, owned by the gateway (counted in
// admission's turns, waited for by Drain), and journals its events; this
// stream follows the journal like any WatchTurn. So a client that stops
// reading never keeps the turn from ending, and a turn whose client went
// away runs on (on_disconnect CONTINUE) or is cancelled (CANCEL).
func (g *Gateway) Prompt(req *acpgatev1.PromptRequest, stream acpgatev1.AgentGateway_PromptServer) error {
	blocks, err := g.promptBlocks(req)
	if err != nil {
		return err
	}
	ctx := stream.Context()
	turnID, err := g.begin(ctx, req, blocks)
	if err != nil {
		return err
	}
	err = g.reader.Follow(ctx, turnID, 0, stream)
	if err == nil {
		return nil
	}
	if cancelsOnDisconnect(req) {
		if t := g.turns.Get(turnID); t != nil {
			t.Cancel()
		}
	}
	if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown && st.Code() != codes.Canceled {
		return err
	}
	g.log.DebugContext(ctx, "the client stopped receiving the stream", "turn", turnID, "err", err)
	return nil
}

func started(turnID, sessionID, agent string, resumed bool) *acpgatev1.PromptEvent {
	return &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_Started{Started: &acpgatev1.TurnStarted{TurnId: turnID, SessionId: sessionID, Agent: agent, Resumed: resumed}}}
}

func terminal(r outcome.Result) *acpgatev1.PromptEvent {
	if r.Outcome != nil {
		return &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_Outcome{Outcome: r.Outcome}}
	}
	return &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_Error{Error: r.Error}}
}

func (g *Gateway) logTerminal(ctx context.Context, turnID, agent, sessionID string, e *acpgatev1.HarnessError) {
	attrs := []any{"turn", turnID, "agent", agent, "session", sessionID}
	if e == nil {
		g.log.InfoContext(ctx, "turn completed", attrs...)
		return
	}
	// Without the partial output the message quotes: INFO logs hold no
	// answer text (the partial is in the turn's record for those who may
	// read it).
	g.log.InfoContext(ctx, "turn ended without completing", append(attrs, "class", outcome.Class(e), "message", outcome.MessageWithoutPartial(e))...)
}

// promptBlocks validates a PromptRequest and builds its ACP content.
func (g *Gateway) promptBlocks(req *acpgatev1.PromptRequest) ([]acpsdk.ContentBlock, error) {
	if (req.GetSessionId() == "") == (req.GetAgent() == "") {
		return nil, status.Error(codes.InvalidArgument, "set exactly one of session_id (a turn on an open session) and agent (a one-shot turn)")
	}
	if req.GetSessionId() != "" && req.GetCwd() != "" {
		return nil, status.Error(codes.InvalidArgument, "cwd applies to one-shot turns only; a session's working directory is fixed when it is created")
	}
	if req.GetSessionId() != "" && len(req.GetMcpServers()) > 0 {
		return nil, status.Error(codes.InvalidArgument, "mcp_servers applies to one-shot turns only; a session's MCP servers are fixed when it is created")
	}
	if err := checkRequestID(req.GetRequestId()); err != nil {
		return nil, err
	}
	if err := acp.CheckCallerMeta(req.GetMeta()); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if n := proto.Size(req); n > g.cfg.Limits.MaxPromptBytes {
		return nil, promptTooLarge(n, g.cfg.Limits.MaxPromptBytes)
	}
	var blocks []acpsdk.ContentBlock
	for i, b := range req.GetPrompt() {
		block, err := translate.ContentFromProto(b)
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
