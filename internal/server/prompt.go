package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/access"
	"github.com/acpgate/acpgate/internal/acp"
	"github.com/acpgate/acpgate/internal/acp/translate"
	"github.com/acpgate/acpgate/internal/sessions"
	"github.com/acpgate/acpgate/internal/store"
	"github.com/acpgate/acpgate/internal/turn"
	"github.com/acpgate/acpgate/internal/turn/wire"
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
	if err := checkChunkDelivery(req); err != nil {
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

// turnPlan is a turn about to start: its record, and either the session
// it claimed or the one-shot session it will open.
type turnPlan struct {
	rec     store.Turn
	blocks  []acpsdk.ContentBlock
	live    *sessions.Live    // a claimed open session
	opening *sessions.Opening // a one-shot session to start, or a suspended one to re-open
	req     *acpgatev1.PromptRequest
}

// abandon gives back what the plan holds.
func (p *turnPlan) abandon() {
	if p.live != nil {
		p.live.Unclaim()
	}
	if p.opening != nil {
		p.opening.Abandon()
	}
}

// begin decides what a Prompt runs: a new turn (started on its own
// goroutine), or an earlier turn of the same request_id to attach to. It
// returns the id of the turn to follow.
func (g *Gateway) begin(ctx context.Context, req *acpgatev1.PromptRequest, blocks []acpsdk.ContentBlock) (string, error) {
	if err := checkNotifyURL(g.cfg.Webhooks, req.GetNotifyUrl()); err != nil {
		return "", err
	}
	attempt := uint32(1)
	owner := access.Caller(ctx).Name
	key := requestKey(owner, req.GetRequestId())
	if key != "" {
		rec, err := g.store.Latest(context.Background(), key)
		rec = g.turns.Recorded(rec)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return "", status.Errorf(codes.Unavailable, "reading the turn journal: %v", err)
		default:
			what, err := previous(rec, req)
			if err != nil {
				return "", err
			}
			if what == recordedAttach {
				return rec.ID, nil
			}
			attempt = rec.Attempt + 1
		}
	}
	plan := &turnPlan{req: req, blocks: blocks, rec: store.Turn{
		ID:         g.newTurnID(),
		RequestID:  key,
		Owner:      owner,
		Attempt:    attempt,
		Target:     requestTarget(req),
		PromptHash: promptHash(req),
		StartedAt:  time.Now(),
	}}
	if req.GetSessionId() != "" {
		live, susp, err := g.sessions.Claim(ctx, req.GetSessionId(), plan.rec.ID)
		if err != nil {
			return "", err
		}
		if susp != nil {
			if plan.opening, err = g.sessions.PrepareReopen(ctx, susp); err != nil {
				return "", err
			}
			plan.rec.Agent, plan.rec.SessionID = susp.Agent(), susp.ID()
		} else {
			plan.live = live
			plan.rec.Agent, plan.rec.SessionID = live.AgentName(), live.ID()
		}
	} else {
		o, err := g.sessions.PrepareOneShot(ctx, req.GetAgent(), req.GetCwd(), req.GetMcpServers())
		if err != nil {
			return "", err
		}
		plan.opening = o
		plan.rec.Agent = req.GetAgent()
	}
	plan.rec.NotifyURL = g.notifyTarget(req, plan.rec.Agent)
	if err := g.admit.AdmitTurn(owner, plan.rec.ID); err != nil {
		plan.abandon()
		return "", err
	}
	existing, created, err := g.store.Begin(context.Background(), plan.rec)
	if err != nil || !created {
		g.admit.TurnEnded(plan.rec.ID)
		plan.abandon()
		if err != nil {
			return "", status.Errorf(codes.Unavailable, "recording the turn in the journal: %v", err)
		}
		// A concurrent submission of the same request_id won.
		if _, err := previous(g.turns.Recorded(existing), req); err != nil {
			return "", err
		}
		return existing.ID, nil
	}
	// The turn is the gateway's, not the call's: it may outlive the call,
	// so it takes only the call's span (its trace parent) and baggage, not
	// its cancellation.
	ctx, cancel := context.WithCancel(baggage.ContextWithBaggage(trace.ContextWithSpan(context.Background(), trace.SpanFromContext(ctx)), baggage.FromContext(ctx)))
	r := &turn.Running{Rec: plan.rec, Cancel: cancel}
	r.Journal = turn.NewJournal(plan.rec.ID, g.commits, g.log, g.agentMetrics(plan.rec.Agent), func(cause string) {
		if plan.live != nil {
			plan.live.ACP().Cancel(cause)
		}
		cancel()
	})
	if g.replicas != nil {
		r.Journal.OnRefused(func() { g.handOff(r) })
	}
	g.turns.Add(r)
	go func() {
		// Once runTurn has returned: while it runs, its frame holds the
		// turn's answer and terminal.
		turn.CollectAfterTurn(g.runTurn(ctx, r, plan))
	}()
	return plan.rec.ID, nil
}

