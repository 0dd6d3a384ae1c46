package clientreq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/acp/jsonrpc"
	"github.com/acpgate/acpgate/internal/acp/translate"
)

// ElicitationMode is how an agent's elicitation/create requests are
// answered.
type ElicitationMode string

// The elicitation policies.
const (
	// ElicitDecline answers every request decline, at once. The default:
	// an unattended gateway has nobody to ask.
	ElicitDecline ElicitationMode = "decline"
	// ElicitAsk advertises form elicitation at initialize, emits each form
	// request as an event and waits for a client to answer through
	// Elicitations.Resolve, declining after the timeout.
	ElicitAsk ElicitationMode = "ask"
)

// Valid reports whether m is one of the policies.
func (m ElicitationMode) Valid() bool { return m == ElicitDecline || m == ElicitAsk }

// ElicitationPolicy configures how elicitation requests are answered.
type ElicitationPolicy struct {
	Mode ElicitationMode
	// Timeout bounds how long ElicitAsk waits for a client; package acp
	// makes it acp.DefaultPermissionTimeout when zero.
	Timeout time.Duration
}

// Errors of Elicitations.Resolve.
var (
	ErrNoSuchElicitation = errors.New("no elicitation request with that id is waiting for an answer")
	ErrInvalidContent    = errors.New("the content does not match the requested schema")
)

// The wire shapes of elicitation/create (ACP schema v1, 1.7.0:
// CreateElicitationRequest and CreateElicitationResponse), which the Go
// SDK still marks unstable. Only form mode is advertised; url mode and
// modes of the future are answered as ACP says for a mode not advertised.
type elicitationRequest struct {
	SessionID       string          `json:"sessionId,omitempty"`
	ToolCallID      string          `json:"toolCallId,omitempty"`
	RequestID       json.RawMessage `json:"requestId,omitempty"`
	Mode            string          `json:"mode"`
	Message         string          `json:"message"`
	RequestedSchema json.RawMessage `json:"requestedSchema,omitempty"`
}

type elicitationResponse struct {
	Action  string         `json:"action"`
	Content map[string]any `json:"content,omitempty"`
}

// requestedSchema is the part of a form's schema the gateway checks an
// answer against: ACP form schemas are flat objects of primitive
// properties.
type requestedSchema struct {
	Properties map[string]struct {
		Type string   `json:"type"`
		Enum []string `json:"enum"`
	} `json:"properties"`
	Required []string `json:"required"`
}

// Elicitations answers one session's elicitation/create requests as its
// policy says, keeping those that wait for a client.
type Elicitations struct {
	policy  ElicitationPolicy
	pending *pending[requestedSchema, *acpgatev1.ElicitationDecision]
}

// NewElicitations answers requests by policy, whose Timeout must be set.
func NewElicitations(policy ElicitationPolicy) *Elicitations {
	return &Elicitations{policy: policy, pending: newPending[requestedSchema, *acpgatev1.ElicitationDecision]("elicit", ErrNoSuchElicitation)}
}

// Resolve answers an elicitation request that waits for a client.
// Accepted content must match the requested schema's top-level properties
// (types, enums, required); decline and cancel ignore content.
func (e *Elicitations) Resolve(requestID string, action acpgatev1.ElicitationAction, content *structpb.Struct) error {
	return e.pending.resolve(requestID, func(schema requestedSchema) (*acpgatev1.ElicitationDecision, error) {
		d := &acpgatev1.ElicitationDecision{Action: action, DecidedBy: acpgatev1.ElicitationDecider_ELICITATION_DECIDER_CLIENT, Reason: "a client answered"}
		switch action {
		case acpgatev1.ElicitationAction_ELICITATION_ACTION_ACCEPT:
			if err := schema.check(content); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrInvalidContent, err)
			}
			d.Content = content
		case acpgatev1.ElicitationAction_ELICITATION_ACTION_DECLINE, acpgatev1.ElicitationAction_ELICITATION_ACTION_CANCEL:
		default:
			return nil, fmt.Errorf("%w: the action must be accept, decline or cancel", ErrInvalidContent)
		}
		return d, nil
	})
}

// check holds content to the schema: every required property present,
// no property the schema does not name, each of its type (and enum).
func (r requestedSchema) check(content *structpb.Struct) error {
	fields := content.GetFields()
	for _, name := range r.Required {
		if _, ok := fields[name]; !ok {
			return fmt.Errorf("the required property %q is missing", name)
		}
	}
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		prop, ok := r.Properties[name]
		if !ok {
			return fmt.Errorf("the schema has no property %q", name)
		}
		v := fields[name]
		if !ofType(v, prop.Type) {
			return fmt.Errorf("property %q must be of type %s", name, prop.Type)
		}
		if len(prop.Enum) > 0 && !slices.Contains(prop.Enum, v.GetStringValue()) {
			return fmt.Errorf("property %q must be one of %q", name, prop.Enum)
		}
	}
	return nil
}

// ofType reports whether v is of the JSON Schema primitive type typ; an
// array is ACP's string array.
func ofType(v *structpb.Value, typ string) bool {
	switch k := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		return typ == "string"
	case *structpb.Value_BoolValue:
		return typ == "boolean"
	case *structpb.Value_NumberValue:
		return typ == "number" || (typ == "integer" && k.NumberValue == math.Trunc(k.NumberValue))
	case *structpb.Value_ListValue:
		if typ != "array" {
			return false
		}
		for _, item := range k.ListValue.GetValues() {
			if _, ok := item.GetKind().(*structpb.Value_StringValue); !ok {
				return false
			}
		}
		return true
	default:
		return false
	}
}

