package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// JSON-RPC error codes used by the agent.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602

	codeRequestCancelled = -32800
)

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// message is any incoming JSON-RPC message: request, notification or response.
type message struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *rpcError       `json:"error,omitempty"`
}

// outRequest is an outgoing request (ID set) or notification (ID nil).
type outRequest struct {
	JSONRPC string `json:"jsonrpc"`
	ID      *int64 `json:"id,omitempty"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}

// outResponse is an outgoing response; exactly one of Result and Error is set.
type outResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// obj is shorthand for JSON objects built on the fly.
type obj = map[string]any

// output serializes every write to stdout, one line at a time.
type output struct {
	mu     sync.Mutex
	f      *os.File
	closed bool // after close_stdout every write is dropped
}

// writeRaw writes b followed by a newline, verbatim.
func (o *output) writeRaw(b []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return
	}
	line := make([]byte, 0, len(b)+1)
	line = append(append(line, b...), '\n')
	_, _ = o.f.Write(line)
}

func (o *output) writeJSON(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("testagent: marshal %T: %v", v, err))
	}
	o.writeRaw(b)
}

// burst runs write with one buffered writer on stdout, flushed at the end,
// holding the lock so that the burst is not interleaved.
func (o *output) burst(write func(w *bufio.Writer)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return
	}
	w := bufio.NewWriterSize(o.f, 64<<10)
	write(w)
	_ = w.Flush()
}

// writeRepeated writes line n times in one burst.
func (o *output) writeRepeated(line []byte, n int) {
	o.burst(func(w *bufio.Writer) {
		for range n {
			_, _ = w.Write(line)
			_ = w.WriteByte('\n')
		}
	})
}

func (o *output) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.closed {
		o.closed = true
		_ = o.f.Close()
	}
}

// agent holds the per-process state shared by the reader loop and the
// goroutines running prompt scripts.
type agent struct {
	cfg config
	out *output

	mu          sync.Mutex
	lastSession int                        // sess-<n> counter
	sessions    map[string]bool            // known session ids
	openedBy    map[string]string          // session id → the method that opened it in this process
	turns       map[*turn]struct{}         // running prompt turns
	nextID      int64                      // id of the agent's next own request
	pending     map[int64]chan<- *message  // agent requests awaiting an answer
	settings    map[string]*settings       // session id → its mode and model (--modes)
	hung        map[string]json.RawMessage // --hang-on requests unanswered, by id as sent

	stallOnce sync.Once
	stalled   chan struct{} // closed by the stall directive: stdin is no longer read
}

func newAgent(cfg config, stdout *os.File) *agent {
	return &agent{
		cfg:      cfg,
		out:      &output{f: stdout},
		sessions: map[string]bool{},
		openedBy: map[string]string{},
		turns:    map[*turn]struct{}{},
		pending:  map[int64]chan<- *message{},
		settings: map[string]*settings{},
		hung:     map[string]json.RawMessage{},
		stalled:  make(chan struct{}),
	}
}

func (a *agent) reply(id json.RawMessage, result any) {
	a.out.writeJSON(outResponse{JSONRPC: "2.0", ID: id, Result: result})
}

func (a *agent) replyError(id json.RawMessage, code int, msg string) {
	a.out.writeJSON(outResponse{JSONRPC: "2.0", ID: id, Error: &rpcError{Code: code, Message: msg}})
}

func (a *agent) notify(method string, params any) {
	a.out.writeJSON(outRequest{JSONRPC: "2.0", Method: method, Params: params})
}

// sessionUpdate sends one session/update notification.
func (a *agent) sessionUpdate(sessionID string, update obj) {
	a.notify("session/update", obj{"sessionId": sessionID, "update": update})
}

// call sends a request of the agent's own and waits for the client's answer.
// The wait ends only with the answer (or with the process, at stdin EOF).
//
// When after is positive and no answer came within it, the request is
// withdrawn with $/cancel_request, and the wait goes on for the answer ACP
// still requires.
func (a *agent) call(method string, params any, after time.Duration) *message {
	ch := make(chan *message, 1)
	a.mu.Lock()
	id := a.nextID
	a.nextID++
	a.pending[id] = ch
	a.mu.Unlock()
	a.out.writeJSON(outRequest{JSONRPC: "2.0", ID: &id, Method: method, Params: params})
	if after <= 0 {
		return <-ch
	}
	timer := time.NewTimer(after)
	defer timer.Stop()
	select {
	case m := <-ch:
		return m
	case <-timer.C:
		a.notify("$/cancel_request", obj{"requestId": id})
		return <-ch
	}
}

// handleLine dispatches one line read from stdin. It runs on the reader
// goroutine and must not block: prompt scripts run on their own goroutines.
func (a *agent) handleLine(line []byte) {
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		a.replyError(json.RawMessage("null"), codeParseError, "parse error: "+err.Error())
		return
	}
	hasID := len(m.ID) > 0
	if m.Method != "" {
		a.recordMeta(&m)
		a.recordParams(&m)
	}
	switch {
	case m.Method != "" && hasID:
		a.handleRequest(&m)
	case m.Method != "":
		a.handleNotification(&m)
	case hasID:
		a.handleResponse(&m)
	default:
		a.replyError(json.RawMessage("null"), codeInvalidRequest, "invalid request: no method and no id")
	}
}

func (a *agent) handleResponse(m *message) {
	var id int64
	if err := json.Unmarshal(m.ID, &id); err != nil {
		fmt.Fprintf(os.Stderr, "testagent: response with id %s matches no request of mine\n", m.ID)
		return
	}
	a.mu.Lock()
	ch, ok := a.pending[id]
	delete(a.pending, id)
	a.mu.Unlock()
	if !ok {
		fmt.Fprintf(os.Stderr, "testagent: response with id %d matches no pending request\n", id)
		return
	}
	ch <- m
}

func (a *agent) handleNotification(m *message) {
	if m.Method == "$/cancel_request" {
		a.withdrawn(m)
		return
	}
	if m.Method != "session/cancel" {
		return
	}
	var p struct {
		SessionID string `json:"sessionId"`
	}
	if json.Unmarshal(m.Params, &p) != nil {
		return
	}
	a.mu.Lock()
	var hit []*turn
	for t := range a.turns {
		if t.sessionID == p.SessionID {
			hit = append(hit, t)
		}
	}
	a.mu.Unlock()
	for _, t := range hit {
		t.cancel()
	}
}

func (a *agent) handleRequest(m *message) {
	if m.Method == a.cfg.hangOn {
		// Never answered, unless the client withdraws it.
		a.mu.Lock()
		a.hung[string(m.ID)] = m.ID
		a.mu.Unlock()
		return
	}
	switch m.Method {
	case "initialize":
		a.initialize(m)
	case "authenticate":
		a.authenticate(m)
	case "session/new":
		a.newSession(m)
	case "session/load":
		a.loadSession(m)
	case "session/resume":
		a.resumeSession(m)
	case "session/prompt":
		a.prompt(m)
	case "session/set_mode":
		a.setMode(m)
	case "session/set_config_option":
		a.setConfigOption(m)
	case "session/list":
		if !a.cfg.listSessions {
			a.replyError(m.ID, codeMethodNotFound, "method not found: "+m.Method)
			return
		}
		a.listSessions(m)
	case "session/delete":
		if !a.cfg.deleteSessions {
			a.replyError(m.ID, codeMethodNotFound, "method not found: "+m.Method)
			return
		}
		a.reply(m.ID, obj{})
	case "session/close":
		if !a.cfg.closeSession {
			a.replyError(m.ID, codeMethodNotFound, "method not found: "+m.Method)
			return
		}
		a.reply(m.ID, obj{})
	default:
		a.replyError(m.ID, codeMethodNotFound, "method not found: "+m.Method)
	}
}

func (a *agent) initialize(m *message) {
	if a.cfg.exitOnInit >= 0 {
		os.Exit(a.cfg.exitOnInit)
	}
	time.Sleep(a.cfg.initDelay)
	methods := []obj{}
	for _, id := range a.cfg.authMethods {
		methods = append(methods, obj{"id": id, "name": id})
	}
	caps := obj{
		"loadSession": a.cfg.loadSession,
		"promptCapabilities": obj{
			"image":           a.cfg.promptCaps["image"],
			"audio":           a.cfg.promptCaps["audio"],
			"embeddedContext": a.cfg.promptCaps["embeddedContext"],
		},
	}
	if len(a.cfg.mcpCaps) > 0 {
		mcp := obj{}
		for _, name := range a.cfg.mcpCaps {
			mcp[name] = true
		}
		caps["mcpCapabilities"] = mcp
	}
	sessionCaps := obj{}
	if a.cfg.resumeSession {
		sessionCaps["resume"] = obj{}
	}
	if a.cfg.closeSession {
		sessionCaps["close"] = obj{}
	}
	if a.cfg.listSessions {
		sessionCaps["list"] = obj{}
	}
	if a.cfg.deleteSessions {
		sessionCaps["delete"] = obj{}
	}
	if len(sessionCaps) > 0 {
		caps["sessionCapabilities"] = sessionCaps
	}
	a.reply(m.ID, obj{
		"protocolVersion":   a.cfg.protocolVersion,
		"agentCapabilities": caps,
		"agentInfo":         obj{"name": "testagent", "version": "1.0.0"},
		"authMethods":       methods,
	})
}

func (a *agent) authenticate(m *message) {
	var p struct {
		MethodID string `json:"methodId"`
	}
	_ = json.Unmarshal(m.Params, &p)
	for _, id := range a.cfg.authMethods {
		if id == p.MethodID {
			a.reply(m.ID, obj{})
			return
		}
	}
	a.replyError(m.ID, codeInvalidParams, fmt.Sprintf("unknown auth method %q (advertised: %s)",
		p.MethodID, strings.Join(a.cfg.authMethods, ",")))
}

func (a *agent) newSession(m *message) {
	if e := a.cfg.sessionNewErr; e != nil {
		a.replyError(m.ID, e.Code, e.Message)
		return
	}
	a.mu.Lock()
	a.lastSession++
	id := fmt.Sprintf("sess-%d", a.lastSession)
	if a.cfg.uniqueSessions {
		id = fmt.Sprintf("sess-%s-%d", ownPid(), a.lastSession)
	}
	a.sessions[id] = true
	a.openedBy[id] = "session/new"
	if a.persisted() {
		a.writeHistory(id, nil)
	}
	a.mu.Unlock()
	a.reply(m.ID, a.advertised(id, obj{"sessionId": id}))
	a.advertiseCommands(id)
}

// advertiseCommands sends the --commands, if any, for a session that has
// just been opened.
func (a *agent) advertiseCommands(sessionID string) {
	if len(a.cfg.commands) == 0 {
		return
	}
	var cmds []obj
	for _, name := range a.cfg.commands {
		cmds = append(cmds, obj{"name": name, "description": "the " + name + " command"})
	}
	a.sessionUpdate(sessionID, obj{"sessionUpdate": "available_commands_update", "availableCommands": cmds})
}

func (a *agent) loadSession(m *message) {
	if !a.cfg.loadSession {
		a.replyError(m.ID, codeMethodNotFound, "method not found: session/load (loadSession not advertised)")
		return
	}
	if e := a.cfg.sessionNewErr; e != nil {
		a.replyError(m.ID, e.Code, e.Message)
		return
	}
	p, ok := a.sessionParams(m)
	if !ok {
		return
	}
	if a.persisted() {
		history, err := a.reopen(p.SessionID, "session/load")
		if err != nil {
			a.replyError(m.ID, codeInvalidParams, err.Error())
			return
		}
		for i, prompt := range history {
			a.sessionUpdate(p.SessionID, textChunk("user_message_chunk", prompt, ""))
			a.sessionUpdate(p.SessionID, textChunk("agent_message_chunk", fmt.Sprintf("replayed answer %d", i+1), ""))
		}
		a.reply(m.ID, a.advertised(p.SessionID, obj{}))
		a.advertiseCommands(p.SessionID)
		return
	}
	a.mu.Lock()
	a.sessions[p.SessionID] = true
	a.mu.Unlock()
	a.sessionUpdate(p.SessionID, textChunk("user_message_chunk", "earlier question", ""))
	a.sessionUpdate(p.SessionID, textChunk("agent_message_chunk", "earlier answer", ""))
	a.reply(m.ID, a.advertised(p.SessionID, obj{}))
	a.advertiseCommands(p.SessionID)
}

// sessionRef is the params of a request naming a session.
type sessionRef struct {
	SessionID string `json:"sessionId"`
}

// sessionParams decodes the params of session/load or session/resume,
// answering the request with an error when they name no session.
func (a *agent) sessionParams(m *message) (sessionRef, bool) {
	var p sessionRef
	if json.Unmarshal(m.Params, &p) != nil || p.SessionID == "" {
		a.replyError(m.ID, codeInvalidParams, m.Method+" needs a sessionId")
		return p, false
	}
	return p, true
}

// resumeSession re-opens a kept session without replaying its history.
func (a *agent) resumeSession(m *message) {
	if !a.cfg.resumeSession {
		a.replyError(m.ID, codeMethodNotFound, "method not found: session/resume (sessionCapabilities.resume not advertised)")
		return
	}
	p, ok := a.sessionParams(m)
	if !ok {
		return
	}
	if !a.persisted() {
		a.replyError(m.ID, codeInvalidParams, fmt.Sprintf("unknown session %q: sessions are not kept (no --sessions-dir)", p.SessionID))
		return
	}
	if _, err := a.reopen(p.SessionID, "session/resume"); err != nil {
		a.replyError(m.ID, codeInvalidParams, err.Error())
		return
	}
	a.reply(m.ID, a.advertised(p.SessionID, obj{}))
	a.advertiseCommands(p.SessionID)
}

// prompt parses the script and starts it on its own goroutine, so that the
// reader loop keeps reading cancels and answers while it runs.
func (a *agent) prompt(m *message) {
	if a.cfg.countPrompts != "" {
		// One line per session/prompt received, in a file that tests read
		// to know how often the agent was really asked.
		appendLine(a.cfg.countPrompts, "prompt")
	}
	var p struct {
		SessionID string `json:"sessionId"`
		Prompt    []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"prompt"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		a.replyError(m.ID, codeInvalidParams, "bad session/prompt params: "+err.Error())
		return
	}
	a.mu.Lock()
	known := a.sessions[p.SessionID]
	a.mu.Unlock()
	if !known {
		a.replyError(m.ID, codeInvalidParams, fmt.Sprintf("unknown session %q", p.SessionID))
		return
	}
	var script strings.Builder
	for _, b := range p.Prompt {
		if b.Type == "text" {
			script.WriteString(b.Text)
		}
	}
	steps, err := parseScript(script.String())
	if err != nil {
		a.replyError(m.ID, codeInvalidParams, err.Error())
		return
	}
	a.mu.Lock()
	openedBy := a.openedBy[p.SessionID]
	a.mu.Unlock()
	history := a.remember(p.SessionID, script.String())
	t := &turn{a: a, sessionID: p.SessionID, id: m.ID, cancelled: make(chan struct{}), openedBy: openedBy, history: history}
	a.mu.Lock()
	a.turns[t] = struct{}{}
	a.mu.Unlock()
	go t.run(steps)
}

// textChunk builds a *_message_chunk / agent_thought_chunk update.
func textChunk(kind, text, messageID string) obj {
	u := obj{"sessionUpdate": kind, "content": obj{"type": "text", "text": text}}
	if messageID != "" {
		u["messageId"] = messageID
	}
	return u
}

// appendLine appends line to the file named, creating it: the counters
// tests read (--count-prompts, --count-starts). Errors are ignored: a
// test that reads the file sees the line missing.
func appendLine(name, line string) {
	f, err := os.OpenFile(name, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		_, _ = f.WriteString(line + "\n")
		_ = f.Close()
	}
}
