package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/acp/jsonrpc"
	"github.com/acpgate/acpgate/internal/acp/translate"
)

// Policy is how an agent's permission requests are answered.
type Policy string

// The permission policies.
const (
	// PolicyReject picks a reject_once option, else answers cancelled. The
	// default: an unattended gateway does not let an agent act on its own.
	PolicyReject Policy = "reject"
	// PolicyAllow picks an allow_once option (else allow_always, else
	// answers cancelled).
	PolicyAllow Policy = "allow"
	// PolicyAsk emits the request as an event and waits for a client to
	// answer through ResolvePermission, falling back to PolicyReject after
	// the timeout.
	PolicyAsk Policy = "ask"
)

// Valid reports whether p is one of the policies.
func (p Policy) Valid() bool {
	return p == PolicyReject || p == PolicyAllow || p == PolicyAsk
}

// PermissionPolicy configures how permission requests are answered.
type PermissionPolicy struct {
	Mode Policy
	// Timeout bounds how long PolicyAsk waits for a client.
	Timeout time.Duration
}

// Errors of ResolvePermission.
var (
	ErrNoSuchPermission = errors.New("no permission request with that id is waiting for a decision")
	ErrNoSuchOption     = errors.New("the permission request offers no option with that id")
)

type pendingPermission struct {
	options  []acpsdk.PermissionOption
	decision chan string // the chosen option id; "" answers cancelled
}

// ResolvePermission answers a permission request that waits for a client.
// An empty optionID answers cancelled.
func (s *Session) ResolvePermission(requestID, optionID string) error {
	s.mu.Lock()
	p, ok := s.pending[requestID]
	if ok && optionID != "" && !hasOption(p.options, optionID) {
		s.mu.Unlock()
		return fmt.Errorf("%w: %q", ErrNoSuchOption, optionID)
	}
	if ok {
		delete(s.pending, requestID)
	}
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %q", ErrNoSuchPermission, requestID)
	}
	p.decision <- optionID
	return nil
}

func (s *Session) requestPermission(ctx context.Context, params json.RawMessage) (any, *jsonrpc.ErrorObject) {
	var req acpsdk.RequestPermissionRequest
	if err := json.Unmarshal(params, &req); err != nil {
		return nil, &jsonrpc.ErrorObject{Code: jsonrpc.CodeInvalidParams, Message: "session/request_permission params: " + err.Error()}
	}
	s.mu.Lock()
	s.permSeq++
	requestID := fmt.Sprintf("perm-%d", s.permSeq)
	t := s.turn
	s.mu.Unlock()

	event := &acpgatev1.PermissionRequest{RequestId: requestID, ToolCall: translate.ToolCallUpdate(req.ToolCall)}
	for _, o := range req.Options {
		event.Options = append(event.Options, &acpgatev1.PermissionOption{OptionId: string(o.OptionId), Name: o.Name, Kind: string(o.Kind)})
	}
	decision := s.decide(ctx, t, requestID, event, req.Options)
	if t != nil {
		// A new event: under the ask policy the undecided one has already
		// been emitted, and an emitted event is never changed afterwards.
		decided := proto.Clone(event).(*acpgatev1.PermissionRequest)
		decided.Decision = decision
		t.permission(decided, s.cfg.Permission.Mode != PolicyAsk)
	}
	trace.SpanFromContext(ctx).SetAttributes(AttrPermission.String(decision.DecidedBy.String()),
		AttrPermOption.String(decision.OptionId), AttrPermCancel.Bool(decision.Cancelled))
	s.log.InfoContext(ctx, "answered a permission request", "request", requestID, "option", decision.OptionId,
		"cancelled", decision.Cancelled, "decided_by", decision.DecidedBy.String(), "reason", decision.Reason)
	if decision.Cancelled {
		return acpsdk.RequestPermissionResponse{Outcome: acpsdk.NewRequestPermissionOutcomeCancelled()}, nil
	}
	return acpsdk.RequestPermissionResponse{Outcome: acpsdk.NewRequestPermissionOutcomeSelected(acpsdk.PermissionOptionId(decision.OptionId))}, nil
}

