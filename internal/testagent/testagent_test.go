package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acpgate/acpgate/internal/testutil"
)

// agentBin is the testagent binary, built once by TestMain.
var agentBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "testagent-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	agentBin = filepath.Join(dir, "testagent")
	if out, err := exec.Command("go", "build", "-o", agentBin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const wait = 5 * time.Second // upper bound for anything the agent should do

// proc is a running testagent driven over real pipes.
type proc struct {
	t       *testing.T
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	lines   chan string // stdout lines, without the newline; closed at EOF
	stderr  *testutil.LockedBuffer
	exited  chan struct{}
	waitErr error
}

func start(t *testing.T, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, lines: make(chan string, 4096), stderr: &testutil.LockedBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(agentBin, args...)
	p.cmd.Stderr = p.stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		r := bufio.NewReaderSize(stdout, 1<<16)
		for {
			line, err := r.ReadString('\n')
			if line != "" {
				p.lines <- strings.TrimSuffix(line, "\n")
			}
			if err != nil {
				break
			}
		}
		close(p.lines)
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.stdin.Close()
		select {
		case <-p.exited:
		case <-time.After(wait):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

func (p *proc) send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		p.t.Fatalf("write %q: %v", line, err)
	}
}

func (p *proc) sendJSON(v any) {
	p.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		p.t.Fatal(err)
	}
	p.send(string(b))
}

func (p *proc) request(id int, method string, params any) {
	p.t.Helper()
	p.sendJSON(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

// respond answers one of the agent's own requests.
func (p *proc) respond(id any, result any) {
	p.t.Helper()
	p.sendJSON(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

func (p *proc) respondError(id any, code int, msg string) {
	p.t.Helper()
	p.sendJSON(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}})
}

func (p *proc) cancel(sessionID string) {
	p.t.Helper()
	p.sendJSON(map[string]any{"jsonrpc": "2.0", "method": "session/cancel", "params": map[string]any{"sessionId": sessionID}})
}

// nextLine returns the next stdout line, failing on timeout or EOF.
func (p *proc) nextLine() string {
	p.t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			p.t.Fatalf("stdout closed; stderr: %s", p.stderr.String())
		}
		return l
	case <-time.After(wait):
		p.t.Fatal("timed out waiting for a line from the agent")
	}
	return ""
}

// next returns the next stdout line decoded as a JSON object.
func (p *proc) next() map[string]any {
	p.t.Helper()
	l := p.nextLine()
	var m map[string]any
	if err := json.Unmarshal([]byte(l), &m); err != nil {
		p.t.Fatalf("agent wrote non-JSON line %.200q: %v", l, err)
	}
	return m
}

// quiet asserts that the agent writes nothing for d.
func (p *proc) quiet(d time.Duration) {
	p.t.Helper()
	select {
	case l, ok := <-p.lines:
		if ok {
			p.t.Fatalf("expected silence, got %.200q", l)
		}
	case <-time.After(d):
	}
}

// eof asserts that stdout reaches EOF.
func (p *proc) eof() {
	p.t.Helper()
	select {
	case l, ok := <-p.lines:
		if ok {
			p.t.Fatalf("expected EOF on stdout, got %.200q", l)
		}
	case <-time.After(wait):
		p.t.Fatal("timed out waiting for stdout EOF")
	}
}

// exitCode waits for the process to end and returns its exit status.
func (p *proc) exitCode() int {
	p.t.Helper()
	select {
	case <-p.exited:
	case <-time.After(wait):
		p.t.Fatal("timed out waiting for the agent to exit")
	}
	var ee *exec.ExitError
	if errors.As(p.waitErr, &ee) {
		return ee.ExitCode()
	}
	if p.waitErr != nil {
		p.t.Fatal(p.waitErr)
	}
	return 0
}

// newSession runs session/new with request id 100 and returns the session id.
func (p *proc) newSession() string {
	p.t.Helper()
	p.request(100, "session/new", map[string]any{"cwd": "/", "mcpServers": []any{}})
	m := p.next()
	sid, _ := get(m, "result.sessionId").(string)
	if sid == "" {
		p.t.Fatalf("session/new answered %v", m)
	}
	return sid
}

// prompt sends session/prompt with the script as a single text block.
func (p *proc) prompt(id int, sid, script string) {
	p.t.Helper()
	p.request(id, "session/prompt", map[string]any{
		"sessionId": sid,
		"prompt":    []any{map[string]any{"type": "text", "text": script}},
	})
}

