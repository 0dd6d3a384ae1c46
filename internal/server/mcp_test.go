package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/config"
	"github.com/acpgate/acpgate/internal/server"
	"github.com/acpgate/acpgate/internal/store/memory"
	"github.com/acpgate/acpgate/internal/testutil"
)

// The secret a caller's MCP header carries in these tests: it may reach
// the agent, and nothing else.
const mcpSecret = "Bearer mcp-secret-5e1f"

type mcpHarness struct {
	*harness
	record string // the mcp agent's --record-params file
	logs   *testutil.LockedBuffer
	store  *memory.Store
}

// startMCP starts a gateway whose agent "mcp" advertises MCP over HTTP
// (not SSE) and records what it receives, in a workspace (so that its
// sessions would be recorded), with an allow-list and offered stdio
// servers; every log line is kept, at debug level.
func startMCP(t *testing.T) *mcpHarness {
	t.Helper()
	m := &mcpHarness{record: filepath.Join(t.TempDir(), "record"), logs: &testutil.LockedBuffer{}, store: memory.New()}
	m.harness = startWith(t, func(o *server.Options) {
		o.Logger = slog.New(slog.NewTextHandler(m.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		o.Store = m.store
		o.Config.MCP = config.MCP{
			AllowedURLPrefixes: []string{"https://mcp.example.com/team/"},
			Offered:            []config.MCPServer{{Name: "tickets", Command: "/usr/bin/mcp-tickets", Args: []string{"--ro"}}},
		}
		a := o.Config.Agents[0]
		a.Name = "mcp"
		a.Workspace = t.TempDir()
		a.Args = []string{"--unique-sessions", "--mcp-capabilities", "http", "--record-params", m.record}
		a.MCPServers = []config.MCPServer{{Name: "files", Command: "/usr/bin/mcp-files"}}
		a.MCPOffered = []config.MCPServer{{Name: "search", Command: "/usr/bin/mcp-search", Env: map[string]string{"K": "v"}}}
		o.Config.Agents = append(o.Config.Agents, a)
	})
	return m
}

func httpServer(name, url string) *acpgatev1.McpServer {
	return &acpgatev1.McpServer{Server: &acpgatev1.McpServer_Http{Http: &acpgatev1.McpRemoteServer{
		Name: name, Url: url, Headers: []*acpgatev1.McpHeader{{Name: "Authorization", Value: mcpSecret}}}}}
}

func sseServer(name, url string) *acpgatev1.McpServer {
	return &acpgatev1.McpServer{Server: &acpgatev1.McpServer_Sse{Sse: &acpgatev1.McpRemoteServer{Name: name, Url: url}}}
}

func stdioServer(name string) *acpgatev1.McpServer {
	return &acpgatev1.McpServer{Server: &acpgatev1.McpServer_Stdio{Stdio: name}}
}

// sessionNewMCP is the mcpServers of the last session/new the mcp agent
// received.
func (m *mcpHarness) sessionNewMCP(t *testing.T) string {
	t.Helper()
	f, err := os.Open(m.record)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec struct {
			Method string `json:"method"`
			Params struct {
				MCPServers json.RawMessage `json:"mcpServers"`
			} `json:"params"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Method == "session/new" {
			got = string(rec.Params.MCPServers)
		}
	}
	if got == "" {
		t.Fatal("the agent received no session/new")
	}
	return got
}

func TestACallersMCPServersReachTheAgentAfterItsOwnAndTheSessionIsNotRecorded(t *testing.T) {
	m := startMCP(t)
	sess, err := m.client.CreateSession(context.Background(), &acpgatev1.CreateSessionRequest{Agent: "mcp", McpServers: []*acpgatev1.McpServer{
		httpServer("docs", "https://mcp.example.com/team/docs"),
		stdioServer("tickets"),
		stdioServer("search"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"name":"files","command":"/usr/bin/mcp-files","args":[],"env":[]},` +
		`{"type":"http","name":"docs","url":"https://mcp.example.com/team/docs","headers":[{"name":"Authorization","value":"` + mcpSecret + `"}]},` +
		`{"name":"tickets","command":"/usr/bin/mcp-tickets","args":["--ro"],"env":[]},` +
		`{"name":"search","command":"/usr/bin/mcp-search","args":[],"env":[{"name":"K","value":"v"}]}]`
	if got := m.sessionNewMCP(t); !sameJSON(t, got, want) {
		t.Errorf("session/new carried mcpServers\n%s\nwant\n%s", got, want)
	}
	if text := answer(collectOK(t, m.harness, sess.GetId(), "chunk ok")); text != "ok" {
		t.Errorf("the session answered %q", text)
	}
	recs, err := m.store.Sessions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 0 {
		t.Errorf("the session was recorded (%+v): re-opened without its MCP servers' headers, they would be dropped silently", recs)
	}
	// A session without caller MCP servers in the same workspace is.
	if _, err := m.client.CreateSession(context.Background(), &acpgatev1.CreateSessionRequest{Agent: "mcp"}); err != nil {
		t.Fatal(err)
	}
	if recs, _ := m.store.Sessions(context.Background()); len(recs) != 1 {
		t.Errorf("%d records, want the session without caller MCP servers recorded", len(recs))
	}
	if strings.Contains(m.logs.String(), "mcp-secret") {
		t.Errorf("a header value reached the gateway's log:\n%s", m.logs.String())
	}
}

func TestACallersMCPServersAreCheckedBeforeAnythingStarts(t *testing.T) {
	m := startMCP(t)
	for _, tc := range []struct {
		name    string
		servers []*acpgatev1.McpServer
		code    codes.Code
		message string
	}{
		{"url outside the allow-list", []*acpgatev1.McpServer{httpServer("x", "https://mcp.example.com/other/x")},
			codes.PermissionDenied, `mcp_servers[0] ("x"): the URL "https://mcp.example.com/other/x" is not allowed: an MCP server's URL must start with one of the operator's mcp.allowed_url_prefixes ["https://mcp.example.com/team/"]`},
		{"a dot segment out of the prefix", []*acpgatev1.McpServer{httpServer("x", "https://mcp.example.com/team/../admin")},
			codes.InvalidArgument, `mcp_servers[0] ("x"): url: must not have "." or ".." path segments`},
		{"stdio not offered", []*acpgatev1.McpServer{stdioServer("shell")},
			codes.InvalidArgument, `mcp_servers[0]: no stdio MCP server named "shell" is offered for agent "mcp"; callers name one of the operator's (offered: ["search" "tickets"])`},
		{"a name the agent's own server has", []*acpgatev1.McpServer{httpServer("files", "https://mcp.example.com/team/f")},
			codes.InvalidArgument, `mcp_servers[0]: the name "files" is taken by an MCP server the agent is always given`},
		{"names repeated", []*acpgatev1.McpServer{stdioServer("search"), stdioServer("search")},
			codes.InvalidArgument, `mcp_servers[1]: the name "search" is also mcp_servers[0]'s; names must be unique`},
		{"a header with a line break", []*acpgatev1.McpServer{{Server: &acpgatev1.McpServer_Http{Http: &acpgatev1.McpRemoteServer{
			Name: "x", Url: "https://mcp.example.com/team/x", Headers: []*acpgatev1.McpHeader{{Name: "X-Token", Value: "a\r\nInjected: b"}}}}}},
			codes.InvalidArgument, `mcp_servers[0] ("x"): headers[0]: the value of "X-Token" has a control character at byte 1`},
		{"no transport", []*acpgatev1.McpServer{{}}, codes.InvalidArgument, "mcp_servers[0]: set one of http, sse and stdio"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.client.CreateSession(context.Background(), &acpgatev1.CreateSessionRequest{Agent: "mcp", McpServers: tc.servers})
			if st := status.Convert(err); st.Code() != tc.code || st.Message() != tc.message {
				t.Errorf("CreateSession: %v %q\nwant %v %q", st.Code(), st.Message(), tc.code, tc.message)
			}
		})
	}
	if _, err := os.Stat(m.record); err == nil {
		t.Error("an agent was started for a refused request")
	}
	// Without an allow-list, no URL is allowed.
	_, err := start(t).client.CreateSession(context.Background(), &acpgatev1.CreateSessionRequest{Agent: "test", McpServers: []*acpgatev1.McpServer{httpServer("x", "https://mcp.example.com/team/x")}})
	if st := status.Convert(err); st.Code() != codes.PermissionDenied || !strings.Contains(st.Message(), "mcp.allowed_url_prefixes") {
		t.Errorf("no allow-list: %v", err)
	}
}

func TestAnMCPTransportTheAgentDoesNotSupportIsCapabilityNotSupportedNamingIt(t *testing.T) {
	m := startMCP(t)
	_, err := m.client.CreateSession(context.Background(), &acpgatev1.CreateSessionRequest{Agent: "mcp", McpServers: []*acpgatev1.McpServer{
		stdioServer("tickets"), sseServer("events", "https://mcp.example.com/team/events")}})
	st := status.Convert(err)
	var e *acpgatev1.HarnessError
	for _, d := range st.Details() {
		if h, ok := d.(*acpgatev1.HarnessError); ok {
			e = h
		}
	}
	if st.Code() != codes.FailedPrecondition || e.GetCapabilityNotSupported().GetPrimitive() != "mcpCapabilities.sse" ||
		!strings.Contains(e.GetMessage(), `over sse (mcp_servers[1] "events" is one)`) {
		t.Fatalf("CreateSession: %v, detail %v", err, e)
	}
	// One-shot, the refusal is the turn's terminal: the agent's
	// capabilities are known once it has started.
	stream, err := m.client.Prompt(context.Background(), &acpgatev1.PromptRequest{Agent: "mcp", Text: "chunk never", McpServers: []*acpgatev1.McpServer{
		sseServer("events", "https://mcp.example.com/team/events")}})
	if err != nil {
		t.Fatal(err)
	}
	events := collect(t, stream)
	if got := last(events).GetError().GetCapabilityNotSupported().GetPrimitive(); got != "mcpCapabilities.sse" {
		t.Errorf("one-shot terminal %v", last(events))
	}
	m.checkListed(t)
}

func TestAOneShotPromptTakesMCPServersButNotOnASessionAndNeverJournalsThem(t *testing.T) {
	m := startMCP(t)
	ctx := context.Background()
	stream, err := m.client.Prompt(ctx, &acpgatev1.PromptRequest{Agent: "mcp", Text: "chunk one-shot", RequestId: "mcp-1",
		McpServers: []*acpgatev1.McpServer{httpServer("docs", "https://mcp.example.com/team/docs")}})
	if err != nil {
		t.Fatal(err)
	}
	events := collect(t, stream)
	if answer(events) != "one-shot" {
		t.Fatalf("terminal %v", last(events))
	}
	if got := m.sessionNewMCP(t); !strings.Contains(got, `"name":"docs"`) || !strings.Contains(got, mcpSecret) {
		t.Errorf("session/new carried %s", got)
	}
	turnID := events[0].GetStarted().GetTurnId()
	turn, err := m.client.GetTurn(ctx, &acpgatev1.GetTurnRequest{TurnId: turnID})
	if err != nil {
		t.Fatal(err)
	}
	watch, err := m.client.WatchTurn(ctx, &acpgatev1.WatchTurnRequest{TurnId: turnID})
	if err != nil {
		t.Fatal(err)
	}
	journaled := collect(t, watch)
	for _, x := range []string{turn.String(), eventsString(journaled), m.logs.String()} {
		if strings.Contains(x, "mcp-secret") || strings.Contains(x, "mcp.example.com") {
			t.Errorf("the turn's journal, record or log holds the caller's MCP server: %s", x)
		}
	}

	sess := createSession(t, m.harness, "mcp")
	onSession, err := m.client.Prompt(ctx, &acpgatev1.PromptRequest{SessionId: sess.GetId(), Text: "chunk x", McpServers: []*acpgatev1.McpServer{stdioServer("tickets")}})
	if err == nil {
		_, err = onSession.Recv()
	}
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "one-shot turns only") {
		t.Errorf("Prompt on a session with mcp_servers: %v", err)
	}
}

func sameJSON(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

func eventsString(events []*acpgatev1.PromptEvent) string {
	var b strings.Builder
	for _, e := range events {
		b.WriteString(e.String())
	}
	return b.String()
}

// checkListed checks what ListAgents says about the mcp agent's MCP
// servers, once it has been started.
func (m *mcpHarness) checkListed(t *testing.T) {
	t.Helper()
	resp, err := m.client.ListAgents(context.Background(), &acpgatev1.ListAgentsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(resp.GetAgents(), func(a *acpgatev1.Agent) bool { return a.GetName() == "mcp" })
	if i < 0 {
		t.Fatal("the mcp agent is not listed")
	}
	a := resp.GetAgents()[i]
	if got := strings.Join(a.GetMcpOffered(), ","); got != "search,tickets" {
		t.Errorf("mcp_offered %q", got)
	}
	if got := strings.Join(a.GetMcpTransports(), ","); got != "http" {
		t.Errorf("mcp_transports %q, want the agent's advertised http", got)
	}
	if got := strings.Join(a.GetMcpUrlPrefixes(), ","); got != "https://mcp.example.com/team/" {
		t.Errorf("mcp_url_prefixes %q", got)
	}
}
