package acp

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"

	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/acp/answer"
	"github.com/acpgate/acpgate/internal/acp/jsonrpc"
	"github.com/acpgate/acpgate/internal/acp/translate"
	"github.com/acpgate/acpgate/outcome"
)

// PromptOptions configure one turn.
type PromptOptions struct {
	// TurnID identifies the turn in its outcome.
	TurnID string
	// Timeout, when positive, cancels the turn once it has run this long.
	Timeout time.Duration
	// Emit receives the turn's events in order, one call at a time, never
	// after Prompt returns. It may block: that slows the agent, which is
	// the backpressure that keeps memory bounded. It must return once the
	// consumer is gone (for example by discarding).
	Emit func(*acpgatev1.PromptEvent)
	// OnCancel, when set, is called once when the turn's cancellation is
	// requested, whatever requested it (the caller's context, the turn's
	// timeout, Cancel, Close). A consumer whose Emit applies backpressure
	// stops waiting then: a cancelled turn must reach its ending even when
	// nobody reads its events.
	OnCancel func()
	// OmitText leaves the text out of a completed turn's outcome
	// (outcome.Turn.OmitText), and the turn then keeps only the beginning
	// of the text that a failure's partial output needs. Without it, the
	// turn keeps the text within Config.AnswerBudget.
	OmitText bool
	// Meta are the caller's entries for the session/prompt request's
	// _meta, already checked with CheckCallerMeta; the gateway's trace
	// context keys win over them.
	Meta map[string]string
}

// turn is the state of one running prompt turn.
type turn struct {
	id       string
	emit     func(*acpgatev1.PromptEvent)
	onCancel func()
	omitText bool

	mu         sync.Mutex
	acc        answer.Accumulator
	finished   bool
	usage      *acpgatev1.Usage // the last usage_update of the turn
	clientGone bool             // the text stopped being kept: nobody will read it

	cancelOnce sync.Once
	cancelled  chan struct{} // closed when a cancel was requested
	cancelSent chan struct{} // closed once session/cancel is written (or failed)
	cause      string        // why, set before cancelled is closed
	ended      chan struct{} // closed when the turn has its result

	// spanCtx is the session/prompt span's, the parent of the spans of
	// the agent's requests and of the cancel; set before the turn is
	// visible to the reader.
	spanCtx trace.SpanContext
	// cancelSpan is the acpgate.turn.cancel span, from the cancel request
	// to the turn's ending. It has a lock of its own: mu is held while
	// emit blocks, which only the cancel's onCancel can end.
	spanMu     sync.Mutex
	cancelSpan trace.Span
	spanDone   bool // the turn has ended: a late cancel span ends at once
}

// startCancelSpan starts the cancel's span and returns the context that
// session/cancel is sent in.
func (t *turn) startCancelSpan(s *Session, cause string) context.Context {
	parent := trace.ContextWithSpanContext(context.Background(), t.spanCtx)
	ctx, span := s.tracer.Start(parent, SpanTurnCancel, trace.WithAttributes(AttrCancelCause.String(cause), AttrTurn.String(t.id)))
	t.spanMu.Lock()
	defer t.spanMu.Unlock()
	if t.spanDone {
		span.End()
		return ctx
	}
	t.cancelSpan = span
	return ctx
}

// endCancelSpan ends the cancel's span, if a cancel was requested, when
// the turn has ended; graceExpired says the agent had to be stopped.
func (t *turn) endCancelSpan(graceExpired bool) {
	t.spanMu.Lock()
	defer t.spanMu.Unlock()
	t.spanDone = true
	if t.cancelSpan != nil {
		t.cancelSpan.SetAttributes(AttrGraceExpired.Bool(graceExpired))
		t.cancelSpan.End()
		t.cancelSpan = nil
	}
}

// apply handles one update of the turn, on the connection's reader.
func (t *turn) apply(u translate.Update) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.finished {
		return
	}
	if u.HasChunk {
		t.acc.Add(u.Chunk)
	}
	if u.Splits {
		t.acc.Split()
	}
	if usage := u.Event.GetUsage(); usage != nil {
		t.usage = usage
	}
	t.emit(u.Event)
}

