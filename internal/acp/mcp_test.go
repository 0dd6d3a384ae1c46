package acp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/acpgate/acpgate/internal/acp"
)

// The examples of ACP's session setup documentation (docs/protocol/v1/
// session-setup.mdx, "MCP Servers"), which the servers the gateway sends
// must match field for field.
const (
	schemaStdioExample = `{"name":"filesystem","command":"/path/to/mcp-server","args":["--stdio"],"env":[{"name":"API_KEY","value":"secret123"}]}`
	schemaHTTPExample  = `{"type":"http","name":"api-server","url":"https://api.example.com/mcp","headers":[{"name":"Authorization","value":"Bearer token123"},{"name":"Content-Type","value":"application/json"}]}`
	schemaSSEExample   = `{"type":"sse","name":"event-stream","url":"https://events.example.com/mcp","headers":[{"name":"X-API-Key","value":"apikey456"}]}`
)

func TestMCPServersAreSentInTheSchemasShape(t *testing.T) {
	for _, tc := range []struct {
		name   string
		server acpsdk.McpServer
		want   string
	}{
		{"stdio", acp.MCPStdio("filesystem", "/path/to/mcp-server", []string{"--stdio"}, map[string]string{"API_KEY": "secret123"}), schemaStdioExample},
		{"http", acp.MCPRemote("http", "api-server", "https://api.example.com/mcp", []acpsdk.HttpHeader{
			{Name: "Authorization", Value: "Bearer token123"}, {Name: "Content-Type", Value: "application/json"}}), schemaHTTPExample},
		{"sse", acp.MCPRemote("sse", "event-stream", "https://events.example.com/mcp", []acpsdk.HttpHeader{{Name: "X-API-Key", Value: "apikey456"}}), schemaSSEExample},
		// Without arguments, environment or headers the arrays are still
		// there: the schema requires them.
		{"stdio bare", acp.MCPStdio("f", "/bin/f", nil, nil), `{"name":"f","command":"/bin/f","args":[],"env":[]}`},
		{"http bare", acp.MCPRemote("http", "h", "https://h/", nil), `{"type":"http","name":"h","url":"https://h/","headers":[]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := json.Marshal(tc.server)
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, got, []byte(tc.want)) {
				t.Errorf("sent %s\nwant %s", got, tc.want)
			}
		})
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

// recorded reads the --record-params file: each message's method and
// params, in the order the agent received them.
func recorded(t *testing.T, path string) []recordedMessage {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []recordedMessage
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m recordedMessage
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("record %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

type recordedMessage struct {
	Method string          `json:"method"`
	ID     json.RawMessage `json:"id"`
	Params json.RawMessage `json:"params"`
}

// mcpSent is the mcpServers of the recorded message of method.
func mcpSent(t *testing.T, path, method string) string {
	t.Helper()
	for _, m := range recorded(t, path) {
		if m.Method != method {
			continue
		}
		var p struct {
			MCPServers json.RawMessage `json:"mcpServers"`
		}
		if err := json.Unmarshal(m.Params, &p); err != nil {
			t.Fatal(err)
		}
		return string(p.MCPServers)
	}
	t.Fatalf("the agent received no %s", method)
	return ""
}

func TestACallersMCPServersFollowTheConfiguredOnesInSessionNew(t *testing.T) {
	record := filepath.Join(t.TempDir(), "record")
	cfg := agentConfig("--mcp-capabilities", "http,sse", "--record-params", record)
	cfg.MCPServers = []acpsdk.McpServer{acp.MCPStdio("files", "/usr/bin/mcp-files", nil, nil)}
	caller := []acpsdk.McpServer{
		acp.MCPRemote("http", "docs", "https://mcp.example.com/docs", []acpsdk.HttpHeader{{Name: "Authorization", Value: "Bearer s3cret"}}),
		acp.MCPRemote("sse", "events", "https://mcp.example.com/events", nil),
	}
	s, err := acp.Open(context.Background(), cfg, acp.OpenOptions{Cwd: t.TempDir(), MCPServers: caller})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want, _ := json.Marshal(append(cfg.MCPServers, caller...))
	if got := mcpSent(t, record, "session/new"); !jsonEqual(t, []byte(got), want) {
		t.Errorf("session/new carried mcpServers %s\nwant %s", got, want)
	}
}

func TestAnMCPTransportTheAgentDidNotAdvertiseFailsTheOpenBeforeSessionNew(t *testing.T) {
	for _, tc := range []struct{ flags, transport, primitive string }{
		{"", "http", acp.PrimitiveMCPHTTP},
		{"http", "sse", acp.PrimitiveMCPSSE},
	} {
		t.Run(tc.transport, func(t *testing.T) {
			record := filepath.Join(t.TempDir(), "record")
			cfg := agentConfig("--mcp-capabilities", tc.flags, "--record-params", record)
			caller := []acpsdk.McpServer{
				acp.MCPStdio("local", "/bin/local", nil, nil),
				acp.MCPRemote(tc.transport, "remote", "https://mcp.example.com/r", nil),
			}
			_, err := acp.Open(context.Background(), cfg, acp.OpenOptions{Cwd: t.TempDir(), MCPServers: caller})
			var e *acp.Error
			if !errors.As(err, &e) || e.Proto.GetCapabilityNotSupported().GetPrimitive() != tc.primitive {
				t.Fatalf("Open: %v, want capability_not_supported %s", err, tc.primitive)
			}
			contains(t, e.Proto.GetMessage(), "over "+tc.transport, `mcp_servers[1] "remote"`, tc.primitive)
			if e.Info == nil || e.Info.ProtocolVersion != acp.ProtocolVersion {
				t.Errorf("the error does not carry what the agent said at initialize: %+v", e.Info)
			}
			for _, m := range recorded(t, record) {
				if m.Method != "initialize" {
					t.Errorf("the agent received %s; only initialize was due", m.Method)
				}
			}
		})
	}
}

func TestACallersMCPServersGoToSessionResumeWhenASessionIsReopened(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(t.TempDir(), "record")
	cfg := agentConfig("--sessions-dir", dir, "--resume-session", "--mcp-capabilities", "http", "--record-params", record)
	first := open(t, cfg)
	id := first.ID()
	first.Close()
	caller := []acpsdk.McpServer{acp.MCPRemote("http", "docs", "https://mcp.example.com/docs", nil)}
	s, err := acp.Open(context.Background(), cfg, acp.OpenOptions{Cwd: t.TempDir(), LoadSessionID: id, MCPServers: caller})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want, _ := json.Marshal(caller)
	if got := mcpSent(t, record, "session/resume"); !jsonEqual(t, []byte(got), want) {
		t.Errorf("session/resume carried mcpServers %s, want %s", got, want)
	}
}

func TestARequestTheGatewayAbandonsIsWithdrawnWithCancelRequest(t *testing.T) {
	record := filepath.Join(t.TempDir(), "record")
	s := open(t, agentConfig("--modes", "ask,code", "--hang-on", "session/set_mode", "--record-params", record))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := s.SetMode(ctx, "code"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("SetMode on an agent that never answers: %v", err)
	}
	var setModeID, withdrawn string
	deadline := time.Now().Add(5 * time.Second)
	for withdrawn == "" && time.Now().Before(deadline) {
		for _, m := range recorded(t, record) {
			var p struct {
				RequestID json.RawMessage `json:"requestId"`
			}
			_ = json.Unmarshal(m.Params, &p)
			switch m.Method {
			case "$/cancel_request":
				withdrawn = string(p.RequestID)
			case "session/set_mode":
				setModeID = string(m.ID)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if withdrawn == "" || withdrawn != setModeID {
		t.Fatalf("$/cancel_request named %q, want the abandoned session/set_mode (id %s); received %v", withdrawn, setModeID, methods(recorded(t, record)))
	}
	// The agent answered -32800, which matches nothing any more; the
	// session goes on.
	if r := prompt(t, s, "chunk still here", nil); r.Error != nil || !strings.Contains(r.Outcome.GetText(), "still here") {
		t.Errorf("the next turn: %v %v", r.Outcome, r.Error)
	}
	if got := s.Settings().CurrentMode; got != "ask" {
		t.Errorf("the mode is %q after an abandoned change, want it unchanged (ask)", got)
	}
}

func methods(ms []recordedMessage) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Method)
	}
	return out
}