// decide makes the decision for one request according to the policy.
func (s *Session) decide(ctx context.Context, t *turn, requestID string, event *acpgatev1.PermissionRequest, options []acpsdk.PermissionOption) *acpgatev1.PermissionDecision {
	if t == nil {
		return &acpgatev1.PermissionDecision{Cancelled: true, DecidedBy: acpgatev1.PermissionDecider_PERMISSION_DECIDER_POLICY,
			Reason: "no turn is running, so nobody can be asked"}
	}
	if t.isCancelled() {
		// Answered cancelled, but only once the agent has been told.
		select {
		case <-t.cancelSent:
		case <-ctx.Done():
		}
		return cancelledDecision()
	}
	switch s.cfg.Permission.Mode {
	case PolicyAllow:
		return pick(options, acpgatev1.PermissionDecider_PERMISSION_DECIDER_POLICY, "the agent's policy is allow",
			acpsdk.PermissionOptionKindAllowOnce, acpsdk.PermissionOptionKindAllowAlways)
	case PolicyAsk:
		return s.ask(ctx, t, requestID, event, options)
	default:
		return pick(options, acpgatev1.PermissionDecider_PERMISSION_DECIDER_POLICY, "the agent's policy is reject",
			acpsdk.PermissionOptionKindRejectOnce)
	}
}

// ask emits the undecided request and waits for a client, the timeout, the
// turn's cancellation, or the turn's end.
func (s *Session) ask(ctx context.Context, t *turn, requestID string, event *acpgatev1.PermissionRequest, options []acpsdk.PermissionOption) *acpgatev1.PermissionDecision {
	p := &pendingPermission{options: options, decision: make(chan string, 1)}
	s.mu.Lock()
	s.pending[requestID] = p
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.pending, requestID)
		s.mu.Unlock()
	}()
	t.permission(event, true) // the undecided request, before anyone can answer it

	timer := time.NewTimer(s.cfg.Permission.Timeout)
	defer timer.Stop()
	select {
	case optionID := <-p.decision:
		if optionID == "" {
			return &acpgatev1.PermissionDecision{Cancelled: true, DecidedBy: acpgatev1.PermissionDecider_PERMISSION_DECIDER_CLIENT, Reason: "a client answered cancelled"}
		}
		return &acpgatev1.PermissionDecision{OptionId: optionID, DecidedBy: acpgatev1.PermissionDecider_PERMISSION_DECIDER_CLIENT, Reason: "a client chose this option"}
	case <-timer.C:
		return pick(options, acpgatev1.PermissionDecider_PERMISSION_DECIDER_TIMEOUT,
			fmt.Sprintf("no client answered within %s; fell back to reject", s.cfg.Permission.Timeout),
			acpsdk.PermissionOptionKindRejectOnce)
	case <-t.cancelSent:
		return cancelledDecision()
	case <-t.ended:
		return cancelledDecision()
	case <-ctx.Done():
		if withdrawnByAgent(ctx) {
			return &acpgatev1.PermissionDecision{Cancelled: true, DecidedBy: acpgatev1.PermissionDecider_PERMISSION_DECIDER_AGENT_WITHDREW,
				Reason: "the agent withdrew the request ($/cancel_request) before anyone answered it"}
		}
		return cancelledDecision()
	}
}

// withdrawnByAgent reports whether the agent withdrew the request being
// served in ctx with $/cancel_request: its pending ask is then void.
func withdrawnByAgent(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), jsonrpc.ErrCancelledByPeer)
}

func cancelledDecision() *acpgatev1.PermissionDecision {
	return &acpgatev1.PermissionDecision{Cancelled: true, DecidedBy: acpgatev1.PermissionDecider_PERMISSION_DECIDER_CANCELLATION,
		Reason: "the turn was cancelled, which answers every pending permission request cancelled"}
}

// pick chooses the first option of the first kind offered, else answers
// cancelled.
func pick(options []acpsdk.PermissionOption, by acpgatev1.PermissionDecider, reason string, kinds ...acpsdk.PermissionOptionKind) *acpgatev1.PermissionDecision {
	for _, k := range kinds {
		for _, o := range options {
			if o.Kind == k {
				return &acpgatev1.PermissionDecision{OptionId: string(o.OptionId), DecidedBy: by, Reason: reason}
			}
		}
	}
	return &acpgatev1.PermissionDecision{Cancelled: true, DecidedBy: by, Reason: reason + ", and the agent offered no matching option"}
}

func hasOption(options []acpsdk.PermissionOption, id string) bool {
	for _, o := range options {
		if string(o.OptionId) == id {
			return true
		}
	}
	return false
}
