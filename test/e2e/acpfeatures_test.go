package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// The tests in this file check, against the real binary, what ACP agents
// offer beyond text turns: capability-gated prompt content, usage and cost,
// _meta, elicitation and the agent's cancellation of its own requests.

// featuresConfig configures a text-only agent whose prompts are counted in
// dir/prompts, and a test agent of the default capabilities that records the
// _meta it receives in dir/meta.jsonl.
func featuresConfig(t *testing.T) (config, dir string) {
	t.Helper()
	dir = t.TempDir()
	return writeConfig(t, fmt.Sprintf(`
shutdown_grace: 3s
agents:
  - name: textonly
    command: "${ACPGATE_E2E_AGENT}"
    args: [--unique-sessions, --prompt-capabilities, none, --count-prompts, %q]
  - name: test
    command: "${ACPGATE_E2E_AGENT}"
    args: [--unique-sessions, --record-meta, %q]
    elicitation: ask
    elicitation_timeout: 30s
`, filepath.Join(dir, "prompts"), filepath.Join(dir, "meta.jsonl"))), dir
}

// featuresGateway serves featuresConfig and returns a client of it, a
// context bounding the test's calls, and the directory of the agents'
// files (see featuresConfig).
func featuresGateway(t *testing.T) (acpgatev1.AgentGatewayClient, context.Context, string) {
	t.Helper()
	cfg, dir := featuresConfig(t)
	s := serve(t, "--config", cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return acpgatev1.NewAgentGatewayClient(dialTest(t, s.addr)), ctx, dir
}

func TestTheBinaryRefusesAnImageToATextOnlyAgentWithoutPromptingIt(t *testing.T) {
	client, ctx, dir := featuresGateway(t)
	stream, err := client.Prompt(ctx, &acpgatev1.PromptRequest{Agent: "textonly", Text: "chunk hi", Prompt: []*acpgatev1.ContentBlock{
		{Block: &acpgatev1.ContentBlock_Image{Image: &acpgatev1.ImageContent{Data: "aGk=", MimeType: "image/png"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	events := drain(t, stream)
	checkSeqs(t, events, 1)
	e := events[len(events)-1].GetError()
	if e.GetCapabilityNotSupported().GetPrimitive() != "promptCapabilities.image" || e.GetRetryable() {
		t.Fatalf("terminal: %v", events[len(events)-1])
	}
	if n := promptsSeen(t, filepath.Join(dir, "prompts")); n != 0 {
		t.Errorf("the agent was prompted %d times", n)
	}
}

func TestTheBinaryReportsCostPerTurnAndCumulativelyOnTheSession(t *testing.T) {
	client, ctx, _ := featuresGateway(t)
	sess, err := client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "test"})
	if err != nil {
		t.Fatal(err)
	}
	for _, script := range []string{"usage 2000 10 0.5 EUR\nstop_usage end_turn 3 4", "usage 2000 20 1.5 EUR\nstop_usage end_turn 5 6"} {
		stream, err := client.Prompt(ctx, &acpgatev1.PromptRequest{SessionId: sess.GetId(), Text: script})
		if err != nil {
			t.Fatal(err)
		}
		events := drain(t, stream)
		checkSeqs(t, events, 1)
		if events[1].GetUsage().GetCostCurrency() != "EUR" || events[len(events)-1].GetOutcome().GetUsage().GetCostAmount() == 0 {
			t.Fatalf("events: %v", events)
		}
	}
	got, err := client.GetSession(ctx, &acpgatev1.GetSessionRequest{SessionId: sess.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if u := got.GetUsage(); u.GetTotalTokens() != 18 || u.GetCostAmount() != 1.5 || u.GetContextUsed() != 20 {
		t.Errorf("the session's usage: %v", u)
	}
}

func TestTheBinaryForwardsACallersMetaAndReturnsTheAgents(t *testing.T) {
	client, ctx, dir := featuresGateway(t)
	stream, err := client.Prompt(ctx, &acpgatev1.PromptRequest{Agent: "test", Text: "chunk_meta example.com/k=v hi\nstop_meta end_turn example.com/done=yes",
		Meta: map[string]string{"example.com/ticket": "T-9"}})
	if err != nil {
		t.Fatal(err)
	}
	events := drain(t, stream)
	checkSeqs(t, events, 1)
	if events[1].GetMeta().GetFields()["example.com/k"].GetStringValue() != "v" ||
		events[len(events)-1].GetOutcome().GetMeta().GetFields()["example.com/done"].GetStringValue() != "yes" {
		t.Errorf("events: %v", events)
	}
	recorded, err := os.ReadFile(filepath.Join(dir, "meta.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(recorded), `"method":"session/prompt","meta":{"example.com/ticket":"T-9"}`) {
		t.Errorf("the agent received: %s", recorded)
	}
	refused, err := client.Prompt(ctx, &acpgatev1.PromptRequest{Agent: "test", Text: "chunk hi", Meta: map[string]string{"traceparent": "00-x"}})
	if err == nil {
		_, err = refused.Recv()
	}
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("a caller's traceparent: %v", err)
	}
}

func TestTheBinaryAsksAnElicitationAndDeliversTheClientsAnswer(t *testing.T) {
	client, ctx, _ := featuresGateway(t)
	sess, err := client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "test"})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := client.Prompt(ctx, &acpgatev1.PromptRequest{SessionId: sess.GetId(),
		Text: `elicit {"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`})
	if err != nil {
		t.Fatal(err)
	}
	var events []*acpgatev1.PromptEvent
	for {
		e, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
		if r := e.GetElicitationRequested(); r != nil && r.GetDecision() == nil {
			answer, err := structpb.NewStruct(map[string]any{"name": "Ada"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := client.ResolveElicitation(ctx, &acpgatev1.ResolveElicitationRequest{SessionId: sess.GetId(), RequestId: r.GetRequestId(),
				Action: acpgatev1.ElicitationAction_ELICITATION_ACTION_ACCEPT, Content: answer}); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	events = append(events, drain(t, stream)...)
	checkSeqs(t, events, 1)
	if got := events[len(events)-1].GetOutcome().GetText(); got != `elicitation:accept:{"name":"Ada"}` {
		t.Errorf("the agent saw %q", got)
	}
}

func TestTheBinaryVoidsAnElicitationTheAgentWithdraws(t *testing.T) {
	client, ctx, _ := featuresGateway(t)
	stream, err := client.Prompt(ctx, &acpgatev1.PromptRequest{Agent: "test",
		Text: "withdraw_after 100\n" + `elicit {"type":"object","properties":{"name":{"type":"string"}}}`})
	if err != nil {
		t.Fatal(err)
	}
	events := drain(t, stream)
	checkSeqs(t, events, 1)
	var decisions []string
	for _, e := range events {
		if r := e.GetElicitationRequested(); r != nil {
			decisions = append(decisions, r.GetDecision().GetDecidedBy().String())
		}
	}
	if len(decisions) != 2 || decisions[0] != "ELICITATION_DECIDER_UNSPECIFIED" || decisions[1] != "ELICITATION_DECIDER_AGENT_WITHDREW" {
		t.Errorf("elicitation events: %v", decisions)
	}
	if got := events[len(events)-1].GetOutcome().GetText(); !strings.HasPrefix(got, "elicitation-error:-32800:") {
		t.Errorf("the agent was answered %q", got)
	}
}