// EmitRequest emits an event about a request of the agent's own; splits
// ends an id-less message first, since the agent has turned away from it.
// (The turn is the agent's requests' clientreq.Turn.)
func (t *turn) EmitRequest(e *acpgatev1.PromptEvent, splits bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.finished {
		return
	}
	if splits {
		t.acc.Split()
	}
	t.emit(e)
}

// finish stops the turn's events and returns its text.
func (t *turn) finish() (text, final outcome.Text) {
	t.mu.Lock()
	t.finished = true
	text, final = t.acc.Finish()
	t.mu.Unlock()
	if text.Len() >= collectAfterJoinBytes {
		// After a long answer: the chunks joined into the text (its runs
		// of short chunks; a long answer comes in pieces, see
		// answer.PiecesFrom) are garbage now, and so is what streaming it
		// left. Collected here, that memory serves what is allocated next
		// (pages streams read back from the journal, the next turn's
		// chunks), and the collector paces itself from what is live
		// again. Without it, a 32 MiB answer in pieces with 63 stalled
		// watchers peaked at 150 – 153 MiB of RSS, against 134 MiB with
		// it.
		//
		// The memory stays with the process for the next turn (see
		// server/collect.go): returning it to the system here kept the
		// peak RSS of a 128 MiB answer marshalled in one piece at 3 times
		// its size instead of 4 (BenchmarkA128MiBAnswerThroughTheOutcome),
		// but the gateway encodes a terminal in pieces, and its peak for a
		// slow client of a 156 MiB answer was 351.6 MiB with the release
		// and 351.7 MiB without, while the release cost about a fifth of
		// the 64 KiB flood's throughput (0.86 against 1.07 of the tree
		// before durable turns, in runs a few minutes apart).
		runtime.GC()
	}
	return text, final
}

// collectAfterJoinBytes is the length of an answer from which finishing a
// turn collects garbage: a collection costs a few milliseconds, little next
// to streaming that much.
const collectAfterJoinBytes = 16 << 20

// stopKeepingText makes the turn keep only the beginning of its text that
// a failure's partial output needs, and return its share of the answer
// budget: its client went away, so no one will read a completed outcome's
// text.
func (t *turn) stopKeepingText() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.clientGone = true
	t.acc.Bound()
}

// unkept says why the turn's text may not have been kept whole.
func (t *turn) unkept() acpgatev1.TextOmission {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.acc.OverBudget():
		return acpgatev1.TextOmission_TEXT_OMISSION_ANSWER_LIMIT
	case t.clientGone:
		return acpgatev1.TextOmission_TEXT_OMISSION_CLIENT_GONE
	default:
		return acpgatev1.TextOmission_TEXT_OMISSION_UNSPECIFIED
	}
}

// withContextUsage completes a completed turn's usage with what the agent
// reported during the turn (usage_update: context window and cost), beside
// the token counts of its answer, so the outcome carries every figure the
// agent reported and is absent only when it reported none.
func (t *turn) withContextUsage(o *acpgatev1.PromptOutcome) {
	t.mu.Lock()
	reported := t.usage
	t.mu.Unlock()
	if reported == nil {
		return
	}
	if o.Usage == nil {
		o.Usage = &acpgatev1.Usage{}
	}
	o.Usage.ContextSize, o.Usage.ContextUsed = reported.ContextSize, reported.ContextUsed
	o.Usage.CostAmount, o.Usage.CostCurrency = reported.CostAmount, reported.CostCurrency
}

// requestCancel asks the agent to cancel the turn (once): session/cancel,
// and every pending permission request of the turn is answered cancelled.
//
// It does not wait for session/cancel to be written. The write waits its
// turn behind the answers to the agent's own requests, and an agent that
// does not read its stdin keeps those waiting for good: Prompt, which
// calls this itself when its client goes away or its timeout expires,
// would then never reach the cancel grace that stops such an agent, and
// the turn would never end. Stopping the agent fails the write.
func (t *turn) requestCancel(s *Session, cause string) {
	t.cancelOnce.Do(func() {
		t.cause = cause
		ctx := t.startCancelSpan(s, cause)
		close(t.cancelled)
		if t.onCancel != nil {
			t.onCancel()
		}
		id := s.ID()
		s.cancels.Add(1)
		go func() {
			defer s.cancels.Done()
			// ACP's order: session/cancel first, then the pending
			// permission requests are answered cancelled. An agent that
			// saw the answers first could take them for a refusal and end
			// its turn as completed before it learned of the cancel.
			defer close(t.cancelSent)
			if err := s.conn.Notify("session/cancel", acpsdk.CancelNotification{Meta: requestMeta(ctx, s.cfg.Propagator), SessionId: acpsdk.SessionId(id)}); err != nil {
				s.log.Debug("sending session/cancel failed", "err", err)
			}
		}()
	})
}

