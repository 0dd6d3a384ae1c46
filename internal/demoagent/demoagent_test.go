package demoagent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"go.uber.org/goleak"

	"github.com/acpgate/acpgate/internal/testutil"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testDelay is the chunk delay of most tests: small, but not zero, so the
// pacing code runs.
const testDelay = time.Millisecond

var (
	sessionIDRE = regexp.MustCompile(`^demo-[0-9a-f]{32}$`)
	uuidRE      = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
)

// fakeClient is the client end of the connection: it records session
// updates and serves fs/read_text_file from a map.
type fakeClient struct {
	mu        sync.Mutex
	updates   []acp.SessionNotification
	reads     []acp.ReadTextFileRequest
	files     map[string]string // absolute path -> content
	readErr   error             // when set, every read fails with it
	firstOnce sync.Once
	first     chan struct{} // closed at the first session update
}

func newFakeClient() *fakeClient {
	return &fakeClient{files: map[string]string{}, first: make(chan struct{})}
}

func (c *fakeClient) SessionUpdate(_ context.Context, n acp.SessionNotification) error {
	c.mu.Lock()
	c.updates = append(c.updates, n)
	c.mu.Unlock()
	c.firstOnce.Do(func() { close(c.first) })
	return nil
}

func (c *fakeClient) ReadTextFile(_ context.Context, p acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads = append(c.reads, p)
	if c.readErr != nil {
		return acp.ReadTextFileResponse{}, c.readErr
	}
	content, ok := c.files[p.Path]
	if !ok {
		return acp.ReadTextFileResponse{}, acp.NewInvalidParams(map[string]any{"error": "no such file"})
	}
	return acp.ReadTextFileResponse{Content: content}, nil
}

func (c *fakeClient) WriteTextFile(context.Context, acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	return acp.WriteTextFileResponse{}, acp.NewMethodNotFound(acp.ClientMethodFsWriteTextFile)
}

func (c *fakeClient) RequestPermission(context.Context, acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	return acp.RequestPermissionResponse{}, acp.NewMethodNotFound(acp.ClientMethodSessionRequestPermission)
}

func (c *fakeClient) CreateTerminal(context.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalCreate)
}

func (c *fakeClient) KillTerminal(context.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalKill)
}

func (c *fakeClient) TerminalOutput(context.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalOutput)
}

func (c *fakeClient) ReleaseTerminal(context.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalRelease)
}

func (c *fakeClient) WaitForTerminalExit(context.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalWaitForExit)
}

// sessionUpdates returns a copy of the updates received for one session.
func (c *fakeClient) sessionUpdates(sid acp.SessionId) []acp.SessionUpdate {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []acp.SessionUpdate
	for _, n := range c.updates {
		if n.SessionId == sid {
			out = append(out, n.Update)
		}
	}
	return out
}

func (c *fakeClient) readRequests() []acp.ReadTextFileRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]acp.ReadTextFileRequest(nil), c.reads...)
}

// harness runs Run on one end of two pipes and an SDK client on the other.
type harness struct {
	t          *testing.T
	conn       *acp.ClientSideConnection
	client     *fakeClient
	cancelRun  context.CancelFunc
	closeInput func() // ends the agent's input (EOF)
	runDone    chan struct{}
	runErr     error // valid once runDone is closed
}

func newHarness(t *testing.T, opts Options, caps acp.ClientCapabilities) *harness {
	return newHarnessWith(t, newFakeClient(), opts, caps)
}

func newHarnessWith(t *testing.T, fc *fakeClient, opts Options, caps acp.ClientCapabilities) *harness {
	t.Helper()
	return newHarnessWithClient(t, fc, fc, opts, caps)
}

// newHarnessWithClient serves the connection's client side with c and
// inspects what it recorded through fc.
func newHarnessWithClient(t *testing.T, c acp.Client, fc *fakeClient, opts Options, caps acp.ClientCapabilities) *harness {
	t.Helper()
	agentIn, clientOut := io.Pipe()
	clientIn, agentOut := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{t: t, client: fc, cancelRun: cancel, runDone: make(chan struct{})}
	h.closeInput = func() { _ = clientOut.Close() }
	go func() {
		defer close(h.runDone)
		h.runErr = Run(ctx, agentIn, agentOut, opts)
	}()
	h.conn = acp.NewClientSideConnection(c, clientOut, clientIn)
	h.conn.SetLogger(slog.New(slog.DiscardHandler))

	t.Cleanup(func() {
		// EOF on the agent's input ends Run...
		_ = clientOut.Close()
		select {
		case <-h.runDone:
		case <-time.After(5 * time.Second):
			t.Error("Run did not return after its input reached EOF")
		}
		// ...then EOF on the client's input ends the client.
		_ = agentOut.Close()
		select {
		case <-h.conn.Done():
		case <-time.After(5 * time.Second):
			t.Error("the client connection did not close")
		}
		cancel()
		_ = agentIn.Close()
		_ = clientIn.Close()
	})

	resp, err := h.conn.Initialize(h.ctx(), acp.InitializeRequest{
		ProtocolVersion:    acp.ProtocolVersionNumber,
		ClientCapabilities: caps,
	})
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	if resp.ProtocolVersion != 1 {
		t.Fatalf("initialize: protocolVersion %d, want 1", resp.ProtocolVersion)
	}
	return h
}