// runTurn runs a planned turn to its terminal, journaling its events. It
// owns the turn: it ends when the turn has ended, whoever is watching. It
// returns the encoded size of the terminal, 0 for the small terminal of a
// turn that did not stream.
func (g *Gateway) runTurn(ctx context.Context, r *turn.Running, plan *turnPlan) (terminalBytes int64) {
	defer g.admit.TurnEnded(r.Rec.ID)
	defer func() {
		// A turn whose terminal the store could not take stays readable
		// from memory: its streams must still end with the terminal, and
		// its request_id's next submission must find it ended.
		if ok, _, _ := r.Journal.Recorded(); ok {
			g.turns.Remove(r.Rec.ID)
		}
	}()
	defer r.Cancel()
	m := g.agentMetrics(r.Rec.Agent)
	m.TurnStarted()
	defer m.TurnDone()
	id := r.Rec.ID
	live := plan.live
	ctx, span := g.turnSpan(ctx, r, live == nil && !plan.opening.Reopens())
	if live == nil {
		var err error
		if plan.opening.Reopens() {
			live, err = g.sessions.Reopen(ctx, plan.opening)
		} else {
			live, err = g.sessions.Start(ctx, plan.opening, true)
		}
		if err != nil {
			endTurnSpan(span, nil, g.endUnstarted(ctx, r, err), turn.Stats{})
			return 0
		}
		live.Claim(id)
		plan.live = live
	}
	started := wire.Encode(started(id, live.ID(), live.AgentName(), live.TakeResumed()), 1)
	q := turn.NewQueue()
	journaled := make(chan struct{}) // closed once the store has taken or refused the started event
	pumped := make(chan struct{})
	var streamed turn.Stats
	go func() {
		defer close(pumped)
		// The started event is journaled while the agent takes the
		// prompt, not before: the agent does not wait for the store's
		// write. Its events wait in q meanwhile, since no stream may read
		// one before the started event, nor that before the store has
		// it. A refused start cancels the turn (see journal.start).
		// Journaled without the turn's cancellation: a turn cancelled
		// as it starts is a cancelled turn, not a journal that failed.
		if err := r.Journal.Start(context.WithoutCancel(ctx), live.ID(), started); err != nil {
			g.log.ErrorContext(ctx, "the turn could not be journaled", "turn", id, "err", err)
		}
		close(journaled)
		streamed = turn.Pump(ctx, q, r.Journal, turn.PumpOptions{
			Coalesce: coalesces(plan.req),
			MaxBytes: g.cfg.Limits.MaxTurnBytes,
			Cancel:   func(cause string) { live.ACP().Cancel(cause) },
			Full: func(detail string) *acpgatev1.PromptEvent {
				return terminal(outcome.Result{Error: g.interp.JournalFailed(detail, outcome.Text{})})
			},
			Failed:  g.journalFailed,
			Metrics: m,
			Began:   r.Rec.StartedAt,
			Log:     g.log,
		})
	}()
	result, err := live.ACP().Prompt(ctx, plan.blocks, acp.PromptOptions{
		TurnID:   id,
		Timeout:  live.TurnTimeout(),
		Emit:     q.Push,
		OnCancel: q.Abandon,
		OmitText: plan.req.GetOmitOutcomeText(),
		Meta:     plan.req.GetMeta(),
	})
	if err != nil {
		// Not a turn's ending (busy or closed underneath us), but the
		// turn has been announced: it still gets a terminal.
		g.log.ErrorContext(ctx, "the turn could not start", "turn", id, "err", err)
		result = outcome.Result{Error: g.interp.StaleTarget("the session ended before the turn could start: " + err.Error())}
	}
	<-journaled
	if failed := r.Journal.Failure(); failed != nil {
		e := g.interp.JournalFailed(failed.Error(), outcome.Text{})
		e.Partial = result.Error.GetPartial()
		result = outcome.Result{Error: e}
	}
	// The session is free before anyone can read the terminal.
	live.Release()
	q.Finish(terminal(result), wire.Pieces{Text: result.TextPieces, Final: result.FinalPieces})
	<-pumped
	g.logTerminal(ctx, id, live.AgentName(), live.ID(), result.Error)
	g.noteTurnEnd(r, live, result)
	endTurnSpan(span, live, result, streamed)
	g.afterTurn(live, result.Error)
	return streamed.Terminal
}

