// Package temporal is a Temporal activity and workflow that run one agent
// prompt through acpgate and survive the loss of the worker running them:
//
//   - The activity heartbeats on every event of the turn, recording the turn
//     and the last seq it delivered as the heartbeat's details. A retry
//     after a worker loss resumes with WatchTurn(after_seq = that seq): the
//     agent runs once and the events after the seq are delivered again, none
//     skipped.
//   - Its first attempt submits Prompt with request_id = workflow id +
//     activity id, so even a retry that has no details (the worker died
//     before its first heartbeat reached the server) attaches to the turn.
//   - Cancelling the activity (the workflow cancels it, or is cancelled)
//     cancels the turn: a turn with a request_id outlives its stream, so
//     only the Cancel RPC stops the agent.
//   - retryable:false endings are non-retryable application errors; other
//     endings are ordinary failures that the retry policy retries, and the
//     retry resubmits the request_id, which runs the turn's next attempt.
package temporal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// Input is the activity's input.
type Input struct {
	Agent  string `json:"agent"`
	Prompt string `json:"prompt"`
}

// Answer is a completed turn's answer.
type Answer struct {
	TurnID string `json:"turn_id"`
	Text   string `json:"text"`
}

// Progress is the activity's heartbeat details: where a retry resumes.
type Progress struct {
	TurnID    string `json:"turn_id"`
	SessionID string `json:"session_id"`
	// Seq is the last seq delivered.
	Seq uint64 `json:"seq"`
	// Ended is true once the terminal was delivered: a retry after a
	// retryable ending resubmits the request_id (the turn's next
	// attempt) instead of watching the ended turn. The SDK flushes an
	// attempt's last heartbeat when the attempt fails, so the retry sees it.
	Ended bool `json:"ended"`
}

// Activities runs prompts on a gateway.
type Activities struct {
	Gateway acpgatev1.AgentGatewayClient
	// Deliver receives the turn's events (heartbeats aside) in seq order,
	// for a consumer that shows progress. Delivery is at least once: a
	// retry delivers again the events after the last seq the server
	// recorded, so a consumer keeps the highest (turn_id, seq) it has.
	// Nil delivers nowhere.
	Deliver func(context.Context, *acpgatev1.PromptEvent) error
}

// cancelTimeout bounds the Cancel call made for a cancelled activity,
// whose own context is done by then.
const cancelTimeout = 10 * time.Second

// ErrorTypeNonRetryable is the application error type of a
// retryable:false ending (and of a request the gateway rejects).
const ErrorTypeNonRetryable = "AcpgateNonRetryable"

// Prompt runs in.Prompt on in.Agent and returns the turn's answer.
func (a *Activities) Prompt(ctx context.Context, in Input) (Answer, error) {
	var p Progress
	if activity.HasHeartbeatDetails(ctx) {
		if err := activity.GetHeartbeatDetails(ctx, &p); err != nil {
			return Answer{}, err
		}
	}
	var stream acpgatev1.AgentGateway_PromptClient
	var err error
	if p.TurnID != "" && !p.Ended {
		activity.GetLogger(ctx).Info("resuming the turn", "turn", p.TurnID, "after_seq", p.Seq)
		stream, err = a.Gateway.WatchTurn(ctx, &acpgatev1.WatchTurnRequest{TurnId: p.TurnID, AfterSeq: p.Seq})
	} else {
		info := activity.GetInfo(ctx)
		p = Progress{}
		stream, err = a.Gateway.Prompt(ctx, &acpgatev1.PromptRequest{
			Agent: in.Agent, Text: in.Prompt,
			RequestId: fmt.Sprintf("temporal:%s:%s", info.WorkflowExecution.ID, info.ActivityID),
		})
	}
	if err != nil {
		return Answer{}, a.failed(ctx, p, err)
	}
	for {
		e, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			err = status.Error(codes.Unavailable, "the stream ended without a terminal event")
		}
		if err != nil {
			return Answer{}, a.failed(ctx, p, err)
		}
		if e.GetHeartbeat() != nil {
			activity.RecordHeartbeat(ctx, p)
			continue
		}
		if s := e.GetStarted(); s != nil {
			p.TurnID, p.SessionID = s.GetTurnId(), s.GetSessionId()
		}
		if e.GetSeq() <= p.Seq {
			continue
		}
		if a.Deliver != nil {
			if err := a.Deliver(ctx, e); err != nil {
				return Answer{}, err
			}
		}
		p.Seq = e.GetSeq()
		terminal := e.GetOutcome() != nil || e.GetError() != nil
		p.Ended = terminal
		activity.RecordHeartbeat(ctx, p)
		if terminal {
			return mapTerminal(p.TurnID, e)
		}
	}
}

// failed is the activity's error when its stream failed. A cancellation
// the server asked for (temporal.CanceledError as the context's cause)
// cancels the turn. Any other end of the context (the worker stopping, a
// timed-out attempt whose successor resumes the turn) leaves the turn
// running for the next attempt.
func (a *Activities) failed(ctx context.Context, p Progress, err error) error {
	if ctx.Err() == nil {
		return statusError(err)
	}
	if temporal.IsCanceledError(context.Cause(ctx)) && p.SessionID != "" {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelTimeout)
		defer cancel()
		if _, cerr := a.Gateway.Cancel(cctx, &acpgatev1.CancelRequest{SessionId: p.SessionID}); cerr != nil {
			activity.GetLogger(ctx).Warn("cancelling the turn failed: it runs on until turn_timeout", "turn", p.TurnID, "error", cerr)
		}
	}
	return ctx.Err()
}

// mapTerminal turns the terminal into the activity's result.
func mapTerminal(turnID string, e *acpgatev1.PromptEvent) (Answer, error) {
	if o := e.GetOutcome(); o != nil {
		return Answer{TurnID: turnID, Text: o.GetText()}, nil
	}
	he := e.GetError()
	msg := fmt.Sprintf("turn %s: %s", turnID, he.GetMessage())
	if !he.GetRetryable() {
		return Answer{}, temporal.NewNonRetryableApplicationError(msg, ErrorTypeNonRetryable, nil, turnID)
	}
	return Answer{}, temporal.NewApplicationError(msg, "AcpgateRetryable", turnID)
}

// statusError classes a call's failure: statuses that mean the request
// itself is wrong are non-retryable; the rest (UNAVAILABLE,
// RESOURCE_EXHAUSTED, a broken stream) are retried, and the retry resumes
// from the heartbeat's details.
func statusError(err error) error {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.AlreadyExists, codes.PermissionDenied, codes.Unauthenticated, codes.NotFound, codes.FailedPrecondition:
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrorTypeNonRetryable, err)
	}
	return err
}
