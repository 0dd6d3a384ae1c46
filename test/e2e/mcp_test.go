package e2e

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// A session opened with a caller's MCP servers is not recorded: their
// headers may be credentials, which the gateway never stores, and a
// session re-opened without them would lose its servers without a word.
// After a restart the caller re-opens the conversation itself, naming
// the servers again; nothing of them is on disk but the agent's own. A
// kept session re-opened with caller servers is kept no longer.
func TestASessionWithCallerMCPServersIsNotKeptAcrossARestartAndIsReopenedWithTheServersNamedAgain(t *testing.T) {
	ctx := testCtx(t)
	stateDir, record := t.TempDir(), filepath.Join(t.TempDir(), "record")
	cfg := writeConfig(t, fmt.Sprintf(`
state_dir: %q
shutdown_grace: 5s
mcp:
  allowed_url_prefixes: ["https://mcp.example.com/"]
agents:
  - name: test
    command: "${ACPGATE_E2E_AGENT}"
    args: [--unique-sessions, --sessions-dir, %q, --resume-session, --mcp-capabilities, http, --record-params, %q]
    workspace: %q
`, stateDir, t.TempDir(), record, t.TempDir()))
	const secret = "Bearer e2e-mcp-secret-93b7"
	servers := []*acpgatev1.McpServer{{Server: &acpgatev1.McpServer_Http{Http: &acpgatev1.McpRemoteServer{
		Name: "docs", Url: "https://mcp.example.com/docs", Headers: []*acpgatev1.McpHeader{{Name: "Authorization", Value: secret}}}}}}

	first := serve(t, "--config", cfg, "--log-level", "debug")
	client := acpgatev1.NewAgentGatewayClient(dialTest(t, first.addr))
	sess, err := client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "test", McpServers: servers})
	if err != nil {
		t.Fatal(err)
	}
	if got := chunkTexts(promptEvents(ctx, t, client, sess.GetId(), "chunk one")); got != "one" {
		t.Fatalf("the first turn said %q", got)
	}
	plain := sessionWithATurn(ctx, t, client) // recorded: no caller MCP servers
	first.stop(t, syscall.SIGTERM)

	again := serve(t, "--config", cfg, "--log-level", "debug")
	client = acpgatev1.NewAgentGatewayClient(dialTest(t, again.addr))
	list, err := client.ListSessions(ctx, &acpgatev1.ListSessionsRequest{})
	if err != nil || len(list.GetSessions()) != 1 || list.GetSessions()[0].GetId() != plain.GetId() {
		t.Fatalf("after the restart ListSessions = %v, %v; want only the session without caller MCP servers kept", list, err)
	}
	// Re-opening the kept session with caller MCP servers stops keeping it.
	if _, err := client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "test", LoadSessionId: plain.GetId(), McpServers: servers}); err != nil {
		t.Fatal(err)
	}
	reopened, err := client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "test", LoadSessionId: sess.GetAcpSessionId(), McpServers: servers})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := chunkTexts(promptEvents(ctx, t, client, reopened.GetId(), "history")), `history via session/resume: "chunk one"`; got != want {
		t.Errorf("the re-opened agent answered %q, want %q", got, want)
	}
	data, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	var resumed string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, `{"method":"session/resume"`) {
			resumed = line
		}
	}
	if !strings.Contains(resumed, `"url":"https://mcp.example.com/docs"`) || !strings.Contains(resumed, secret) {
		t.Errorf("session/resume did not carry the caller's server: %s", resumed)
	}
	again.stop(t, syscall.SIGTERM)

	third := serve(t, "--config", cfg, "--log-level", "debug")
	client = acpgatev1.NewAgentGatewayClient(dialTest(t, third.addr))
	if list, err := client.ListSessions(ctx, &acpgatev1.ListSessionsRequest{}); err != nil || len(list.GetSessions()) != 0 {
		t.Errorf("after the second restart ListSessions = %v, %v; want nothing kept", list, err)
	}
	third.stop(t, syscall.SIGTERM)

	for name, text := range map[string]string{"the first gateway's log": first.log(), "the second gateway's log": again.log()} {
		if strings.Contains(text, "e2e-mcp-secret") {
			t.Errorf("%s holds the header's value:\n%s", name, text)
		}
	}
	_ = filepath.WalkDir(stateDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if b, _ := os.ReadFile(path); bytes.Contains(b, []byte("e2e-mcp-secret")) || bytes.Contains(b, []byte("mcp.example.com/docs")) {
			t.Errorf("the gateway's state %s holds the caller's MCP server", path)
		}
		return nil
	})
}
