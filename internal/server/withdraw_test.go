package server_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

func TestAPermissionRequestTheAgentWithdrawsIsVoidAndTheStreamSaysSo(t *testing.T) {
	h := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := h.client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "test"})
	if err != nil {
		t.Fatal(err)
	}
	events := collectOK(t, h, s.GetId(), "withdraw_after 200\npermission t1\nstop end_turn")
	if got := last(events).GetOutcome().GetText(); got != "permission-error:-32800:request cancelled: the agent withdrew the request ($/cancel_request)" {
		t.Errorf("the agent was answered %q", got)
	}
	var asked, decided *acpgatev1.PermissionRequest
	for _, e := range events {
		if p := e.GetPermissionRequested(); p != nil && p.GetDecision() == nil {
			asked = p
		} else if p != nil {
			decided = p
		}
	}
	if asked == nil || decided.GetDecision().GetDecidedBy() != acpgatev1.PermissionDecider_PERMISSION_DECIDER_AGENT_WITHDREW || !decided.GetDecision().GetCancelled() {
		t.Fatalf("asked %v, then %v", asked, decided)
	}
	_, err = h.client.ResolvePermission(ctx, &acpgatev1.ResolvePermissionRequest{SessionId: s.GetId(), RequestId: asked.GetRequestId(), OptionId: "allow"})
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("a withdrawn request is stale: %v", err)
	}
}

func TestAnElicitationTheAgentWithdrawsIsVoidAndTheStreamSaysSo(t *testing.T) {
	h := start(t)
	events := oneShot(t, h, "elicit", "withdraw_after 200\nelicit "+strategySchema)
	if got := last(events).GetOutcome().GetText(); got != "elicitation-error:-32800:request cancelled: the agent withdrew the request ($/cancel_request)" {
		t.Errorf("the agent was answered %q", got)
	}
	if d := lastDecision(events); d.GetDecidedBy() != acpgatev1.ElicitationDecider_ELICITATION_DECIDER_AGENT_WITHDREW || d.GetAction() != acpgatev1.ElicitationAction_ELICITATION_ACTION_CANCEL {
		t.Errorf("the decision: %v", d)
	}
}
