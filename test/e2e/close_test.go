package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// recordedMessage is a line of the test agent's --record-meta file: a
// message the gateway sent it.
type recordedMessage struct {
	Method string            `json:"method"`
	Meta   map[string]string `json:"meta"`
}

// recorded reads the messages the test agent recorded, in order; none
// when it has recorded nothing yet.
func recorded(t *testing.T, path string) []recordedMessage {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []recordedMessage
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var m recordedMessage
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, m)
	}
	return out
}

// methodsSent is the methods the test agent recorded, in order.
func methodsSent(t *testing.T, path string) []string {
	t.Helper()
	var methods []string
	for _, m := range recorded(t, path) {
		methods = append(methods, m.Method)
	}
	return methods
}

func TestCloseSessionAsksAnAgentThatOffersSessionCloseAndAShutdownDoesNot(t *testing.T) {
	dir := t.TempDir()
	closing, plain := filepath.Join(dir, "closing"), filepath.Join(dir, "plain")
	cfg := writeConfig(t, fmt.Sprintf(`
shutdown_grace: 5s
agents:
  - name: closing
    command: "${ACPGATE_E2E_AGENT}"
    args: [--unique-sessions, --close-session, --record-meta, %q]
  - name: plain
    command: "${ACPGATE_E2E_AGENT}"
    args: [--unique-sessions, --record-meta, %q]
`, closing, plain))
	s := serve(t, "--config", cfg)
	client := acpgatev1.NewAgentGatewayClient(dialTest(t, s.addr))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, agent := range []string{"closing", "plain"} {
		sess, err := client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: agent})
		if err != nil {
			t.Fatalf("%s: CreateSession: %v", agent, err)
		}
		stream, err := client.Prompt(ctx, &acpgatev1.PromptRequest{SessionId: sess.GetId(), Text: "chunk hi\nstop end_turn"})
		if err != nil {
			t.Fatal(err)
		}
		if last := drain(t, stream); last[len(last)-1].GetOutcome() == nil {
			t.Fatalf("%s: the turn ended with %v", agent, last[len(last)-1])
		}
		if _, err := client.CloseSession(ctx, &acpgatev1.CloseSessionRequest{SessionId: sess.GetId()}); err != nil {
			t.Fatalf("%s: CloseSession: %v", agent, err)
		}
	}
	if got := methodsSent(t, closing); len(got) == 0 || got[len(got)-1] != "session/close" {
		t.Errorf("the agent offering session/close got %v; want session/close last", got)
	}
	if got := methodsSent(t, plain); strings.Contains(strings.Join(got, " "), "session/close") {
		t.Errorf("the agent not offering session/close got %v", got)
	}

	// A session still open when the gateway stops may be re-opened later:
	// its agent is not asked to close it.
	if err := os.Remove(closing); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "closing"}); err != nil {
		t.Fatal(err)
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(15 * time.Second):
		t.Fatal("the gateway did not stop")
	}
	got := methodsSent(t, closing)
	if len(got) == 0 || strings.Contains(strings.Join(got, " "), "session/close") {
		t.Errorf("at shutdown the agent got %v; want its session opened and never closed", got)
	}
}
