package main

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// The tests in this file check, against the real binary, what ACP agents
// offer beyond text turns: capability-gated prompt content, usage and cost,
// _meta, elicitation and the agent's cancellation of its own requests.

// featuresConfig configures a text-only agent whose prompts are counted in
// the returned file, and a test agent of the default capabilities.
func featuresConfig(t *testing.T) (config, prompts string) {
	t.Helper()
	prompts = filepath.Join(t.TempDir(), "prompts")
	return writeConfig(t, fmt.Sprintf(`
shutdown_grace: 3s
agents:
  - name: textonly
    command: "${ACPGATE_E2E_AGENT}"
    args: [--unique-sessions, --prompt-capabilities, none, --count-prompts, %q]
  - name: test
    command: "${ACPGATE_E2E_AGENT}"
    args: [--unique-sessions]
`, prompts)), prompts
}

// featuresGateway serves featuresConfig and returns a client of it, a
// context bounding the test's calls, and the text-only agent's prompt count
// file.
func featuresGateway(t *testing.T) (acpgatev1.AgentGatewayClient, context.Context, string) {
	t.Helper()
	cfg, prompts := featuresConfig(t)
	s := serve(t, "--config", cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return acpgatev1.NewAgentGatewayClient(dialTest(t, s.addr)), ctx, prompts
}

func TestTheBinaryRefusesAnImageToATextOnlyAgentWithoutPromptingIt(t *testing.T) {
	client, ctx, prompts := featuresGateway(t)
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
	if n := promptsSeen(t, prompts); n != 0 {
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
