package server

import (
	"context"
	"errors"

	acpsdk "github.com/coder/acp-go-sdk"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/acpgate/acpgate/acp"
	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/outcome"
)

// Prompt runs one turn and streams its events.
//
// The turn runs on a goroutine of its own, owned by the gateway (counted in
// admission's turns, waited for by Drain), and hands its events to this
// handler through an eventQueue; the handler only writes the stream. So a
// client that stops reading slows the turn while it runs normally, but
// never keeps it from ending.
func (g *Gateway) Prompt(req *acpgatev1.PromptRequest, stream acpgatev1.AgentGateway_PromptServer) error {
	blocks, err := g.promptBlocks(req)
	if err != nil {
		return err
	}
	if err := g.admit.admitTurn(); err != nil {
		return err
	}
	turnID := g.newTurnID()
	ctx := stream.Context()
	live, err := g.promptTarget(ctx, req, turnID)
	if err != nil {
		g.admit.turnEnded()
		var agentErr *acp.Error
		if !errors.As(err, &agentErr) {
			return statusOf(err)
		}
		// A one-shot caller handles one shape: the failure to start or
		// handshake is the turn's in-band terminal.
		q := newEventQueue()
		q.push(started(turnID, "", req.GetAgent()))
		q.finish(terminal(outcome.Result{Error: agentErr.Proto}))
		g.logTerminal(turnID, req.GetAgent(), "", agentErr.Proto)
		w := &streamWriter{stream: stream}
		return quiet(w.run(q))
	}

	q := newEventQueue()
	q.push(started(turnID, live.id, live.agent.cfg.Name))
	opts := acp.PromptOptions{
		TurnID:   turnID,
		Timeout:  live.agent.cfg.TurnTimeout,
		Emit:     q.push,
		OnCancel: q.abandon,
		OmitText: req.GetOmitOutcomeText(),
	}
	go g.runTurn(ctx, live, blocks, opts, q)
	w := &streamWriter{stream: stream, coalesce: req.GetCoalesceChunks()}
	if err := w.run(q); err != nil {
		g.log.Debug("the client stopped receiving the stream", "turn", turnID, "err", err)
	}
	return nil
}

// quiet drops a stream's send error: the client that caused it is gone and
// will never read a status.
func quiet(error) error { return nil }

// promptTarget claims the session a turn runs on: the named one, or a new
// one-shot session. Errors are gRPC status errors, or *acp.Error when a
// one-shot agent failed to start.
func (g *Gateway) promptTarget(ctx context.Context, req *acpgatev1.PromptRequest, turnID string) (*liveSession, error) {
	if req.GetSessionId() == "" {
		live, err := g.open(ctx, req.GetAgent(), req.GetCwd(), "", true)
		if err != nil {
			return nil, err
		}
		live.claim(turnID)
		return live, nil
	}
	live, err := g.sessions.lookup(req.GetSessionId())
	if err != nil {
		return nil, err
	}
	select {
	case <-live.sess.Done():
		// Its agent has gone; the janitor has not swept it yet.
		g.remove(live)
		return nil, status.Errorf(codes.NotFound, "session %q has ended: its agent is gone", req.GetSessionId())
	default:
	}
	if !live.claim(turnID) {
		return nil, status.Errorf(codes.FailedPrecondition, "session %q is already running a turn (ACP allows one at a time)", req.GetSessionId())
	}
	return live, nil
}

// runTurn runs the turn and queues its terminal. The session is free for
// its next turn before the terminal is queued, so a client that sends its
// next Prompt the moment it reads the terminal finds the session idle.
func (g *Gateway) runTurn(ctx context.Context, live *liveSession, blocks []acpsdk.ContentBlock, opts acp.PromptOptions, q *eventQueue) {
	defer g.admit.turnEnded()
	result, err := live.sess.Prompt(ctx, blocks, opts)
	if err != nil {
		// Not a turn's ending (busy or closed underneath us), but the
		// stream has announced a turn: it still gets a terminal.
		g.log.Error("the turn could not start", "turn", opts.TurnID, "err", err)
		result = outcome.Result{Error: g.interp.StaleTarget("the session ended before the turn could start: " + err.Error())}
	}
	live.release()
	q.finish(terminal(result))
	g.logTerminal(opts.TurnID, live.agent.cfg.Name, live.id, result.Error)
	if live.oneShot || result.Error.GetTransport() != nil {
		// A one-shot session ends with its turn; after a transport
		// failure the agent is gone, and so is the session.
		g.remove(live)
	}
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

func (g *Gateway) logTerminal(turnID, agent, sessionID string, e *acpgatev1.HarnessError) {
	attrs := []any{"turn", turnID, "agent", agent, "session", sessionID}
	if e == nil {
		g.log.Info("turn completed", attrs...)
		return
	}
	g.log.Info("turn ended without completing", append(attrs, "class", outcome.Class(e), "message", e.GetMessage())...)
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
		return nil, promptTooLarge(n, g.cfg.Limits.MaxPromptBytes)
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
