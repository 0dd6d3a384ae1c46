package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// Answer is what the workflow returns: the completed turn's answer. DBOS
// checkpoints it as the step's output, so a workflow recovered after the
// step ended gets it from the database without asking the gateway.
type Answer struct {
	TurnID string `json:"turn_id"`
	Text   string `json:"text"`
}

// PermanentError is an ending that running the prompt again will not change
// (HarnessError.retryable false: the agent refused, stopped short or
// reported a failure; or a request the gateway rejects as malformed). The
// step's retry predicate stops on it and the workflow fails with it.
type PermanentError struct{ Msg string }

func (e *PermanentError) Error() string { return e.Msg }

// Retry policy of the prompt step: retryable endings (the agent crashed,
// the gateway stopped) and an unreachable gateway are retried with these.
// A retry resubmits the same request_id, which runs the turn's next
// attempt; its horizon (about a minute here) must stay inside the
// gateway's turn_retention, or the key is forgotten and a late retry
// starts the agent afresh.
const (
	stepMaxRetries   = 8
	stepBaseInterval = 500 * time.Millisecond
	stepMaxInterval  = 10 * time.Second
)

// Re-attaching to a turn whose stream broke (the gateway restarting, a
// dropped connection) is tried within the step before the step fails: the
// turn runs on without its stream, and the ending it reaches decides.
const (
	reattachFor   = 30 * time.Second
	reattachPause = 250 * time.Millisecond
)

// runPrompt runs the prompt as a DBOS step. Its request_id is the workflow
// id and the step's id: stable across a worker's crash and DBOS's recovery
// of the workflow, so the re-executed step attaches to the turn the first
// execution started instead of running the agent again.
func runPrompt(ctx dbos.Context, gw acpgatev1.AgentGatewayClient, agent, prompt string) (Answer, error) {
	return dbos.RunAsStep(ctx, func(stepCtx context.Context) (Answer, error) {
		dctx := stepCtx.(dbos.Context)
		wf, err := dbos.GetWorkflowID(dctx)
		if err != nil {
			return Answer{}, err
		}
		step, err := dbos.GetStepID(dctx)
		if err != nil {
			return Answer{}, err
		}
		req := &acpgatev1.PromptRequest{Agent: agent, Text: prompt, RequestId: fmt.Sprintf("dbos:%s:%d", wf, step)}
		return followTurn(stepCtx, gw, req)
	},
		dbos.WithStepName("prompt"),
		dbos.WithStepMaxRetries(stepMaxRetries),
		dbos.WithStepBaseInterval(stepBaseInterval),
		dbos.WithStepMaxInterval(stepMaxInterval),
		dbos.WithStepRetryPredicate(func(err error) bool {
			var p *PermanentError
			return !errors.As(err, &p)
		}),
	)
}

// followTurn submits req and reads the turn to its terminal, re-attaching
// with WatchTurn(after_seq = the last seq it saw) when the stream breaks.
func followTurn(ctx context.Context, gw acpgatev1.AgentGatewayClient, req *acpgatev1.PromptRequest) (Answer, error) {
	stream, err := gw.Prompt(ctx, req)
	if err != nil {
		return Answer{}, statusError(err)
	}
	var turnID string
	var last uint64
	for {
		terminal, err := readToTerminal(stream, &turnID, &last)
		if err == nil {
			return mapTerminal(turnID, terminal)
		}
		if turnID == "" || ctx.Err() != nil {
			// No turn to re-attach to: the step's retry resubmits the
			// request_id, which attaches to a turn the gateway did start.
			return Answer{}, statusError(err)
		}
		slog.Info("the turn's stream broke: re-attaching", "turn", turnID, "after_seq", last, "error", err)
		if stream, err = reattach(ctx, gw, turnID, last); err != nil {
			return Answer{}, statusError(err)
		}
	}
}

// readToTerminal reads stream to its terminal event, keeping the turn's id
// and the last seq seen up to date for a re-attach.
func readToTerminal(stream acpgatev1.AgentGateway_PromptClient, turnID *string, last *uint64) (*acpgatev1.PromptEvent, error) {
	for {
		e, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil, status.Error(codes.Unavailable, "the stream ended without a terminal event")
		}
		if err != nil {
			return nil, err
		}
		if s := e.GetStarted(); s != nil {
			*turnID = s.GetTurnId()
		}
		if e.GetSeq() > *last {
			*last = e.GetSeq()
			slog.Info("turn event", "turn", *turnID, "seq", *last)
		}
		if e.GetOutcome() != nil || e.GetError() != nil {
			return e, nil
		}
	}
}

// reattach opens WatchTurn(turnID, after) as soon as the gateway answers,
// for at most reattachFor.
func reattach(ctx context.Context, gw acpgatev1.AgentGatewayClient, turnID string, after uint64) (acpgatev1.AgentGateway_WatchTurnClient, error) {
	deadline := time.Now().Add(reattachFor)
	for {
		stream, err := gw.WatchTurn(ctx, &acpgatev1.WatchTurnRequest{TurnId: turnID, AfterSeq: after})
		if err == nil {
			// A server stream's status arrives with its first message:
			// an unreachable gateway fails here, not above.
			var first *acpgatev1.PromptEvent
			if first, err = stream.Recv(); err == nil {
				return &peeked{AgentGateway_WatchTurnClient: stream, first: first}, nil
			}
		}
		if status.Code(err) != codes.Unavailable || time.Now().After(deadline) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(reattachPause):
		}
	}
}

// peeked gives back the event reattach read to learn the stream's status.
type peeked struct {
	acpgatev1.AgentGateway_WatchTurnClient
	first *acpgatev1.PromptEvent
}

func (p *peeked) Recv() (*acpgatev1.PromptEvent, error) {
	if e := p.first; e != nil {
		p.first = nil
		return e, nil
	}
	return p.AgentGateway_WatchTurnClient.Recv()
}

// mapTerminal turns the terminal into the step's result: an outcome is the
// answer; an error with retryable false is permanent; any other error is
// one the step's retry policy retries.
func mapTerminal(turnID string, e *acpgatev1.PromptEvent) (Answer, error) {
	if o := e.GetOutcome(); o != nil {
		return Answer{TurnID: turnID, Text: o.GetText()}, nil
	}
	he := e.GetError()
	slog.Info("the turn ended with an error", "turn", turnID, "reason", he.GetTransport().GetReason(), "retryable", he.GetRetryable(), "message", he.GetMessage())
	if !he.GetRetryable() {
		return Answer{}, &PermanentError{Msg: fmt.Sprintf("turn %s: %s", turnID, he.GetMessage())}
	}
	return Answer{}, fmt.Errorf("turn %s ended retryable: %s", turnID, he.GetMessage())
}

// statusError classes a call's failure: statuses that mean the request
// itself is wrong are permanent, the rest (UNAVAILABLE,
// RESOURCE_EXHAUSTED, a broken stream) are retried.
func statusError(err error) error {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.AlreadyExists, codes.PermissionDenied, codes.Unauthenticated, codes.NotFound, codes.FailedPrecondition:
		return &PermanentError{Msg: err.Error()}
	}
	return err
}
