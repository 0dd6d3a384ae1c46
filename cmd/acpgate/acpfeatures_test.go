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

func TestTheBinaryRefusesAnImageToATextOnlyAgentWithoutPromptingIt(t *testing.T) {
	cfg, prompts := featuresConfig(t)
	s := serve(t, "--config", cfg)
	client := acpgatev1.NewAgentGatewayClient(dialTest(t, s.addr))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
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
