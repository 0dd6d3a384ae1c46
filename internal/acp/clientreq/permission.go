package clientreq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
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
	// answer through Permissions.Resolve, falling back to PolicyReject
	// after the timeout.
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

// Errors of Permissions.Resolve.
var (
	ErrNoSuchPermission = errors.New("no permission request with that id is waiting for a decision")
	ErrNoSuchOption     = errors.New("the permission request offers no option with that id")
)

// Permissions answers one session's session/request_permission requests
// as its policy says, keeping those that wait for a client.
type Permissions struct {
	policy  PermissionPolicy
	pending *pending[[]acpsdk.PermissionOption, string] // the chosen option id; "" answers cancelled
}

// NewPermissions answers requests by policy, whose Timeout must be set.
func NewPermissions(policy PermissionPolicy) *Permissions {
	return &Permissions{policy: policy, pending: newPending[[]acpsdk.PermissionOption, string]("perm", ErrNoSuchPermission)}
}

// Resolve answers a permission request that waits for a client. An empty
// optionID answers cancelled.
func (p *Permissions) Resolve(requestID, optionID string) error {
	return p.pending.resolve(requestID, func(options []acpsdk.PermissionOption) (string, error) {
		if optionID != "" && !hasOption(options, optionID) {
			return "", fmt.Errorf("%w: %q", ErrNoSuchOption, optionID)
		}
		return optionID, nil
	})
}

// Serve answers a session/request_permission request that arrived during
// t (nil outside a turn), logging the decision to log.
func (p *Permissions) Serve(ctx context.Context, t Turn, log *slog.Logger, params json.RawMessage) (any, *jsonrpc.ErrorObject) {
	var req acpsdk.RequestPermissionRequest
	if err := json.Unmarshal(params, &req); err != nil {
		return nil, &jsonrpc.ErrorObject{Code: jsonrpc.CodeInvalidParams, Message: "session/request_permission params: " + err.Error()}
	}
	requestID := p.pending.mint()

	event := &acpgatev1.PermissionRequest{RequestId: requestID, ToolCall: translate.ToolCallUpdate(req.ToolCall)}
	for _, o := range req.Options {
		event.Options = append(event.Options, &acpgatev1.PermissionOption{OptionId: string(o.OptionId), Name: o.Name, Kind: string(o.Kind)})
	}
	decision := p.decide(ctx, t, requestID, event, req.Options)
	if t != nil {
		// A new event: under the ask policy the undecided one has already
		// been emitted, and an emitted event is never changed afterwards.
		decided := proto.Clone(event).(*acpgatev1.PermissionRequest)
		decided.Decision = decision
		emitPermission(t, decided, p.policy.Mode != PolicyAsk)
	}
	trace.SpanFromContext(ctx).SetAttributes(AttrPermission.String(decision.DecidedBy.String()),
		AttrPermOption.String(decision.OptionId), AttrPermCancel.Bool(decision.Cancelled))
	log.InfoContext(ctx, "answered a permission request", "request", requestID, "option", decision.OptionId,
		"cancelled", decision.Cancelled, "decided_by", decision.DecidedBy.String(), "reason", decision.Reason)
	if decision.Cancelled {
		return acpsdk.RequestPermissionResponse{Outcome: acpsdk.NewRequestPermissionOutcomeCancelled()}, nil
	}
	return acpsdk.RequestPermissionResponse{Outcome: acpsdk.NewRequestPermissionOutcomeSelected(acpsdk.PermissionOptionId(decision.OptionId))}, nil
}

// emitPermission emits a permission event; a new request also ends an
// id-less message, since the agent has turned to tools.
func emitPermission(t Turn, r *acpgatev1.PermissionRequest, splits bool) {
	t.EmitRequest(&acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_PermissionRequested{PermissionRequested: r}}, splits)
}

// decide makes the decision for one request according to the policy.
func (p *Permissions) decide(ctx context.Context, t Turn, requestID string, event *acpgatev1.PermissionRequest, options []acpsdk.PermissionOption) *acpgatev1.PermissionDecision {
	if t == nil {
		return &acpgatev1.PermissionDecision{Cancelled: true, DecidedBy: acpgatev1.PermissionDecider_PERMISSION_DECIDER_POLICY,
			Reason: "no turn is running, so nobody can be asked"}
	}
	if t.CancelRequested() {
		// Answered cancelled, but only once the agent has been told.
		awaitCancelSent(ctx, t)
		return cancelledDecision()
	}
	switch p.policy.Mode {
	case PolicyAllow:
		return pick(options, acpgatev1.PermissionDecider_PERMISSION_DECIDER_POLICY, "the agent's policy is allow",
			acpsdk.PermissionOptionKindAllowOnce, acpsdk.PermissionOptionKindAllowAlways)
	case PolicyAsk:
		return p.ask(ctx, t, requestID, event, options)
	default:
		return pick(options, acpgatev1.PermissionDecider_PERMISSION_DECIDER_POLICY, "the agent's policy is reject",
			acpsdk.PermissionOptionKindRejectOnce)
	}
}

// ask emits the undecided request and waits for a client, the timeout, the
// turn's cancellation, or the turn's end.
func (p *Permissions) ask(ctx context.Context, t Turn, requestID string, event *acpgatev1.PermissionRequest, options []acpsdk.PermissionOption) *acpgatev1.PermissionDecision {
	optionID, how := p.pending.wait(ctx, t, requestID, options, p.policy.Timeout, func() { emitPermission(t, event, true) })
	switch how {
	case answered:
		if optionID == "" {
			return &acpgatev1.PermissionDecision{Cancelled: true, DecidedBy: acpgatev1.PermissionDecider_PERMISSION_DECIDER_CLIENT, Reason: "a client answered cancelled"}
		}
		return &acpgatev1.PermissionDecision{OptionId: optionID, DecidedBy: acpgatev1.PermissionDecider_PERMISSION_DECIDER_CLIENT, Reason: "a client chose this option"}
	case timedOut:
		return pick(options, acpgatev1.PermissionDecider_PERMISSION_DECIDER_TIMEOUT,
			fmt.Sprintf("no client answered within %s; fell back to reject", p.policy.Timeout),
			acpsdk.PermissionOptionKindRejectOnce)
	case withdrawn:
		return &acpgatev1.PermissionDecision{Cancelled: true, DecidedBy: acpgatev1.PermissionDecider_PERMISSION_DECIDER_AGENT_WITHDREW,
			Reason: "the agent withdrew the request ($/cancel_request) before anyone answered it"}
	default:
		return cancelledDecision()
	}
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