// turn collects the session/update payloads up to the response with the given
// id, and returns them with that response.
func (p *proc) turn(id int) (updates []any, resp map[string]any) {
	p.t.Helper()
	for {
		m := p.next()
		if m["method"] == "session/update" {
			updates = append(updates, get(m, "params.update"))
			continue
		}
		if isResponse(m, id) {
			return updates, m
		}
		p.t.Fatalf("unexpected message while waiting for response %d: %v", id, m)
	}
}

// chunkTexts returns the text of each update in updates (all must be text chunks).
func chunkTexts(t *testing.T, updates []any) []string {
	t.Helper()
	var out []string
	for _, u := range updates {
		s, ok := get(u, "content.text").(string)
		if !ok {
			t.Fatalf("not a text chunk: %v", u)
		}
		out = append(out, s)
	}
	return out
}

func isResponse(m map[string]any, id int) bool {
	_, hasMethod := m["method"]
	n, ok := m["id"].(float64)
	return !hasMethod && ok && int(n) == id
}

// get walks a dotted path through decoded JSON objects.
func get(v any, path string) any {
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// jsonEq asserts that got, marshalled to JSON, equals the JSON text want
// (compared as decoded values, so key order and spacing do not matter).
func jsonEq(t *testing.T, got any, want string) {
	t.Helper()
	var g, w any
	gb, err := json.Marshal(got)
	if err == nil {
		err = json.Unmarshal(gb, &g)
	}
	if err != nil {
		t.Fatalf("cannot re-encode %v: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want JSON %s: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("got  %s\nwant %s", gb, want)
	}
}

func TestInitializeDefaults(t *testing.T) {
	p := start(t)
	p.request(1, "initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
	jsonEq(t, p.next(), `{"jsonrpc":"2.0","id":1,"result":{
		"protocolVersion":1,
		"agentCapabilities":{"loadSession":false,"promptCapabilities":{"image":true,"audio":false,"embeddedContext":true}},
		"agentInfo":{"name":"testagent","version":"1.0.0"},
		"authMethods":[]}}`)
}

func TestInitializeFlagsAndAuthenticate(t *testing.T) {
	p := start(t, "--protocol-version", "7", "--auth-methods", "a,b", "--load-session")
	p.request(1, "initialize", map[string]any{"protocolVersion": 1})
	m := p.next()
	jsonEq(t, get(m, "result.protocolVersion"), `7`)
	jsonEq(t, get(m, "result.agentCapabilities.loadSession"), `true`)
	jsonEq(t, get(m, "result.authMethods"), `[{"id":"a","name":"a"},{"id":"b","name":"b"}]`)

	p.request(2, "authenticate", map[string]any{"methodId": "b"})
	jsonEq(t, p.next(), `{"jsonrpc":"2.0","id":2,"result":{}}`)
	p.request(3, "authenticate", map[string]any{"methodId": "c"})
	jsonEq(t, get(p.next(), "error.code"), `-32602`)
}

func TestSessionNewCounts(t *testing.T) {
	p := start(t)
	for i := 1; i <= 3; i++ {
		if got, want := p.newSession(), fmt.Sprintf("sess-%d", i); got != want {
			t.Fatalf("session %d: got %q, want %q", i, got, want)
		}
	}
}

func TestSessionNewError(t *testing.T) {
	p := start(t, "--session-new-error", "-32000:no sessions today", "--load-session")
	p.request(1, "session/new", map[string]any{"cwd": "/", "mcpServers": []any{}})
	jsonEq(t, p.next(), `{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"no sessions today"}}`)
	p.request(2, "session/load", map[string]any{"sessionId": "old", "cwd": "/", "mcpServers": []any{}})
	jsonEq(t, p.next(), `{"jsonrpc":"2.0","id":2,"error":{"code":-32000,"message":"no sessions today"}}`)
}

func TestSessionLoadReplays(t *testing.T) {
	p := start(t, "--load-session")
	p.request(5, "session/load", map[string]any{"sessionId": "old-1", "cwd": "/", "mcpServers": []any{}})
	jsonEq(t, p.next(), `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"old-1",
		"update":{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"earlier question"}}}}`)
	jsonEq(t, p.next(), `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"old-1",
		"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"earlier answer"}}}}`)
	jsonEq(t, p.next(), `{"jsonrpc":"2.0","id":5,"result":{}}`)

	// The loaded session can be prompted.
	p.prompt(6, "old-1", "chunk again")
	updates, resp := p.turn(6)
	jsonEq(t, chunkTexts(t, updates), `["again"]`)
	jsonEq(t, resp["result"], `{"stopReason":"end_turn"}`)
}

// keptSession opens a session on an agent keeping its sessions in dir and
// runs the prompt "chunk one" on it.
func keptSession(t *testing.T, dir string, flags ...string) string {
	t.Helper()
	p := start(t, append([]string{"--sessions-dir", dir}, flags...)...)
	sid := p.newSession()
	p.prompt(2, sid, "chunk one")
	p.turn(2)
	return sid
}

func TestAKeptSessionIsLoadedWithItsHistoryReplayedByALaterProcess(t *testing.T) {
	dir := t.TempDir()
	sid := keptSession(t, dir, "--load-session")

	again := start(t, "--sessions-dir", dir, "--load-session")
	again.request(3, "session/load", map[string]any{"sessionId": sid, "cwd": "/", "mcpServers": []any{}})
	jsonEq(t, get(again.next(), "params.update"), `{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"chunk one"}}`)
	jsonEq(t, get(again.next(), "params.update"), `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"replayed answer 1"}}`)
	jsonEq(t, again.next(), `{"jsonrpc":"2.0","id":3,"result":{}}`)
	again.prompt(4, sid, "history")
	updates, _ := again.turn(4)
	jsonEq(t, chunkTexts(t, updates), `["history via session/load: \"chunk one\""]`)

	again.request(5, "session/load", map[string]any{"sessionId": "never", "cwd": "/", "mcpServers": []any{}})
	jsonEq(t, get(again.next(), "error.code"), `-32602`)
}

func TestAKeptSessionIsResumedWithoutReplayWhenResumeIsAdvertised(t *testing.T) {
	dir := t.TempDir()
	sid := keptSession(t, dir, "--resume-session")

	again := start(t, "--sessions-dir", dir, "--resume-session")
	again.request(1, "initialize", map[string]any{"protocolVersion": 1})
	jsonEq(t, get(again.next(), "result.agentCapabilities.sessionCapabilities"), `{"resume":{}}`)
	again.request(3, "session/resume", map[string]any{"sessionId": sid, "cwd": "/"})
	jsonEq(t, again.next(), `{"jsonrpc":"2.0","id":3,"result":{}}`)
	again.prompt(4, sid, "history")
	updates, _ := again.turn(4)
	jsonEq(t, chunkTexts(t, updates), `["history via session/resume: \"chunk one\""]`)

	plain := start(t, "--sessions-dir", dir)
	plain.request(6, "session/resume", map[string]any{"sessionId": sid, "cwd": "/"})
	jsonEq(t, get(plain.next(), "error.code"), `-32601`)
}

func TestSessionLoadNotAdvertised(t *testing.T) {
	p := start(t)
	p.request(1, "session/load", map[string]any{"sessionId": "x"})
	jsonEq(t, get(p.next(), "error.code"), `-32601`)
}

func TestExitOnInitialize(t *testing.T) {
	p := start(t, "--exit-on-initialize", "3")
	p.request(1, "initialize", map[string]any{"protocolVersion": 1})
	p.eof()
	if code := p.exitCode(); code != 3 {
		t.Fatalf("exit status %d, want 3", code)
	}
}

func TestStrayStartup(t *testing.T) {
	p := start(t, "--stray-startup")
	if l := p.nextLine(); l != "starting up..." {
		t.Fatalf("first line %q", l)
	}
	p.request(1, "initialize", map[string]any{"protocolVersion": 1})
	jsonEq(t, get(p.next(), "result.protocolVersion"), `1`)
}

func TestUnknownMethodAndBadInput(t *testing.T) {
	p := start(t)
	p.request(1, "session/frobnicate", map[string]any{})
	jsonEq(t, get(p.next(), "error.code"), `-32601`)
	// Unknown notifications are ignored.
	p.send(`{"jsonrpc":"2.0","method":"whatever","params":{}}`)
	p.send(`this is not json`)
	m := p.next()
	jsonEq(t, m["id"], `null`)
	jsonEq(t, get(m, "error.code"), `-32700`)
	// Prompting an unknown session is invalid.
	p.prompt(2, "sess-99", "chunk x")
	jsonEq(t, get(p.next(), "error.code"), `-32602`)
}

func TestStdinEOFExits0(t *testing.T) {
	p := start(t)
	p.stdin.Close()
	p.eof()
	if code := p.exitCode(); code != 0 {
		t.Fatalf("exit status %d, want 0", code)
	}
}

func TestPromptDefaultEnding(t *testing.T) {
	p := start(t)
	sid := p.newSession()
	p.prompt(1, sid, "")
	updates, resp := p.turn(1)
	if len(updates) != 0 {
		t.Fatalf("updates: %v", updates)
	}
	jsonEq(t, resp, `{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`)
}

func TestPromptConcatenatesTextBlocks(t *testing.T) {
	p := start(t)
	sid := p.newSession()
	p.request(1, "session/prompt", map[string]any{"sessionId": sid, "prompt": []any{
		map[string]any{"type": "text", "text": "chunk one\nchu"},
		map[string]any{"type": "image", "data": "aGk=", "mimeType": "image/png"},
		map[string]any{"type": "text", "text": "nk two\n\n  \nstop max_tokens\n"},
	}})
	updates, resp := p.turn(1)
	jsonEq(t, chunkTexts(t, updates), `["one","two"]`)
	jsonEq(t, resp["result"], `{"stopReason":"max_tokens"}`)
}

func TestUpdateDirectives(t *testing.T) {
	p := start(t)
	sid := p.newSession()
	p.prompt(1, sid, strings.Join([]string{
		`chunk hello world`,
		`chunk a\nb\\nc`,
		`chunk@m1 with id`,
		`thought hmm`,
		`user question`,
		`image`,
		`tool t1 Read the file`,
		`tool_done t1`,
		`plan A|B|C`,
		`usage 1000 250`,
		`raw future_kind`,
	}, "\n"))
	updates, resp := p.turn(1)
	jsonEq(t, updates, `[
		{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hello world"}},
		{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a\nb\\nc"}},
		{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"with id"},"messageId":"m1"},
		{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"hmm"}},
		{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"question"}},
		{"sessionUpdate":"agent_message_chunk","content":{"type":"image","data":"aGk=","mimeType":"image/png"}},
		{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Read the file","kind":"read","status":"pending"},
		{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"completed",
		 "content":[{"type":"content","content":{"type":"text","text":"done"}}]},
		{"sessionUpdate":"plan","entries":[
			{"content":"A","priority":"medium","status":"pending"},
			{"content":"B","priority":"medium","status":"pending"},
			{"content":"C","priority":"medium","status":"pending"}]},
		{"sessionUpdate":"usage_update","size":1000,"used":250},
		{"sessionUpdate":"future_kind","x":1}
	]`)
	jsonEq(t, resp["result"], `{"stopReason":"end_turn"}`)
}

func TestUpdatesCarrySessionID(t *testing.T) {
	p := start(t)
	p.newSession()
	sid := p.newSession() // sess-2
	p.prompt(1, sid, "chunk x")
	jsonEq(t, get(p.next(), "params.sessionId"), `"sess-2"`)
	jsonEq(t, get(p.next(), "result"), `{"stopReason":"end_turn"}`)
}

func TestUnknownDirective(t *testing.T) {
	p := start(t)
	sid := p.newSession()
	p.prompt(1, sid, "chunk before\nteleport now\nchunk after")
	m := p.next() // nothing runs: the first message is the error
	jsonEq(t, get(m, "error.code"), `-32602`)
	if msg, _ := get(m, "error.message").(string); !strings.Contains(msg, "teleport") {
		t.Fatalf("error message %q does not name the directive", msg)
	}
	p.prompt(2, sid, "sleep soon")
	jsonEq(t, get(p.next(), "error.code"), `-32602`)
}

func TestPermission(t *testing.T) {
	p := start(t)
	sid := p.newSession()
	p.prompt(1, sid, "tool t1 Edit\npermission t1\npermission t1\npermission t1\nstop end_turn")
	jsonEq(t, get(p.next(), "params.update.sessionUpdate"), `"tool_call"`)

	req := p.next()
	jsonEq(t, req, `{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{
		"sessionId":"`+sid+`","toolCall":{"toolCallId":"t1"},
		"options":[{"optionId":"allow","name":"Allow","kind":"allow_once"},
		           {"optionId":"reject","name":"Reject","kind":"reject_once"}]}}`)
	// A response with an id the agent never used changes nothing.
	p.respond(7, map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": "allow"}})
	p.quiet(100 * time.Millisecond)
	p.respond(0, map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": "reject"}})
	jsonEq(t, get(p.next(), "params.update.content.text"), `"permission:reject"`)

	jsonEq(t, get(p.next(), "id"), `1`)
	p.respond(1, map[string]any{"outcome": map[string]any{"outcome": "cancelled"}})
	jsonEq(t, get(p.next(), "params.update.content.text"), `"permission:cancelled"`)

	jsonEq(t, get(p.next(), "id"), `2`)
	p.respondError(2, -32603, "boom")
	jsonEq(t, get(p.next(), "params.update.content.text"), `"permission-error:-32603:boom"`)

	jsonEq(t, p.next(), `{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`)
}

func TestReaderKeepsReadingDuringScript(t *testing.T) {
	p := start(t)
	sid := p.newSession()
	p.prompt(1, sid, "permission t1")
	jsonEq(t, get(p.next(), "method"), `"session/request_permission"`)
	// While the script waits for the permission answer, other requests are served.
	p.request(2, "session/new", map[string]any{})
	jsonEq(t, p.next(), `{"jsonrpc":"2.0","id":2,"result":{"sessionId":"sess-2"}}`)
	p.respond(0, map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": "allow"}})
	updates, resp := p.turn(1)
	jsonEq(t, chunkTexts(t, updates), `["permission:allow"]`)
	jsonEq(t, resp["result"], `{"stopReason":"end_turn"}`)
}

func TestFileSystemAndTerminal(t *testing.T) {
	p := start(t)
	sid := p.newSession()
	p.prompt(1, sid, "read /a.txt\nread /b.txt 3 10\nread /missing\nwrite /c.txt line1\\nline2\nwrite /ro.txt x\nterminal\nterminal")

	jsonEq(t, p.next(), `{"jsonrpc":"2.0","id":0,"method":"fs/read_text_file","params":{"sessionId":"`+sid+`","path":"/a.txt"}}`)
	p.respond(0, map[string]any{"content": "alpha\nbeta"})
	jsonEq(t, get(p.next(), "params.update.content.text"), `"read:alpha\nbeta"`)

	jsonEq(t, p.next(), `{"jsonrpc":"2.0","id":1,"method":"fs/read_text_file","params":{"sessionId":"`+sid+`","path":"/b.txt","line":3,"limit":10}}`)
	p.respond(1, map[string]any{"content": "gamma"})
	jsonEq(t, get(p.next(), "params.update.content.text"), `"read:gamma"`)

	jsonEq(t, get(p.next(), "id"), `2`)
	p.respondError(2, -32002, "not found")
	jsonEq(t, get(p.next(), "params.update.content.text"), `"read-error:-32002:not found"`)

	jsonEq(t, p.next(), `{"jsonrpc":"2.0","id":3,"method":"fs/write_text_file","params":{"sessionId":"`+sid+`","path":"/c.txt","content":"line1\nline2"}}`)
	p.respond(3, nil)
	jsonEq(t, get(p.next(), "params.update.content.text"), `"write:ok"`)

	jsonEq(t, get(p.next(), "method"), `"fs/write_text_file"`)
	p.respondError(4, -32603, "read-only")
	jsonEq(t, get(p.next(), "params.update.content.text"), `"write-error:-32603:read-only"`)

	req := p.next()
	jsonEq(t, get(req, "method"), `"terminal/create"`)
	jsonEq(t, get(req, "params.sessionId"), strconv.Quote(sid))
	p.respondError(5, -32601, "method not found")
	jsonEq(t, get(p.next(), "params.update.content.text"), `"terminal-error:-32601"`)

	jsonEq(t, get(p.next(), "id"), `6`)
	p.respond(6, map[string]any{"terminalId": "term-1"})
	jsonEq(t, get(p.next(), "params.update.content.text"), `"terminal:ok"`)

	_, resp := p.turn(1)
	jsonEq(t, resp["result"], `{"stopReason":"end_turn"}`)
}

func TestCancelInterruptsSleepAndHang(t *testing.T) {
	for _, pause := range []string{"sleep 60000", "hang"} {
		t.Run(pause, func(t *testing.T) {
			p := start(t)
			sid := p.newSession()
			p.prompt(1, sid, "chunk before\n"+pause+"\nchunk after")
			jsonEq(t, get(p.next(), "params.update.content.text"), `"before"`)
			begin := time.Now()
			p.cancel("some-other-session") // not ours: no effect
			p.quiet(100 * time.Millisecond)
			p.cancel(sid)
			jsonEq(t, p.next(), `{"jsonrpc":"2.0","id":1,"result":{"stopReason":"cancelled"}}`)
			if d := time.Since(begin); d > 3*time.Second {
				t.Fatalf("cancel took %v", d)
			}
		})
	}
}

func TestCancelDuringPermission(t *testing.T) {
	p := start(t)
	sid := p.newSession()
	p.prompt(1, sid, "permission t1\nchunk never")
	jsonEq(t, get(p.next(), "method"), `"session/request_permission"`)
	p.cancel(sid)
	// The agent keeps waiting for the answer ACP obliges the client to give.
	p.quiet(200 * time.Millisecond)
	p.respond(0, map[string]any{"outcome": map[string]any{"outcome": "cancelled"}})
	updates, resp := p.turn(1)
	jsonEq(t, chunkTexts(t, updates), `["permission:cancelled"]`)
	jsonEq(t, resp["result"], `{"stopReason":"cancelled"}`)
}

func TestSleepRunsToItsEnd(t *testing.T) {
	p := start(t)
	sid := p.newSession()
	begin := time.Now()
	p.prompt(1, sid, "sleep 200\nchunk woke")
	updates, _ := p.turn(1)
	jsonEq(t, chunkTexts(t, updates), `["woke"]`)
	if d := time.Since(begin); d < 200*time.Millisecond {
		t.Fatalf("slept only %v", d)
	}
}

func TestIgnoreCancel(t *testing.T) {
	t.Run("sleep", func(t *testing.T) {
		p := start(t)
		sid := p.newSession()
		p.prompt(1, sid, "ignore_cancel\nchunk before\nsleep 300\nchunk after")
		jsonEq(t, get(p.next(), "params.update.content.text"), `"before"`)
		p.cancel(sid)
		updates, resp := p.turn(1)
		jsonEq(t, chunkTexts(t, updates), `["after"]`)
		jsonEq(t, resp["result"], `{"stopReason":"end_turn"}`)
	})
	t.Run("hang", func(t *testing.T) {
		p := start(t)
		sid := p.newSession()
		p.prompt(1, sid, "ignore_cancel\nchunk before\nhang")
		jsonEq(t, get(p.next(), "params.update.content.text"), `"before"`)
		p.cancel(sid)
		p.quiet(300 * time.Millisecond)
		// Still alive and serving.
		p.request(2, "session/new", map[string]any{})
		jsonEq(t, get(p.next(), "result.sessionId"), `"sess-2"`)
	})
}

func TestFlood(t *testing.T) {
	p := start(t)
	sid := p.newSession()
	p.prompt(1, sid, "flood 2000 300")
	updates, resp := p.turn(1)
	if len(updates) != 2000 {
		t.Fatalf("%d updates, want 2000", len(updates))
	}
	want := strings.Repeat("x", 300)
	for i, u := range updates {
		if get(u, "messageId") != "flood" || get(u, "content.text") != want {
			t.Fatalf("update %d: %v", i, u)
		}
	}
	jsonEq(t, resp["result"], `{"stopReason":"end_turn"}`)
}

func TestFloodTimed(t *testing.T) {
	check := func(t *testing.T, updates []any, n, size int, from, to time.Time) []int64 {
		t.Helper()
		if len(updates) != n {
			t.Fatalf("%d updates, want %d", len(updates), n)
		}
		var stamps []int64
		for i, u := range updates {
			text, _ := get(u, "content.text").(string)
			if get(u, "messageId") != "flood" || len(text) != size {
				t.Fatalf("update %d: %v", i, u)
			}
			idx, err1 := strconv.Atoi(text[:9])
			ns, err2 := strconv.ParseInt(text[10:29], 10, 64)
			if err1 != nil || err2 != nil || idx != i || text[9] != ' ' || text[29] != ' ' || strings.Trim(text[30:], "x") != "" {
				t.Fatalf("update %d: bad stamp in %.40q", i, text)
			}
			if ns < from.UnixNano() || ns > to.UnixNano() {
				t.Fatalf("update %d: send time %d outside the turn [%d, %d]", i, ns, from.UnixNano(), to.UnixNano())
			}
			stamps = append(stamps, ns)
		}
		return stamps
	}
	t.Run("burst", func(t *testing.T) {
		p := start(t)
		sid := p.newSession()
		from := time.Now()
		p.prompt(1, sid, "flood_timed 3000 64")
		updates, resp := p.turn(1)
		check(t, updates, 3000, 64, from, time.Now())
		jsonEq(t, resp["result"], `{"stopReason":"end_turn"}`)
	})
	t.Run("paced", func(t *testing.T) {
		p := start(t)
		sid := p.newSession()
		from := time.Now()
		p.prompt(1, sid, "flood_timed 200 100 1000\nstop end_turn")
		updates, resp := p.turn(1)
		stamps := check(t, updates, 200, 100, from, time.Now())
		// 200 chunks at 1,000/s span about 199 ms.
		if span := time.Duration(stamps[199] - stamps[0]); span < 190*time.Millisecond || span > 2*time.Second {
			t.Fatalf("200 chunks at 1000/s took %v", span)
		}
		jsonEq(t, resp["result"], `{"stopReason":"end_turn"}`)
	})
	t.Run("cancel", func(t *testing.T) {
		p := start(t)
		sid := p.newSession()
		p.prompt(1, sid, "flood_timed 100000 64 100")
		p.next()
		p.cancel(sid)
		updates, resp := p.turn(1)
		if len(updates) > 1000 {
			t.Fatalf("%d more updates after cancel", len(updates))
		}
		jsonEq(t, resp["result"], `{"stopReason":"cancelled"}`)
	})
	t.Run("bad arguments", func(t *testing.T) {
		p := start(t)
		sid := p.newSession()
		for i, script := range []string{"flood_timed 10 29", "flood_timed 10", "flood_timed 10 64 -1", "flood_timed 1 64 1 1"} {
			p.prompt(i+1, sid, script)
			jsonEq(t, get(p.next(), "error.code"), `-32602`)
		}
	})
}

func TestStderr(t *testing.T) {
	p := start(t)
	sid := p.newSession()
	p.prompt(1, sid, "stderr 1000")
	p.turn(1)
	p.stdin.Close()
	p.exitCode()
	got := p.stderr.String()
	if len(got) != 1000 || strings.Trim(got, "e\n") != "" || !strings.HasSuffix(got, "\n") {
		t.Fatalf("stderr has %d bytes: %.100q", len(got), got)
	}
}

func TestStrayAndOversized(t *testing.T) {
	p := start(t)
	sid := p.newSession()
	p.prompt(1, sid, "stray hello, I am not JSON {\noversized 200000\nchunk after")
	if l := p.nextLine(); l != "hello, I am not JSON {" {
		t.Fatalf("stray line %q", l)
	}
	l := p.nextLine()
	if len(l) <= 200000 {
		t.Fatalf("oversized line is only %d bytes", len(l))
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(l), &m); err != nil {
		t.Fatalf("oversized line is not JSON: %v", err)
	}
	jsonEq(t, get(m, "params.update.sessionUpdate"), `"agent_message_chunk"`)
	updates, _ := p.turn(1)
	jsonEq(t, chunkTexts(t, updates), `["after"]`)
}

func TestGrandchild(t *testing.T) {
	p := start(t)
	pid := p.startedPid("grandchild", "grandchild:")
	child, err := os.FindProcess(pid)
	if err != nil {
		t.Fatal(err)
	}
	defer child.Kill()
	if err := child.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("grandchild %d is not running: %v", pid, err)
	}
	// It stays alive after the agent exits: cleaning it up is the gateway's job.
	p.stdin.Close()
	p.exitCode()
	if err := child.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("grandchild %d died with the agent: %v", pid, err)
	}
}

func TestEndings(t *testing.T) {
	cases := []struct {
		script string
		want   string // the whole response line, as JSON
	}{
		{"stop teleported", `{"jsonrpc":"2.0","id":1,"result":{"stopReason":"teleported"}}`},
		{"stop refusal\nchunk never", `{"jsonrpc":"2.0","id":1,"result":{"stopReason":"refusal"}}`},
		{"stop_usage end_turn 10 5", `{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn",
			"usage":{"inputTokens":10,"outputTokens":5,"totalTokens":15}}}`},
		{"error -32000 it went wrong badly", `{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"it went wrong badly"}}`},
		{"neither", `{"jsonrpc":"2.0","id":1}`},
	}
	for _, c := range cases {
		t.Run(strings.Fields(c.script)[0], func(t *testing.T) {
			p := start(t)
			sid := p.newSession()
			p.prompt(1, sid, c.script)
			updates, resp := p.turn(1)
			if len(updates) != 0 {
				t.Fatalf("updates after the ending: %v", updates)
			}
			jsonEq(t, resp, c.want)
		})
	}
}

func TestGarbageResponse(t *testing.T) {
	p := start(t)
	sid := p.newSession()
	p.prompt(1, sid, "garbage_response")
	if l := p.nextLine(); l != `{"jsonrpc":"2.0","id":1,"result":` {
		t.Fatalf("line %q", l)
	}
	p.quiet(100 * time.Millisecond)
}

func TestExitDirective(t *testing.T) {
	p := start(t)
	sid := p.newSession()
	p.prompt(1, sid, "chunk bye\nexit 5\nchunk never")
	jsonEq(t, get(p.next(), "params.update.content.text"), `"bye"`)
	p.eof()
	if code := p.exitCode(); code != 5 {
		t.Fatalf("exit status %d, want 5", code)
	}
}

func TestCloseStdout(t *testing.T) {
	p := start(t)
	sid := p.newSession()
	p.prompt(1, sid, "chunk last words\nclose_stdout\nchunk never")
	jsonEq(t, get(p.next(), "params.update.content.text"), `"last words"`)
	p.eof()
	select {
	case <-p.exited:
		t.Fatal("agent exited after close_stdout; it should keep running")
	case <-time.After(200 * time.Millisecond):
	}
	p.stdin.Close()
	if code := p.exitCode(); code != 0 {
		t.Fatalf("exit status %d, want 0", code)
	}
}

func TestSpawnStartsAGrandchildThatHoldsTheAgentsStdoutInASessionOfItsOwn(t *testing.T) {
	p := start(t)
	pid := p.startedPid("spawn --setsid 300", "spawned:")
	// Killed before the cleanup waits for the agent's stdout to end, which
	// the grandchild holds open.
	defer syscall.Kill(pid, syscall.SIGKILL)
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("grandchild %d is not running: %v", pid, err)
	}
	// Fields after the command's closing parenthesis: state, ppid, pgrp, session.
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	if f[3] != strconv.Itoa(pid) {
		t.Errorf("grandchild %d is in session %s, not one of its own", pid, f[3])
	}
	theirs, err1 := os.Readlink(fmt.Sprintf("/proc/%d/fd/1", pid))
	ours, err2 := os.Readlink(fmt.Sprintf("/proc/%d/fd/1", p.cmd.Process.Pid))
	if err1 != nil || err2 != nil || theirs != ours {
		t.Errorf("grandchild's stdout %q (%v), the agent's %q (%v)", theirs, err1, ours, err2)
	}
	if _, err := parseScript("spawn --later 3"); err == nil {
		t.Error("spawn accepted a flag other than --setsid")
	}
}

// startedPid runs a one-directive script that starts a process in a new
// session and returns the pid its chunk, prefix followed by the pid, reports.
func (p *proc) startedPid(script, prefix string) int {
	p.t.Helper()
	sid := p.newSession()
	p.prompt(1, sid, script)
	updates, _ := p.turn(1)
	text := chunkTexts(p.t, updates)[0]
	pidText, ok := strings.CutPrefix(text, prefix)
	pid, err := strconv.Atoi(pidText)
	if !ok || err != nil {
		p.t.Fatalf("chunk %q", text)
	}
	return pid
}

func TestReadfloodAndReqfloodSendRequestsWithoutWaitingForAnswers(t *testing.T) {
	p := start(t)
	sid := p.newSession()
	p.prompt(1, sid, "readflood 2 /tmp/f\nreqflood 3")
	var reads, unknown []int
	for range 5 {
		m := p.next()
		id := int(m["id"].(float64))
		switch m["method"] {
		case "fs/read_text_file":
			jsonEq(t, m["params"], fmt.Sprintf(`{"sessionId":%q,"path":"/tmp/f"}`, sid))
			reads = append(reads, id)
		case "testagent/flood":
			jsonEq(t, m["params"], `{}`)
			unknown = append(unknown, id)
		default:
			t.Fatalf("unexpected %v", m)
		}
	}
	if !reflect.DeepEqual(reads, []int{0, 1}) || !reflect.DeepEqual(unknown, []int{2, 3, 4}) {
		t.Errorf("read ids %v, unknown-method ids %v", reads, unknown)
	}
	_, resp := p.turn(1) // unanswered: the turn does not wait
	jsonEq(t, resp["result"], `{"stopReason":"end_turn"}`)
	for id := range 5 {
		p.respondError(id, -32601, "no")
	}
	p.quiet(200 * time.Millisecond)
	if s := p.stderr.String(); s != "" {
		t.Errorf("answers to the flood were reported as unmatched: %s", s)
	}
}

func TestAStalledAgentHandlesNothingMoreFromStdinNotEvenEOF(t *testing.T) {
	p := start(t)
	sid := p.newSession()
	p.prompt(1, sid, "stall\nchunk after")
	updates, resp := p.turn(1)
	if got := chunkTexts(t, updates); !reflect.DeepEqual(got, []string{"after"}) {
		t.Errorf("chunks %q", got)
	}
	jsonEq(t, resp["result"], `{"stopReason":"end_turn"}`)
	p.request(2, "session/new", map[string]any{"cwd": "/", "mcpServers": []any{}})
	p.quiet(300 * time.Millisecond)
	_ = p.stdin.Close()
	select {
	case <-p.exited:
		t.Fatal("a stalled agent noticed stdin EOF and exited")
	case <-time.After(300 * time.Millisecond):
	}
	_ = p.cmd.Process.Kill()
}

func TestOSReadAndWriteUseTheFileSystemDirectly(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f.txt")
	p := start(t)
	sid := p.newSession()
	p.prompt(1, sid, "oswrite "+file+" a\\nb\nosread "+file+"\nosread "+filepath.Join(dir, "missing"))
	jsonEq(t, get(p.next(), "params.update.content.text"), `"oswrite:ok"`)
	jsonEq(t, get(p.next(), "params.update.content.text"), `"osread:a\nb"`)
	text, _ := get(p.next(), "params.update.content.text").(string)
	if !strings.HasPrefix(text, "osread-error:") || !strings.Contains(text, "no such file") {
		t.Errorf("reading a missing file: %s", text)
	}
	_, resp := p.turn(1)
	jsonEq(t, resp["result"], `{"stopReason":"end_turn"}`)
}