// journalFailed is the terminal of a turn whose journal failed with err,
// in place of e: what the agent had answered is lost with the journal, so
// the turn ends with the retryable journal failure, keeping e's partial
// answer, if any.
func (g *Gateway) journalFailed(err error, e *acpgatev1.PromptEvent) *acpgatev1.PromptEvent {
	he := g.interp.JournalFailed(err.Error(), outcome.Text{})
	he.Partial = e.GetError().GetPartial()
	return terminal(outcome.Result{Error: he})
}

// afterTurn closes a one-shot session, and a session whose agent is gone.
func (g *Gateway) afterTurn(live *sessions.Live, e *acpgatev1.HarnessError) {
	if live.OneShot() || e.GetTransport() != nil {
		g.sessions.Remove(live)
	}
}

// endUnstarted journals the ending of a turn whose agent did not start (a
// one-shot turn, or one re-opening a suspended session): a caller handles
// one shape, so the failure to start or handshake is the turn's terminal,
// after a started event with no session (a one-shot turn) or the
// suspended session's id. It returns that terminal.
func (g *Gateway) endUnstarted(ctx context.Context, r *turn.Running, err error) outcome.Result {
	var agentErr *acp.Error
	var e *acpgatev1.HarnessError
	switch {
	case errors.As(err, &agentErr):
		e = agentErr.Proto
	default:
		// The turn was cancelled (its client went away, or shutdown)
		// before its agent had started, or the gateway is draining.
		e = g.interp.StaleTarget("the turn ended before its agent had started: " + status.Convert(sessions.StatusOf(err)).Message())
	}
	if err := r.Journal.Start(context.Background(), "", wire.Encode(started(r.Rec.ID, r.Rec.SessionID, r.Rec.Agent, false), 1)); err != nil {
		g.log.ErrorContext(ctx, "the turn could not be journaled", "turn", r.Rec.ID, "err", err)
	}
	result := outcome.Result{Error: e}
	r.Journal.End(terminal(result), wire.Pieces{}, 2, g.journalFailed)
	g.logTerminal(ctx, r.Rec.ID, r.Rec.Agent, "", e)
	g.noteTurnEnd(r, nil, result)
	return result
}

// endStopped ends every turn the store still shows as running: the gateway
// stopped while they ran (they cannot be running now, since a store is
// used by one gateway at a time).
func (g *Gateway) endStopped(ctx context.Context) error {
	running, err := g.store.Running(ctx)
	if err != nil {
		return err
	}
	for _, rec := range running {
		if err := g.store.End(ctx, rec.ID, nil, g.stoppedTerminal(rec), time.Now()); err != nil {
			return fmt.Errorf("ending turn %s: %w", rec.ID, err)
		}
		g.log.Warn("a turn was running when the gateway stopped; it has ended", "turn", rec.ID, "agent", rec.Agent, "last_seq", rec.LastSeq)
	}
	return nil
}
