package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// sandboxConfig runs the test agent confined ("boxed"), and unconfined
// with a credential of its own ("keyed").
const sandboxConfig = `
shutdown_grace: 5s
agents:
  - name: boxed
    command: "${ACPGATE_E2E_AGENT}"
    args: [--unique-sessions]
    sandbox: {enabled: true, required: true}
  - name: keyed
    command: "${ACPGATE_E2E_AGENT}"
    args: [--unique-sessions]
    env: {KEYED_API_KEY: keyed-agent-secret}
`

func TestASandboxedAgentReadsAndWritesItsWorkspaceAndNothingOutsideItNotEvenThroughASymlink(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	if err := os.WriteFile(secret, []byte("outside-secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := serve(t, "--config", writeConfig(t, sandboxConfig))
	client, _ := s.client(t)
	sess, err := client.CreateSession(bounded(t), &acpgatev1.CreateSessionRequest{Agent: "boxed"})
	if err != nil {
		t.Fatalf("%v\n%s", err, s.log())
	}
	ws := sess.GetCwd()
	if err := os.Symlink(secret, filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	said := turnChunks(t, client, sess.GetId(), []string{
		"oswrite " + filepath.Join(ws, "inside.txt") + " written inside",
		"osread " + filepath.Join(ws, "inside.txt"),
		"osread " + secret,
		"oswrite " + filepath.Join(outside, "planted.txt") + " x",
		"osread " + filepath.Join(ws, "link"),
	})
	want := []string{"oswrite:ok", "osread:written inside", "osread-error:", "oswrite-error:", "osread-error:"}
	if len(said) != len(want) {
		t.Fatalf("the agent said %q, want one line for each of %q\n%s", said, want, s.log())
	}
	for i, w := range want {
		if !strings.HasPrefix(said[i], w) || strings.HasSuffix(w, "error:") && !strings.Contains(said[i], "permission denied") {
			t.Errorf("step %d: the agent said %q, want %q (permission denied for an error)", i, said[i], w)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "planted.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the sandboxed agent created a file outside its workspace (%v)", err)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "inside.txt")); err != nil || string(b) != "written inside" {
		t.Errorf("the file written inside the workspace holds %q (%v)", b, err)
	}
}

func TestASandboxedAgentCannotReadTheGatewaysEnvironmentNorAnotherAgents(t *testing.T) {
	s := serve(t, "--config", writeConfig(t, sandboxConfig))
	client, _ := s.client(t)
	// The other agent, holding a credential only it was given.
	keyed, err := client.CreateSession(bounded(t), &acpgatev1.CreateSessionRequest{Agent: "keyed"})
	if err != nil {
		t.Fatalf("%v\n%s", err, s.log())
	}
	// --unique-sessions ids are sess-<agent pid>-<n>.
	keyedPid := hostPid(t, strings.Split(keyed.GetId(), "-")[1])
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", keyedPid)); err != nil || !strings.Contains(string(b), "keyed-agent-secret") {
		t.Fatalf("pid %d is not the keyed agent (%v)", keyedPid, err)
	}
	boxed, err := client.CreateSession(bounded(t), &acpgatev1.CreateSessionRequest{Agent: "boxed"})
	if err != nil {
		t.Fatal(err)
	}
	targets := []string{
		fmt.Sprintf("/proc/%d/environ", s.cmd.Process.Pid),
		fmt.Sprintf("/proc/%d/mem", s.cmd.Process.Pid),
		fmt.Sprintf("/proc/%d/environ", keyedPid),
	}
	var script []string
	for _, p := range targets {
		script = append(script, "osread "+p)
	}
	said := turnChunks(t, client, boxed.GetId(), script)
	if len(said) != len(targets) {
		t.Fatalf("the agent said %q, want one line for each of %q", said, targets)
	}
	for i, line := range said {
		if !strings.HasPrefix(line, "osread-error:") || strings.Contains(line, "secret") {
			t.Errorf("reading %s, the sandboxed agent got %q, want an error", targets[i], line)
		}
	}
}

// turnChunks runs the script, one directive a line, as a turn of the
// session and returns the text of each chunk the agent sent (asked for
// one event per chunk: each is one directive's report).
func turnChunks(t *testing.T, client acpgatev1.AgentGatewayClient, session string, script []string) []string {
	t.Helper()
	stream, err := client.Prompt(bounded(t), &acpgatev1.PromptRequest{SessionId: session, Text: strings.Join(script, "\n") + "\nstop end_turn", ChunkDelivery: acpgatev1.ChunkDelivery_CHUNK_DELIVERY_EACH})
	if err != nil {
		t.Fatal(err)
	}
	var said []string
	for {
		e, err := stream.Recv()
		if err != nil {
			t.Fatalf("the stream ended with %v before its terminal", err)
		}
		if text := e.GetAgentMessageChunk().GetText(); text != "" {
			said = append(said, text)
		}
		if e.GetOutcome() != nil {
			return said
		}
		if e.GetError() != nil {
			t.Fatalf("terminal %v", e)
		}
	}
}