// Capabilities is what initialize advertises: form mode under ElicitAsk,
// since only then is somebody asked; nothing otherwise.
func (p ElicitationPolicy) Capabilities() *acpsdk.ElicitationCapabilities {
	if p.Mode != ElicitAsk {
		return nil
	}
	return &acpsdk.ElicitationCapabilities{Form: &acpsdk.ElicitationFormCapabilities{}}
}

// Serve answers an elicitation/create request that arrived during t (nil
// outside a turn) on the session sessionID, logging the decision to log.
func (e *Elicitations) Serve(ctx context.Context, t Turn, sessionID string, log *slog.Logger, params json.RawMessage) (any, *jsonrpc.ErrorObject) {
	var req elicitationRequest
	if err := json.Unmarshal(params, &req); err != nil {
		return nil, &jsonrpc.ErrorObject{Code: jsonrpc.CodeInvalidParams, Message: "elicitation/create params: " + err.Error()}
	}
	if req.Mode != "form" {
		return nil, &jsonrpc.ErrorObject{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("acpgate does not support elicitation mode %q: it advertised form mode only", req.Mode)}
	}
	var schema requestedSchema
	if err := json.Unmarshal(req.RequestedSchema, &schema); err != nil {
		return nil, &jsonrpc.ErrorObject{Code: jsonrpc.CodeInvalidParams, Message: "elicitation/create requestedSchema: " + err.Error()}
	}
	requestID := e.pending.mint()
	event := &acpgatev1.ElicitationRequest{RequestId: requestID, Message: req.Message, RequestedSchema: translate.ObjectStruct(req.RequestedSchema), ToolCallId: req.ToolCallID}
	if event.RequestedSchema == nil {
		event.RequestedSchema = &structpb.Struct{}
	}
	decision := e.decide(ctx, t, req.SessionID == sessionID, event, schema)
	if t != nil {
		decided := proto.Clone(event).(*acpgatev1.ElicitationRequest)
		decided.Decision = decision
		// A new event: under ask the undecided one has been emitted, and
		// an emitted event is never changed afterwards.
		emitElicitation(t, decided, e.policy.Mode != ElicitAsk)
	}
	trace.SpanFromContext(ctx).SetAttributes(AttrElicitation.String(decision.GetAction().String()))
	log.InfoContext(ctx, "answered an elicitation request", "request", requestID, "action", decision.GetAction().String(),
		"decided_by", decision.GetDecidedBy().String(), "reason", decision.GetReason())
	resp := elicitationResponse{Action: actionWire(decision.GetAction())}
	if decision.GetAction() == acpgatev1.ElicitationAction_ELICITATION_ACTION_ACCEPT {
		resp.Content = decision.GetContent().AsMap()
	}
	return resp, nil
}

// emitElicitation emits an elicitation event.
func emitElicitation(t Turn, r *acpgatev1.ElicitationRequest, splits bool) {
	t.EmitRequest(&acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_ElicitationRequested{ElicitationRequested: r}}, splits)
}

func actionWire(a acpgatev1.ElicitationAction) string {
	switch a {
	case acpgatev1.ElicitationAction_ELICITATION_ACTION_ACCEPT:
		return "accept"
	case acpgatev1.ElicitationAction_ELICITATION_ACTION_CANCEL:
		return "cancel"
	default:
		return "decline"
	}
}

// decide answers one request according to the policy; ownSession says
// the request names the session it arrived on.
func (e *Elicitations) decide(ctx context.Context, t Turn, ownSession bool, event *acpgatev1.ElicitationRequest, schema requestedSchema) *acpgatev1.ElicitationDecision {
	decline := func(by acpgatev1.ElicitationDecider, reason string) *acpgatev1.ElicitationDecision {
		return &acpgatev1.ElicitationDecision{Action: acpgatev1.ElicitationAction_ELICITATION_ACTION_DECLINE, DecidedBy: by, Reason: reason}
	}
	switch {
	case t == nil || !ownSession:
		return decline(acpgatev1.ElicitationDecider_ELICITATION_DECIDER_POLICY, "no turn of this session is running, so nobody can be asked")
	case t.CancelRequested():
		// Answered cancel, but only once the agent has been told, as for
		// permissions.
		awaitCancelSent(ctx, t)
		return cancelledElicitation()
	case e.policy.Mode != ElicitAsk:
		return decline(acpgatev1.ElicitationDecider_ELICITATION_DECIDER_POLICY, "the agent's elicitation policy is decline")
	}
	d, how := e.pending.wait(ctx, t, event.RequestId, schema, e.policy.Timeout, func() { emitElicitation(t, event, true) })
	switch how {
	case answered:
		return d
	case timedOut:
		return decline(acpgatev1.ElicitationDecider_ELICITATION_DECIDER_TIMEOUT, fmt.Sprintf("no client answered within %s; declined", e.policy.Timeout))
	case withdrawn:
		return &acpgatev1.ElicitationDecision{Action: acpgatev1.ElicitationAction_ELICITATION_ACTION_CANCEL, DecidedBy: acpgatev1.ElicitationDecider_ELICITATION_DECIDER_AGENT_WITHDREW,
			Reason: "the agent withdrew the request ($/cancel_request) before anyone answered it"}
	default:
		return cancelledElicitation()
	}
}

func cancelledElicitation() *acpgatev1.ElicitationDecision {
	return &acpgatev1.ElicitationDecision{Action: acpgatev1.ElicitationAction_ELICITATION_ACTION_CANCEL, DecidedBy: acpgatev1.ElicitationDecider_ELICITATION_DECIDER_CANCELLATION,
		Reason: "the turn was cancelled, which cancels every pending elicitation"}
}
