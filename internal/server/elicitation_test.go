package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

const strategySchema = `{"type":"object","properties":{"strategy":{"type":"string","enum":["conservative","balanced"]},"depth":{"type":"integer"},"dry":{"type":"boolean"}},"required":["strategy"]}`

func TestAnElicitationUnderTheDefaultPolicyIsDeclinedAndTheStreamSaysSo(t *testing.T) {
	h := start(t)
	events := oneShot(t, h, "test", "elicit "+strategySchema+"\nelicit_url")
	if got := last(events).GetOutcome().GetText(); got != "elicitation:declineelicitation-error:-32602:acpgate does not support elicitation mode \"url\": it advertised form mode only" {
		t.Errorf("the agent saw %q", got)
	}
	var decided *acpgatev1.ElicitationRequest
	for _, e := range events {
		if r := e.GetElicitationRequested(); r != nil {
			if decided != nil {
				t.Errorf("a second elicitation event under decline: %v", r)
			}
			decided = r
		}
	}
	if decided.GetDecision().GetAction() != acpgatev1.ElicitationAction_ELICITATION_ACTION_DECLINE ||
		decided.GetDecision().GetDecidedBy() != acpgatev1.ElicitationDecider_ELICITATION_DECIDER_POLICY ||
		decided.GetMessage() != "please answer" || decided.GetRequestedSchema().GetFields()["required"] == nil {
		t.Errorf("the decided event: %v", decided)
	}
}

// elicitationAsked starts a turn on a session of agent that elicits, and
// returns the session, the stream and the undecided request.
func elicitationAsked(t *testing.T, h *harness, agent string) (string, *acpgatev1.ElicitationRequest, func() []*acpgatev1.PromptEvent) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	s, err := h.client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: agent})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := h.client.Prompt(ctx, &acpgatev1.PromptRequest{SessionId: s.GetId(), Text: "elicit " + strategySchema})
	if err != nil {
		t.Fatal(err)
	}
	events := recvUntil(t, stream, func(e *acpgatev1.PromptEvent) bool { return e.GetElicitationRequested() != nil })
	r := last(events).GetElicitationRequested()
	if r.GetDecision() != nil {
		t.Fatalf("answered before anyone was asked: %v", r)
	}
	return s.GetId(), r, func() []*acpgatev1.PromptEvent {
		events = append(events, collect2(t, stream)...)
		checkInvariants(t, events)
		return events
	}
}

// recvUntil reads events up to the first that found accepts, which it
// returns last.
func recvUntil(t *testing.T, stream grpc.ServerStreamingClient[acpgatev1.PromptEvent], found func(*acpgatev1.PromptEvent) bool) []*acpgatev1.PromptEvent {
	t.Helper()
	var events []*acpgatev1.PromptEvent
	for {
		e, err := stream.Recv()
		if err != nil {
			t.Fatalf("after %d events: %v", len(events), err)
		}
		events = append(events, e)
		if found(e) {
			return events
		}
	}
}

func content(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAnAskedElicitationIsAnsweredWithContentCheckedAgainstItsSchema(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	session, r, rest := elicitationAsked(t, h, "elicit")
	accept := func(c map[string]any) error {
		_, err := h.client.ResolveElicitation(ctx, &acpgatev1.ResolveElicitationRequest{SessionId: session, RequestId: r.GetRequestId(),
			Action: acpgatev1.ElicitationAction_ELICITATION_ACTION_ACCEPT, Content: content(t, c)})
		return err
	}
	for _, bad := range []map[string]any{
		{"depth": 2},                                // the required property is missing
		{"strategy": "reckless"},                    // outside the enum
		{"strategy": "balanced", "depth": 2.5},      // not an integer
		{"strategy": "balanced", "dry": "yes"},      // not a boolean
		{"strategy": "balanced", "colour": "green"}, // not in the schema
	} {
		if err := accept(bad); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%v: %v", bad, err)
		}
	}
	if _, err := h.client.ResolveElicitation(ctx, &acpgatev1.ResolveElicitationRequest{SessionId: session, RequestId: r.GetRequestId()}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("no action: %v", err)
	}
	if err := accept(map[string]any{"strategy": "balanced", "depth": 3, "dry": true}); err != nil {
		t.Fatal(err)
	}
	if err := accept(map[string]any{"strategy": "balanced"}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("an answered request is stale: %v", err)
	}
	events := rest()
	if got := last(events).GetOutcome().GetText(); got != `elicitation:accept:{"depth":3,"dry":true,"strategy":"balanced"}` {
		t.Errorf("the agent saw %q", got)
	}
	d := lastDecision(events)
	if d.GetDecidedBy() != acpgatev1.ElicitationDecider_ELICITATION_DECIDER_CLIENT || d.GetContent().GetFields()["strategy"].GetStringValue() != "balanced" {
		t.Errorf("the decision: %v", d)
	}
}

func TestAnElicitationNobodyAnswersIsDeclinedAtItsTimeout(t *testing.T) {
	h := start(t)
	_, _, rest := elicitationAsked(t, h, "elicit-brief")
	events := rest()
	if got := last(events).GetOutcome().GetText(); got != "elicitation:decline" {
		t.Errorf("the agent saw %q", got)
	}
	d := lastDecision(events)
	if d.GetDecidedBy() != acpgatev1.ElicitationDecider_ELICITATION_DECIDER_TIMEOUT || !strings.Contains(d.GetReason(), "200ms") {
		t.Errorf("the decision: %v", d)
	}
}

func TestCancellingTheTurnCancelsItsPendingElicitation(t *testing.T) {
	h := start(t)
	session, _, rest := elicitationAsked(t, h, "elicit")
	if _, err := h.client.Cancel(context.Background(), &acpgatev1.CancelRequest{SessionId: session}); err != nil {
		t.Fatal(err)
	}
	events := rest()
	if !last(events).GetError().GetHarness().GetCancelled() {
		t.Errorf("terminal %v", last(events))
	}
	for _, e := range events {
		if d := e.GetElicitationRequested().GetDecision(); d != nil && d.GetAction() != acpgatev1.ElicitationAction_ELICITATION_ACTION_CANCEL {
			t.Errorf("the decision: %v", d)
		}
	}
}

// lastDecision is the decision of the stream's last elicitation event.
func lastDecision(events []*acpgatev1.PromptEvent) *acpgatev1.ElicitationDecision {
	var d *acpgatev1.ElicitationDecision
	for _, e := range events {
		if r := e.GetElicitationRequested(); r != nil {
			d = r.GetDecision()
		}
	}
	return d
}