// CancelRequested reports whether the turn's cancellation was requested.
func (t *turn) CancelRequested() bool {
	select {
	case <-t.cancelled:
		return true
	default:
		return false
	}
}

// CancelSent is closed once session/cancel is written (or failed).
func (t *turn) CancelSent() <-chan struct{} { return t.cancelSent }

// Ended is closed when the turn has its result.
func (t *turn) Ended() <-chan struct{} { return t.ended }

// Prompt runs one turn: it sends session/prompt, emits an event for every
// update, and returns the interpretation of the agent's answer. Cancelling
// ctx cancels the turn (session/cancel) and still waits for the answer, up
// to the cancel grace, so the turn always gets its honest ending.
//
// The returned error is ErrBusy or ErrClosed (no turn ran) or a failure to
// encode the request; every ending of a turn that ran is the Result.
func (s *Session) Prompt(ctx context.Context, prompt []acpsdk.ContentBlock, opts PromptOptions) (outcome.Result, error) {
	emit := opts.Emit
	if emit == nil {
		emit = func(*acpgatev1.PromptEvent) {}
	}
	t := &turn{id: opts.TurnID, emit: emit, onCancel: opts.OnCancel, omitText: opts.OmitText, cancelled: make(chan struct{}), cancelSent: make(chan struct{}), ended: make(chan struct{})}
	if opts.OmitText {
		// The outcome will not carry the text: keep only what a failure's
		// partial output needs, so a long answer costs bounded memory.
		t.acc = answer.Limited(s.interp.KeepBytes())
	} else {
		// Keep it all while the gateway's answer budget lasts, then as
		// above.
		t.acc = answer.Budgeted(s.cfg.AnswerBudget, s.interp.KeepBytes())
	}
	ctx, span := startCall(ctx, s.tracer, s.cfg.Agent, outcome.MethodPrompt)
	span.SetAttributes(AttrTurn.String(opts.TurnID))
	defer span.End()
	t.spanCtx = span.SpanContext()
	graceExpired := false
	defer func() { t.endCancelSpan(graceExpired) }()
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		failSpan(span, ErrClosed)
		return outcome.Result{}, ErrClosed
	case s.turn != nil:
		s.mu.Unlock()
		failSpan(span, ErrBusy)
		return outcome.Result{}, ErrBusy
	}
	s.turn = t
	id := s.id
	s.mu.Unlock()
	defer close(t.ended)
	if i, blockType, primitive, found := unsupportedContent(s.info.Capabilities.PromptCapabilities, prompt); found {
		// Refused before anything is sent: the turn ends as it began, with
		// the agent none the wiser.
		t.finish()
		s.endTurn(t)
		e := s.interp.PromptContentNotSupported(blockType, i, primitive)
		span.SetStatus(otelcodes.Error, e.GetMessage())
		return outcome.Result{Error: e}, nil
	}

	span.SetAttributes(AttrACPSession.String(id))
	replies, _, err := s.conn.Start(outcome.MethodPrompt, acpsdk.PromptRequest{Meta: withCallerMeta(requestMeta(ctx, s.cfg.Propagator), opts.Meta), SessionId: acpsdk.SessionId(id), Prompt: prompt})
	if err != nil {
		failSpan(span, err)
		t.finish()
		s.endTurn(t)
		return outcome.Result{}, err
	}
	var timeout <-chan time.Time
	if opts.Timeout > 0 {
		timer := time.NewTimer(opts.Timeout)
		defer timer.Stop()
		timeout = timer.C
	}
	var grace <-chan time.Time
	cancelled := t.cancelled
	done := ctx.Done()
	for {
		select {
		case reply := <-replies:
			noteReply(span, reply, nil)
			noteStopReason(span, reply)
			return s.conclude(t, id, reply), nil
		case <-done:
			done = nil
			t.requestCancel(s, "the client went away")
			t.stopKeepingText()
		case <-timeout:
			timeout = nil
			t.requestCancel(s, fmt.Sprintf("the turn exceeded its timeout of %s", opts.Timeout))
		case <-cancelled:
			cancelled = nil
			timer := time.NewTimer(s.cfg.CancelGrace)
			defer timer.Stop()
			grace = timer.C
		case <-grace:
			// The agent did not acknowledge the cancel: stop it. The
			// session cannot continue without its agent.
			s.log.WarnContext(ctx, "the agent did not answer a cancelled turn in time; stopping it", "grace", s.cfg.CancelGrace)
			graceExpired = true
			span.SetStatus(otelcodes.Error, "the agent did not answer a cancelled turn within the cancel grace")
			s.markClosed()
			s.proc.Kill()
			text, _ := t.finish()
			s.endTurn(t)
			return outcome.Result{Error: s.interp.CancelGraceExpired(s.cfg.CancelGrace, t.cause, text)}, nil
		}
	}
}

