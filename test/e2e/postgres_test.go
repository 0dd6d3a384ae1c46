package e2e

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/testpg"
)

// TestAGatewayOnPostgresAnswersForItsTurnsAfterARestart runs one gateway
// on store: postgres, with no cluster settings: it is a single gateway
// whose turns live in PostgreSQL, and they outlive it as with sqlite.
func TestAGatewayOnPostgresAnswersForItsTurnsAfterARestart(t *testing.T) {
	ctx := context.Background()
	cfg, prompts := durableConfig(t, fmt.Sprintf("store: postgres\npostgres:\n  dsn: %q\n", testpg.Start(t)))
	s := serve(t, "--config", cfg)
	client := acpgatev1.NewAgentGatewayClient(dialTest(t, s.addr))

	// One turn ends; another is running when the gateway is killed.
	finished, err := client.Prompt(ctx, &acpgatev1.PromptRequest{Agent: "test", Text: "chunk a\nchunk b\nstop end_turn", RequestId: "pg-done"})
	if err != nil {
		t.Fatal(err)
	}
	done := drain(t, finished)
	checkSeqs(t, done, 1)
	seen := killMidTurn(t, s, client, &acpgatev1.PromptRequest{Agent: "test", Text: "chunk c\nhang", RequestId: "pg-hung"}, "c")

	again := serve(t, "--config", cfg)
	client = acpgatev1.NewAgentGatewayClient(dialTest(t, again.addr))
	doneID, hungID := done[0].GetStarted().GetTurnId(), seen[0].GetStarted().GetTurnId()
	got, err := client.GetTurn(ctx, &acpgatev1.GetTurnRequest{TurnId: doneID})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetState() != acpgatev1.TurnState_TURN_STATE_ENDED || !proto.Equal(got.GetTerminal(), done[len(done)-1]) {
		t.Errorf("after the restart GetTurn of the ended turn says %v; its stream ended with %v", got, done[len(done)-1])
	}
	watch, err := client.WatchTurn(ctx, &acpgatev1.WatchTurnRequest{TurnId: doneID})
	if err != nil {
		t.Fatal(err)
	}
	replay := drain(t, watch)
	if len(replay) != len(done) {
		t.Fatalf("the replay has %d events, the stream carried %d", len(replay), len(done))
	}
	for i := range done {
		if !proto.Equal(replay[i], done[i]) {
			t.Errorf("replayed event %d is %v, the stream carried %v", i+1, replay[i], done[i])
		}
	}
	got, err = client.GetTurn(ctx, &acpgatev1.GetTurnRequest{TurnId: hungID})
	if err != nil {
		t.Fatal(err)
	}
	if e := got.GetTerminal().GetError(); got.GetState() != acpgatev1.TurnState_TURN_STATE_ENDED ||
		e.GetTransport().GetReason() != acpgatev1.TransportReason_TRANSPORT_REASON_GATEWAY_STOPPED || !e.GetRetryable() {
		t.Errorf("after the restart GetTurn of the turn that was running says %v, want ended with GATEWAY_STOPPED", got)
	}
	// The request id still means "run once".
	resubmitted, err := client.Prompt(ctx, &acpgatev1.PromptRequest{Agent: "test", Text: "chunk a\nchunk b\nstop end_turn", RequestId: "pg-done"})
	if err != nil {
		t.Fatal(err)
	}
	if events := drain(t, resubmitted); events[0].GetStarted().GetTurnId() != doneID {
		t.Errorf("the resubmission started turn %s, want %s", events[0].GetStarted().GetTurnId(), doneID)
	}
	if n := promptsSeen(t, prompts); n != 2 {
		t.Errorf("the agent was prompted %d times, want 2 (the resubmission attaches)", n)
	}
}