// ctx bounds one request of a test.
func (h *harness) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	h.t.Cleanup(cancel)
	return ctx
}

func (h *harness) newSession(cwd string) acp.SessionId {
	h.t.Helper()
	resp, err := h.conn.NewSession(h.ctx(), acp.NewSessionRequest{Cwd: cwd, McpServers: []acp.McpServer{}})
	if err != nil {
		h.t.Fatalf("session/new: %v", err)
	}
	return resp.SessionId
}

func (h *harness) prompt(sid acp.SessionId, text string) (acp.PromptResponse, error) {
	return h.conn.Prompt(h.ctx(), acp.PromptRequest{SessionId: sid, Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
}

// mustPrompt runs a prompt turn that must succeed with the given stop reason
// and returns the session's updates.
func (h *harness) mustPrompt(sid acp.SessionId, text string, want acp.StopReason) []acp.SessionUpdate {
	h.t.Helper()
	resp, err := h.prompt(sid, text)
	if err != nil {
		h.t.Fatalf("prompt %q: %v", text, err)
	}
	if resp.StopReason != want {
		h.t.Fatalf("prompt %q: stopReason %q, want %q", text, resp.StopReason, want)
	}
	return h.client.sessionUpdates(sid)
}

func testCwd(t *testing.T) string {
	t.Helper()
	cwd, err := filepath.Abs(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return cwd
}

// message is one agent (or thought) message reassembled from its chunks.
type message struct {
	id     string
	text   string
	chunks int
}

// agentMessages reassembles agent_message_chunk updates, starting a new
// message whenever the messageId changes.
func agentMessages(t *testing.T, ups []acp.SessionUpdate) []message {
	t.Helper()
	var out []message
	for _, u := range ups {
		c := u.AgentMessageChunk
		if c == nil {
			continue
		}
		if c.Content.Text == nil {
			t.Fatalf("agent_message_chunk without text: %+v", c.Content)
		}
		id := ""
		if c.MessageId != nil {
			id = *c.MessageId
		}
		if len(out) == 0 || out[len(out)-1].id != id {
			out = append(out, message{id: id})
		}
		out[len(out)-1].text += c.Content.Text.Text
		out[len(out)-1].chunks++
	}
	return out
}

func thoughtTexts(ups []acp.SessionUpdate) []string {
	var out []string
	for _, u := range ups {
		if c := u.AgentThoughtChunk; c != nil && c.Content.Text != nil {
			out = append(out, c.Content.Text.Text)
		}
	}
	return out
}

func plans(ups []acp.SessionUpdate) [][]acp.PlanEntry {
	var out [][]acp.PlanEntry
	for _, u := range ups {
		if u.Plan != nil {
			out = append(out, u.Plan.Entries)
		}
	}
	return out
}

func toolCalls(ups []acp.SessionUpdate) (starts []*acp.SessionUpdateToolCall, updates []*acp.SessionToolCallUpdate) {
	for _, u := range ups {
		if u.ToolCall != nil {
			starts = append(starts, u.ToolCall)
		}
		if u.ToolCallUpdate != nil {
			updates = append(updates, u.ToolCallUpdate)
		}
	}
	return starts, updates
}

func planStatuses(entries []acp.PlanEntry) []acp.PlanEntryStatus {
	out := make([]acp.PlanEntryStatus, len(entries))
	for i, e := range entries {
		out[i] = e.Status
	}
	return out
}

func TestInitializeAndSessions(t *testing.T) {
	h := newHarness(t, Options{ChunkDelay: testDelay}, acp.ClientCapabilities{})

	resp, err := h.conn.Initialize(h.ctx(), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber})
	if err != nil {
		t.Fatal(err)
	}
	if resp.AgentInfo == nil || resp.AgentInfo.Name != "acpgate-demo" || resp.AgentInfo.Version != "1" {
		t.Errorf("agentInfo = %+v, want {acpgate-demo 1}", resp.AgentInfo)
	}
	if resp.AgentCapabilities.LoadSession {
		t.Error("loadSession = true, want false")
	}
	if len(resp.AuthMethods) != 0 {
		t.Errorf("authMethods = %+v, want none", resp.AuthMethods)
	}

	cwd := testCwd(t)
	a, b := h.newSession(cwd), h.newSession(cwd)
	for _, id := range []acp.SessionId{a, b} {
		if !sessionIDRE.MatchString(string(id)) {
			t.Errorf("session id %q does not look like demo-<hex>", id)
		}
	}
	if a == b {
		t.Errorf("two sessions got the same id %q", a)
	}

	_, err = h.conn.NewSession(h.ctx(), acp.NewSessionRequest{Cwd: "relative/dir", McpServers: []acp.McpServer{}})
	var re *acp.RequestError
	if !errors.As(err, &re) || re.Code != -32602 {
		t.Errorf("session/new with a relative cwd: err %v, want invalid params", err)
	}

	_, err = h.prompt("demo-unknown", "hello")
	if !errors.As(err, &re) || re.Code != -32602 {
		t.Errorf("prompt on an unknown session: err %v, want invalid params", err)
	}
}

func TestDefaultTurn(t *testing.T) {
	h := newHarness(t, Options{ChunkDelay: testDelay}, acp.ClientCapabilities{})
	sid := h.newSession(testCwd(t))
	ups := h.mustPrompt(sid, "Hello there, demo agent!", acp.StopReasonEndTurn)

	ms := agentMessages(t, ups)
	if len(ms) != 2 {
		t.Fatalf("got %d messages, want 2: %+v", len(ms), ms)
	}
	if want := `You said: "Hello there, demo agent!"`; ms[0].text != want {
		t.Errorf("first message %q, want %q", ms[0].text, want)
	}
	if want := "I am the acpgate demo agent. Put one of these words in a prompt to choose how the turn goes: " +
		"refuse, truncate, loop, slow, fail, tools, read <path>, think. Anything else gets this answer."; ms[1].text != want {
		t.Errorf("second message %q, want %q", ms[1].text, want)
	}
	for i, m := range ms {
		if !uuidRE.MatchString(m.id) {
			t.Errorf("message %d: messageId %q is not a UUID", i, m.id)
		}
		if m.chunks < 2 {
			t.Errorf("message %d came in %d chunk(s), want it streamed", i, m.chunks)
		}
	}
	if ms[0].id == ms[1].id {
		t.Errorf("both messages share messageId %q", ms[0].id)
	}

	ps := plans(ups)
	if len(ps) < 2 {
		t.Fatalf("got %d plan updates, want the plan updated as it goes", len(ps))
	}
	first, last := ps[0], ps[len(ps)-1]
	if len(first) < 2 || len(first) > 3 {
		t.Errorf("plan has %d entries, want 2-3", len(first))
	}
	if planStatuses(first)[len(first)-1] != acp.PlanEntryStatusPending {
		t.Errorf("first plan %v: want its last entry pending", planStatuses(first))
	}
	for _, s := range planStatuses(last) {
		if s != acp.PlanEntryStatusCompleted {
			t.Errorf("last plan %v: want every entry completed", planStatuses(last))
			break
		}
	}
	if ups[0].Plan == nil {
		t.Error("the turn did not start with its plan")
	}
	if ups[len(ups)-1].Plan == nil {
		t.Error("the turn did not end with the completed plan")
	}

	// Every turn is deterministic apart from ids.
	h2 := newHarness(t, Options{ChunkDelay: testDelay}, acp.ClientCapabilities{})
	sid2 := h2.newSession(testCwd(t))
	ups2 := h2.mustPrompt(sid2, "Hello there, demo agent!", acp.StopReasonEndTurn)
	if len(ups2) != len(ups) {
		t.Fatalf("a second run sent %d updates, the first %d", len(ups2), len(ups))
	}
	ms2 := agentMessages(t, ups2)
	if len(ms2) != 2 || ms2[0].text != ms[0].text || ms2[1].text != ms[1].text || ms2[0].chunks != ms[0].chunks {
		t.Errorf("a second run streamed %+v, the first %+v", ms2, ms)
	}
}

func TestKeywordTurns(t *testing.T) {
	tests := []struct {
		prompt string
		stop   acp.StopReason
		check  func(t *testing.T, ups []acp.SessionUpdate)
	}{
		{"Please refuse this.", acp.StopReasonRefusal, func(t *testing.T, ups []acp.SessionUpdate) {
			ms := agentMessages(t, ups)
			if len(ms) != 1 || ms[0].text != "I can't help with that." {
				t.Errorf("messages %+v, want one: I can't help with that.", ms)
			}
			if len(ups) != 1 {
				t.Errorf("refusal sent %d updates, want 1", len(ups))
			}
		}},
		{"TRUNCATE me", acp.StopReasonMaxTokens, func(t *testing.T, ups []acp.SessionUpdate) {
			ms := agentMessages(t, ups)
			if len(ms) != 1 || ms[0].text != truncateText {
				t.Fatalf("messages %+v, want the truncated answer", ms)
			}
			if ms[0].chunks < 3 {
				t.Errorf("truncated answer came in %d chunks, want a few", ms[0].chunks)
			}
			if !strings.HasSuffix(ms[0].text, "run out of") {
				t.Errorf("truncated answer %q should stop mid-sentence", ms[0].text)
			}
		}},
		{"go round in a loop", acp.StopReasonMaxTurnRequests, func(t *testing.T, ups []acp.SessionUpdate) {
			if ms := agentMessages(t, ups); len(ms) != 0 {
				t.Errorf("loop streamed text: %+v", ms)
			}
			if ups[0].Plan == nil {
				t.Errorf("loop did not start with a plan: %+v", ups[0])
			}
			starts, updates := toolCalls(ups)
			if len(starts) != 2 || len(updates) != 2 {
				t.Fatalf("loop sent %d tool_call and %d tool_call_update, want 2 and 2", len(starts), len(updates))
			}
			for i := range starts {
				if starts[i].ToolCallId != updates[i].ToolCallId {
					t.Errorf("pair %d: tool_call %q updated as %q", i, starts[i].ToolCallId, updates[i].ToolCallId)
				}
				if updates[i].Status == nil || *updates[i].Status != acp.ToolCallStatusCompleted {
					t.Errorf("pair %d: update status %v, want completed", i, updates[i].Status)
				}
			}
			if starts[0].ToolCallId == starts[1].ToolCallId {
				t.Errorf("both tool calls have id %q", starts[0].ToolCallId)
			}
		}},
		{"use your tools", acp.StopReasonEndTurn, func(t *testing.T, ups []acp.SessionUpdate) {
			if len(ups) != 2 {
				t.Fatalf("tools sent %d updates, want exactly tool_call + tool_call_update: %+v", len(ups), ups)
			}
			tc, tu := ups[0].ToolCall, ups[1].ToolCallUpdate
			if tc == nil || tu == nil {
				t.Fatalf("tools sent %+v, want tool_call then tool_call_update", ups)
			}
			if tc.ToolCallId != tu.ToolCallId {
				t.Errorf("tool_call %q updated as %q", tc.ToolCallId, tu.ToolCallId)
			}
			if tu.Status == nil || *tu.Status != acp.ToolCallStatusCompleted {
				t.Errorf("tool_call_update status %v, want completed", tu.Status)
			}
		}},
		{"Think before you answer.", acp.StopReasonEndTurn, func(t *testing.T, ups []acp.SessionUpdate) {
			th := thoughtTexts(ups)
			if len(th) != 2 {
				t.Fatalf("got %d thought chunks, want 2", len(th))
			}
			if ups[0].AgentThoughtChunk == nil || ups[1].AgentThoughtChunk == nil {
				t.Errorf("the turn did not start with its thoughts: %+v", ups[:2])
			}
			ms := agentMessages(t, ups)
			if len(ms) != 2 || ms[0].text != `You said: "Think before you answer."` {
				t.Errorf("messages after the thoughts %+v, want the default answer", ms)
			}
			if len(plans(ups)) == 0 {
				t.Error("think did not play the default turn's plan")
			}
		}},
	}
	h := newHarness(t, Options{ChunkDelay: testDelay}, acp.ClientCapabilities{})
	cwd := testCwd(t)
	for _, tt := range tests {
		t.Run(tt.prompt, func(t *testing.T) {
			sid := h.newSession(cwd)
			ups := h.mustPrompt(sid, tt.prompt, tt.stop)
			tt.check(t, ups)
		})
	}
}

func TestFail(t *testing.T) {
	h := newHarness(t, Options{ChunkDelay: testDelay}, acp.ClientCapabilities{})
	sid := h.newSession(testCwd(t))
	_, err := h.prompt(sid, "Now fail, please.")
	var re *acp.RequestError
	if !errors.As(err, &re) {
		t.Fatalf("err = %v, want a JSON-RPC error", err)
	}
	if re.Code != -32603 || re.Message != "the demo agent was asked to fail" {
		t.Errorf("error %d %q, want -32603 %q", re.Code, re.Message, "the demo agent was asked to fail")
	}
	if ups := h.client.sessionUpdates(sid); len(ups) != 0 {
		t.Errorf("fail streamed %d updates, want none", len(ups))
	}
	// The session is still usable.
	h.mustPrompt(sid, "refuse", acp.StopReasonRefusal)
}

func TestClassify(t *testing.T) {
	tests := []struct {
		request, mode, path string
	}{
		{"hello", modeDefault, ""},
		{"", modeDefault, ""},
		{"REFUSE", modeRefuse, ""},
		{"Refuse!", modeRefuse, ""},
		{"I refused", modeDefault, ""},
		{"truncate", modeTruncate, ""},
		{"loop", modeLoop, ""},
		{"loops", modeDefault, ""},
		{"be slow", modeSlow, ""},
		{"slowly", modeDefault, ""},
		{"fail", modeFail, ""},
		{"failure", modeDefault, ""},
		{"tools", modeTools, ""},
		{"tool", modeDefault, ""},
		{"think", modeThink, ""},
		{"rethink", modeDefault, ""},
		{"read notes.txt", modeRead, "notes.txt"},
		{"Please READ  docs/a b.md now", modeRead, "docs/a"},
		{"read `src/main.go`, then stop", modeRead, "src/main.go"},
		{"read \"x.txt\"?", modeRead, "x.txt"},
		{"read", modeDefault, ""},
		{"read and think", modeRead, "and"},
		{"think, then read", modeThink, ""},
		{"reread x", modeDefault, ""},
		// Precedence follows the keyword list, not the position in the text.
		{"think, then refuse", modeRefuse, ""},
		{"slow loop", modeLoop, ""},
		{"tools fail", modeFail, ""},
		{"read x and use tools", modeTools, ""},
		{"think about truncate", modeTruncate, ""},
		{"line one\nslow", modeSlow, ""},
	}
	for _, tt := range tests {
		got := classify(tt.request)
		if got.name != tt.mode || got.readPath != tt.path {
			t.Errorf("classify(%q) = %+v, want {%s %q}", tt.request, got, tt.mode, tt.path)
		}
	}
}

func TestPromptJoinsTextBlocks(t *testing.T) {
	h := newHarness(t, Options{ChunkDelay: testDelay}, acp.ClientCapabilities{})
	sid := h.newSession(testCwd(t))
	resp, err := h.conn.Prompt(h.ctx(), acp.PromptRequest{SessionId: sid, Prompt: []acp.ContentBlock{
		acp.TextBlock("first block"),
		acp.ResourceLinkBlock("x", "file:///x"),
		acp.TextBlock("refuse"),
	}})
	if err != nil || resp.StopReason != acp.StopReasonRefusal {
		t.Fatalf("prompt: %v %v, want refusal from the second text block", resp.StopReason, err)
	}
	if got := promptText([]acp.ContentBlock{acp.TextBlock("a"), acp.TextBlock("b")}); got != "a\nb" {
		t.Errorf("promptText = %q, want %q", got, "a\nb")
	}
}

func TestRead(t *testing.T) {
	cwd := testCwd(t)
	fc := newFakeClient()
	fc.files[filepath.Join(cwd, "notes", "todo.txt")] = "buy milk\r\nwalk the dog\nwrite tests\n"
	fc.files[filepath.Join(cwd, "one.txt")] = "only"
	fc.files[filepath.Join(cwd, "empty.txt")] = ""
	fc.files["/abs/blank.txt"] = "\nsecond"
	h := newHarnessWith(t, fc, Options{ChunkDelay: testDelay}, acp.ClientCapabilities{Fs: acp.FileSystemCapabilities{ReadTextFile: true}})

	tests := []struct {
		prompt, path, want string
	}{
		{"read notes/todo.txt", filepath.Join(cwd, "notes", "todo.txt"), "notes/todo.txt has 3 lines; first line: buy milk"},
		{"Could you READ one.txt?", filepath.Join(cwd, "one.txt"), "one.txt has 1 line; first line: only"},
		{"read empty.txt", filepath.Join(cwd, "empty.txt"), "empty.txt is empty."},
		{"read /abs/blank.txt", "/abs/blank.txt", "/abs/blank.txt has 2 lines; first line: (blank)"},
	}
	for _, tt := range tests {
		t.Run(tt.prompt, func(t *testing.T) {
			sid := h.newSession(cwd)
			before := len(fc.readRequests())
			ups := h.mustPrompt(sid, tt.prompt, acp.StopReasonEndTurn)

			reads := fc.readRequests()[before:]
			if len(reads) != 1 {
				t.Fatalf("agent made %d fs/read_text_file calls, want 1", len(reads))
			}
			if reads[0].Path != tt.path || reads[0].SessionId != sid {
				t.Errorf("read %q in %q, want %q in %q", reads[0].Path, reads[0].SessionId, tt.path, sid)
			}
			ms := agentMessages(t, ups)
			if len(ms) != 1 || ms[0].text != tt.want {
				t.Errorf("messages %+v, want one: %q", ms, tt.want)
			}
			if len(ms) == 1 && ms[0].chunks < 2 && strings.Count(tt.want, " ") >= wordsPerChunk {
				t.Errorf("summary came in %d chunk(s), want it streamed", ms[0].chunks)
			}
			starts, updates := toolCalls(ups)
			if len(starts) != 1 || len(updates) != 1 {
				t.Fatalf("got %d tool_call and %d tool_call_update, want 1 and 1", len(starts), len(updates))
			}
			if starts[0].Kind != acp.ToolKindRead || len(starts[0].Locations) != 1 || starts[0].Locations[0].Path != tt.path {
				t.Errorf("tool_call %+v, want a read of %q", starts[0], tt.path)
			}
			if updates[0].Status == nil || *updates[0].Status != acp.ToolCallStatusCompleted {
				t.Errorf("tool_call_update status %v, want completed", updates[0].Status)
			}
		})
	}
}

func TestReadClientErrors(t *testing.T) {
	cwd := testCwd(t)
	fc := newFakeClient()
	h := newHarnessWith(t, fc, Options{ChunkDelay: testDelay}, acp.ClientCapabilities{Fs: acp.FileSystemCapabilities{ReadTextFile: true}})

	// A file the client does not have: it answers with an error.
	sid := h.newSession(cwd)
	ups := h.mustPrompt(sid, "read missing.txt", acp.StopReasonEndTurn)
	ms := agentMessages(t, ups)
	want := `I couldn't read missing.txt: the client answered with error -32602 (Invalid params: no such file).`
	if len(ms) != 1 || ms[0].text != want {
		t.Errorf("messages %+v, want one: %q", ms, want)
	}
	_, updates := toolCalls(ups)
	if len(updates) != 1 || updates[0].Status == nil || *updates[0].Status != acp.ToolCallStatusFailed {
		t.Errorf("tool_call_update %+v, want one with status failed", updates)
	}

	// A client that refuses every read.
	fc.mu.Lock()
	fc.readErr = &acp.RequestError{Code: -32000, Message: "permission denied"}
	fc.mu.Unlock()
	sid = h.newSession(cwd)
	ups = h.mustPrompt(sid, "read secret.txt", acp.StopReasonEndTurn)
	ms = agentMessages(t, ups)
	want = `I couldn't read secret.txt: the client answered with error -32000 (permission denied).`
	if len(ms) != 1 || ms[0].text != want {
		t.Errorf("messages %+v, want one: %q", ms, want)
	}
}

func TestReadWithoutCapability(t *testing.T) {
	fc := newFakeClient()
	h := newHarnessWith(t, fc, Options{ChunkDelay: testDelay}, acp.ClientCapabilities{})
	sid := h.newSession(testCwd(t))
	ups := h.mustPrompt(sid, "read notes.txt", acp.StopReasonEndTurn)
	if n := len(fc.readRequests()); n != 0 {
		t.Errorf("agent called fs/read_text_file %d times on a client that did not offer it", n)
	}
	ms := agentMessages(t, ups)
	if len(ms) != 1 || !strings.HasPrefix(ms[0].text, "I can't read notes.txt: the client did not offer fs/read_text_file") {
		t.Errorf("messages %+v, want one saying the client cannot read files", ms)
	}
}

// promptAsync starts a prompt and returns a channel with its result.
func (h *harness) promptAsync(sid acp.SessionId, text string) <-chan promptResult {
	ch := make(chan promptResult, 1)
	ctx := h.ctx()
	go func() {
		resp, err := h.conn.Prompt(ctx, acp.PromptRequest{SessionId: sid, Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
		ch <- promptResult{resp, err}
	}()
	return ch
}

type promptResult struct {
	resp acp.PromptResponse
	err  error
}

func waitFirstUpdate(t *testing.T, fc *fakeClient) {
	t.Helper()
	select {
	case <-fc.first:
	case <-time.After(5 * time.Second):
		t.Fatal("no session update arrived")
	}
}

func expectCancelled(t *testing.T, ch <-chan promptResult, within time.Duration) {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("cancelled prompt failed: %v", r.err)
		}
		if r.resp.StopReason != acp.StopReasonCancelled {
			t.Fatalf("cancelled prompt answered %q, want cancelled", r.resp.StopReason)
		}
	case <-time.After(within):
		t.Fatalf("the prompt did not answer within %v of session/cancel", within)
	}
}

func TestSlowCancel(t *testing.T) {
	fc := newFakeClient()
	h := newHarnessWith(t, fc, Options{ChunkDelay: testDelay}, acp.ClientCapabilities{})
	sid := h.newSession(testCwd(t))
	res := h.promptAsync(sid, "Be slow about it")
	waitFirstUpdate(t, fc)

	ms := agentMessages(t, fc.sessionUpdates(sid))
	if len(ms) != 1 || ms[0].text != "Slow chunk 1 of 60. " || !uuidRE.MatchString(ms[0].id) {
		t.Errorf("first slow chunk %+v, want %q under a UUID messageId", ms, "Slow chunk 1 of 60. ")
	}
	if err := h.conn.Cancel(h.ctx(), acp.CancelNotification{SessionId: sid}); err != nil {
		t.Fatal(err)
	}
	expectCancelled(t, res, 2*time.Second)
	if ms := agentMessages(t, fc.sessionUpdates(sid)); len(ms) != 1 || ms[0].chunks > 2 {
		t.Errorf("slow kept streaming after the cancel: %+v", ms)
	}

	// The session serves the next prompt normally.
	h.mustPrompt(sid, "refuse", acp.StopReasonRefusal)
}

// TestCancelEveryMode cancels each multi-update turn after its first update;
// a long chunk delay makes sure the cancel lands mid-turn.
func TestCancelEveryMode(t *testing.T) {
	for _, prompt := range []string{"hello", "think", "truncate", "loop", "tools", "slow"} {
		t.Run(prompt, func(t *testing.T) {
			fc := newFakeClient()
			h := newHarnessWith(t, fc, Options{ChunkDelay: 500 * time.Millisecond}, acp.ClientCapabilities{})
			sid := h.newSession(testCwd(t))
			res := h.promptAsync(sid, prompt)
			waitFirstUpdate(t, fc)
			if err := h.conn.Cancel(h.ctx(), acp.CancelNotification{SessionId: sid}); err != nil {
				t.Fatal(err)
			}
			expectCancelled(t, res, 2*time.Second)
			if n := len(fc.sessionUpdates(sid)); n > 2 {
				t.Errorf("%d updates arrived, want the turn stopped after the first", n)
			}
		})
	}
}

func TestCancelDuringRead(t *testing.T) {
	br := &blockingReader{fakeClient: newFakeClient(), entered: make(chan struct{}, 1)}
	h := newHarnessWithClient(t, br, br.fakeClient, Options{ChunkDelay: testDelay},
		acp.ClientCapabilities{Fs: acp.FileSystemCapabilities{ReadTextFile: true}})
	sid := h.newSession(testCwd(t))
	res := h.promptAsync(sid, "read big.txt")
	select {
	case <-br.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the agent never asked to read the file")
	}
	if err := h.conn.Cancel(h.ctx(), acp.CancelNotification{SessionId: sid}); err != nil {
		t.Fatal(err)
	}
	expectCancelled(t, res, 2*time.Second)
}

// blockingReader is a client whose reads block until the request is
// cancelled.
type blockingReader struct {
	*fakeClient
	entered chan struct{}
}

func (b *blockingReader) ReadTextFile(ctx context.Context, _ acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	b.entered <- struct{}{}
	<-ctx.Done()
	return acp.ReadTextFileResponse{}, ctx.Err()
}

func TestConcurrentSessions(t *testing.T) {
	fc := newFakeClient()
	h := newHarnessWith(t, fc, Options{ChunkDelay: testDelay}, acp.ClientCapabilities{})
	cwd := testCwd(t)
	a, b := h.newSession(cwd), h.newSession(cwd)
	ra, rb := h.promptAsync(a, "alpha"), h.promptAsync(b, "truncate")
	for _, r := range []struct {
		ch   <-chan promptResult
		sid  acp.SessionId
		stop acp.StopReason
		text string
	}{
		{ra, a, acp.StopReasonEndTurn, `You said: "alpha"`},
		{rb, b, acp.StopReasonMaxTokens, truncateText},
	} {
		select {
		case got := <-r.ch:
			if got.err != nil || got.resp.StopReason != r.stop {
				t.Errorf("session %s: %v %v, want %s", r.sid, got.resp.StopReason, got.err, r.stop)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("session %s did not answer", r.sid)
		}
		if ms := agentMessages(t, fc.sessionUpdates(r.sid)); len(ms) == 0 || ms[0].text != r.text {
			t.Errorf("session %s streamed %+v, want first message %q", r.sid, ms, r.text)
		}
	}
}

func TestDefaultChunkDelay(t *testing.T) {
	h := newHarness(t, Options{}, acp.ClientCapabilities{})
	sid := h.newSession(testCwd(t))
	start := time.Now()
	ups := h.mustPrompt(sid, "truncate", acp.StopReasonMaxTokens)
	if least := time.Duration(len(ups)-1) * DefaultChunkDelay; time.Since(start) < least {
		t.Errorf("%d updates took %v, want at least %v with the default delay", len(ups), time.Since(start), least)
	}
}

func TestRunStopsWhenContextDone(t *testing.T) {
	fc := newFakeClient()
	h := newHarnessWith(t, fc, Options{ChunkDelay: testDelay}, acp.ClientCapabilities{})
	sid := h.newSession(testCwd(t))
	res := h.promptAsync(sid, "slow")
	waitFirstUpdate(t, fc)

	h.cancelRun()
	select {
	case <-h.runDone:
	case <-time.After(2 * time.Second):
		t.Fatal("Run did not return after its context was cancelled")
	}
	if !errors.Is(h.runErr, context.Canceled) {
		t.Errorf("Run returned %v, want context.Canceled", h.runErr)
	}
	// The running turn was cancelled and still answered.
	expectCancelled(t, res, 2*time.Second)
}

func TestRunArguments(t *testing.T) {
	if err := Run(context.Background(), nil, io.Discard, Options{}); err == nil {
		t.Error("Run with a nil reader succeeded")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Run(ctx, strings.NewReader(""), io.Discard, Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Run with a done context returned %v", err)
	}
	// EOF straight away: Run returns nil.
	if err := Run(context.Background(), strings.NewReader(""), io.Discard, Options{}); err != nil {
		t.Errorf("Run on an empty input returned %v", err)
	}
	// A failing input is reported.
	boom := errors.New("boom")
	if err := Run(context.Background(), iotest.ErrReader(boom), io.Discard, Options{}); !errors.Is(err, boom) {
		t.Errorf("Run on a failing input returned %v, want %v", err, boom)
	}
}

func TestHelpers(t *testing.T) {
	for _, text := range []string{"", "one", "one two three four five six seven", "a  b\nc d ", truncateText} {
		cs := chunks(text, 3)
		if strings.Join(cs, "") != text {
			t.Errorf("chunks(%q) = %q do not join back", text, cs)
		}
		for _, c := range cs {
			if c == "" {
				t.Errorf("chunks(%q) has an empty chunk", text)
			}
		}
	}
	if got := cut("héllo wörld", 5); got != "héll…" {
		t.Errorf("cut = %q", got)
	}
	long := strings.Repeat("x", 300)
	if got := echo(long); !strings.HasSuffix(got, `…"`) || len([]rune(got)) != len(`You said: ""`)+echoLimit {
		t.Errorf("echo of a long request = %q", got)
	}
	if got := echo("  \n "); got != "You sent no text." {
		t.Errorf("echo of an empty request = %q", got)
	}
	for _, id := range []string{newMessageID(), newMessageID()} {
		if !uuidRE.MatchString(id) {
			t.Errorf("newMessageID() = %q, not a v4 UUID", id)
		}
	}
}

func TestEOFCancelsRunningTurn(t *testing.T) {
	fc := newFakeClient()
	h := newHarnessWith(t, fc, Options{ChunkDelay: testDelay}, acp.ClientCapabilities{})
	sid := h.newSession(testCwd(t))
	res := h.promptAsync(sid, "slow")
	waitFirstUpdate(t, fc)

	h.closeInput()
	// The turn is answered before Run lets the connection go.
	expectCancelled(t, res, 2*time.Second)
	select {
	case <-h.runDone:
	case <-time.After(2 * time.Second):
		t.Fatal("Run did not return after EOF")
	}
	if h.runErr != nil {
		t.Errorf("Run returned %v at EOF, want nil", h.runErr)
	}
}

// TestPipedRequestsAreAnswered writes requests and closes the input at once,
// as `printf ... | acpgate demo-agent` does: every request is still answered.
func TestPipedRequestsAreAnswered(t *testing.T) {
	input := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}
{"jsonrpc":"2.0","id":"new<1>","method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}
{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"demo-nope"}}
{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"demo-nope","prompt":[{"type":"text","text":"hi"}]}}
{"jsonrpc":"2.0","id":4,"method":"no/such/method","params":{}}
`
	for i := range 20 {
		var out testutil.LockedBuffer
		if err := Run(context.Background(), strings.NewReader(input), &out, Options{ChunkDelay: testDelay}); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		got := map[string]bool{}
		for line := range strings.Lines(out.String()) {
			id, isRequest := envelope([]byte(line))
			if id != "" && !isRequest {
				got[id] = true
			}
		}
		for _, id := range []string{"n:1", "s:new<1>", "n:3", "n:4"} {
			if !got[id] {
				t.Fatalf("run %d: no answer to request %s in:\n%s", i, id, out.String())
			}
		}
	}
}

func TestEnvelope(t *testing.T) {
	tests := []struct {
		line      string
		id        string
		isRequest bool
	}{
		{`{"jsonrpc":"2.0","id":7,"method":"x"}`, "n:7", true},
		{`{"jsonrpc":"2.0","id":7,"result":{}}`, "n:7", false},
		{`{"jsonrpc":"2.0","id":"a<b","method":"x"}`, "s:a<b", true},
		{`{"jsonrpc":"2.0","id":"a\u003cb","result":null}`, "s:a<b", false},
		{`{"jsonrpc":"2.0","id":null,"method":"x"}`, "", false},
		{`{"jsonrpc":"2.0","method":"x"}`, "", false},
		{`not json`, "", false},
	}
	for _, tt := range tests {
		id, isRequest := envelope([]byte(tt.line))
		if id != tt.id || (id != "" && isRequest != tt.isRequest) {
			t.Errorf("envelope(%s) = %q %v, want %q %v", tt.line, id, isRequest, tt.id, tt.isRequest)
		}
	}

	var s lineSplitter
	var lines []string
	collect := func(l []byte) { lines = append(lines, string(l)) }
	s.feed([]byte("ab"), collect)
	s.feed([]byte("c\nd\n\nef"), collect)
	s.feed([]byte("\n"), collect)
	if want := []string{"abc", "d", "", "ef"}; strings.Join(lines, "|") != strings.Join(want, "|") {
		t.Errorf("lines %q, want %q", lines, want)
	}
}