// conclude interprets the reply that ended a turn.
func (s *Session) conclude(t *turn, sessionID string, reply jsonrpc.Reply) outcome.Result {
	text, final := t.finish()
	s.endTurn(t)
	if reply.End != nil {
		// The channel broke: the session is over.
		s.markClosed()
		return outcome.Result{Error: s.endError(outcome.MethodPrompt, reply.End, text)}
	}
	if reply.Violation != "" {
		return outcome.Result{Error: s.interp.ProtocolViolation(reply.Violation, text)}
	}
	cause := ""
	if t.CancelRequested() {
		cause = t.cause
	}
	result := s.interp.Interpret(outcome.Turn{
		Ending:       outcome.Answered,
		Response:     reply.Response,
		Text:         text,
		FinalMessage: final,
		SessionID:    sessionID,
		TurnID:       t.id,
		OmitText:     t.omitText,
		Unkept:       t.unkept(),
		CancelCause:  cause,
	})
	if result.Outcome != nil {
		s.mu.Lock()
		s.usage.addTurn(result.Outcome.GetUsage())
		s.mu.Unlock()
		t.withContextUsage(result.Outcome)
		result.Outcome.Meta = translate.ResultMeta(reply.Response.Result)
	}
	return result
}

func (s *Session) endTurn(t *turn) {
	s.mu.Lock()
	if s.turn == t {
		s.turn = nil
	}
	s.mu.Unlock()
}

func (s *Session) markClosed() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
}

// Cancel asks the agent to cancel the running turn. It reports whether a
// turn was running; the turn's Prompt call then returns its ending.
func (s *Session) Cancel(cause string) bool {
	s.mu.Lock()
	t := s.turn
	s.mu.Unlock()
	if t == nil {
		return false
	}
	t.requestCancel(s, cause)
	return true
}

// AvailableCommands returns the commands the agent last advertised.
func (s *Session) AvailableCommands() *acpgatev1.AvailableCommands {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commands
}

// update applies an update the agent sent for sessionID, routed to s (see
// Conn.notify), on the connection's reader.
func (s *Session) update(sessionID string, u translate.Update) {
	s.mu.Lock()
	if s.id == "" && (u.Commands != nil || u.Settings.Changes()) {
		// The agent sent session state right after answering
		// session/new, and the reader got to it before Open recorded the
		// session's id: keep it for setID to claim.
		s.early.keep(sessionID, u)
		s.mu.Unlock()
		return
	}
	if sessionID != s.id {
		s.mu.Unlock()
		s.host.warnStray("ignoring a session/update for another session", "session", s.id, "update_session", jsonrpc.Clip(sessionID))
		return
	}
	if u.Commands != nil {
		s.commands = u.Commands
	}
	if reported := u.Event.GetUsage(); reported != nil {
		s.usage.update(reported)
	}
	settingsChanged := s.settings.apply(u.Settings)
	t, replay := s.turn, s.replay
	s.mu.Unlock()
	if settingsChanged != nil {
		settingsChanged()
	}
	switch {
	case t != nil:
		t.apply(u)
	case replay != nil:
		replay(u.Event)
	default:
		s.log.Debug("a session/update arrived outside a turn", "event", fmt.Sprintf("%T", u.Event.GetEvent()))
	}
}
