package e2e

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// The log at INFO has one line per RPC (the audit record), and no answer
// text: a refusal's partial output stays in its terminal and the turn's
// record, out of the gateway's log.
func TestTheLogHasOneLinePerCallAndNoAnswerText(t *testing.T) {
	s := serve(t)
	client, _ := s.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := client.ListAgents(ctx, &acpgatev1.ListAgentsRequest{}); err != nil {
		t.Fatal(err)
	}
	stream, err := client.Prompt(ctx, &acpgatev1.PromptRequest{Agent: "demo", Text: "please refuse"})
	if err != nil {
		t.Fatal(err)
	}
	var partial string
	for {
		ev, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if e := ev.GetError(); e != nil {
			partial = e.GetPartial().GetText()
		}
	}
	if len(partial) < 20 {
		t.Fatalf("the demo agent's refusal carried no partial output to look for (%q)", partial)
	}
	waitAudit(t, s, "rpc=/acpgate.v1.AgentGateway/Prompt")
	info := 0
	for line := range strings.SplitSeq(s.log(), "\n") {
		if !strings.Contains(line, "level=INFO") {
			continue
		}
		if strings.Contains(line, "AgentGateway/ListAgents") {
			info++
		}
		if strings.Contains(line, partial) || strings.Contains(line, partial[:20]) {
			t.Errorf("an INFO line holds the agent's answer: %s", line)
		}
	}
	if info != 1 {
		t.Errorf("ListAgents has %d lines at INFO, want its audit record alone:\n%s", info, s.log())
	}
}
