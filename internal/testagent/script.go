package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// step runs one directive of a turn. It reports true when it ended the turn
// (answered the prompt, or deliberately never will).
type step func(t *turn) (ended bool)

// turn is one running session/prompt.
type turn struct {
	a         *agent
	sessionID string
	id        json.RawMessage // the prompt request's id
	openedBy  string          // how this process opened the session
	history   []string        // the session's earlier prompts (--sessions-dir)

	mu           sync.Mutex
	ignoreCancel bool
	withdraw     time.Duration // withdraw_after: unanswered requests are withdrawn after this
	cancelOnce   sync.Once
	cancelled    chan struct{} // closed by an effective session/cancel
}

// call makes a request of the agent's own, withdrawing it as the turn's
// withdraw_after says.
func (t *turn) call(method string, params any) *message {
	t.mu.Lock()
	after := t.withdraw
	t.mu.Unlock()
	return t.a.call(method, params, after)
}

// cancel handles session/cancel for this turn.
func (t *turn) cancel() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ignoreCancel {
		return
	}
	t.cancelOnce.Do(func() { close(t.cancelled) })
}

func (t *turn) isCancelled() bool {
	select {
	case <-t.cancelled:
		return true
	default:
		return false
	}
}

func (t *turn) run(steps []step) {
	defer func() {
		t.a.mu.Lock()
		delete(t.a.turns, t)
		t.a.mu.Unlock()
	}()
	for _, s := range steps {
		if t.isCancelled() {
			t.a.reply(t.id, obj{"stopReason": "cancelled"})
			return
		}
		if s(t) {
			return
		}
	}
	reason := "end_turn"
	if t.isCancelled() {
		reason = "cancelled"
	}
	t.a.reply(t.id, obj{"stopReason": reason})
}

func (t *turn) update(u obj) { t.a.sessionUpdate(t.sessionID, u) }

func (t *turn) say(text string) { t.update(textChunk("agent_message_chunk", text, "")) }

// wait sleeps for d (forever if d < 0) unless the turn is cancelled first.
func (t *turn) wait(d time.Duration) {
	if d < 0 {
		<-t.cancelled
		return
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-t.cancelled:
	}
}

// parseScript turns the prompt text into steps. Any unknown directive or bad
// argument fails the whole script, before anything has run.
func parseScript(text string) ([]step, error) {
	var steps []step
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimLeft(strings.TrimRight(line, "\r"), " \t")
		if strings.TrimSpace(line) == "" {
			continue
		}
		name, rest, _ := strings.Cut(line, " ")
		s, err := parseDirective(name, rest)
		if err != nil {
			return nil, fmt.Errorf("script line %d: %q: %v", i+1, line, err)
		}
		steps = append(steps, s)
	}
	return steps, nil
}

// fields splits rest into between lo and hi whitespace-separated fields.
func fields(rest string, lo, hi int) ([]string, error) {
	f := strings.Fields(rest)
	if len(f) < lo || len(f) > hi {
		if lo == hi {
			return nil, fmt.Errorf("wants %d argument(s), got %d", lo, len(f))
		}
		return nil, fmt.Errorf("wants %d to %d arguments, got %d", lo, hi, len(f))
	}
	return f, nil
}

// ints parses every field as an integer.
func ints(f []string) ([]int, error) {
	out := make([]int, len(f))
	for i, s := range f {
		n, err := strconv.Atoi(s)
		if err != nil {
			return nil, fmt.Errorf("argument %q is not an integer", s)
		}
		out[i] = n
	}
	return out, nil
}

// intArgs parses rest as exactly n non-negative integers.
func intArgs(rest string, n int) ([]int, error) {
	f, err := fields(rest, n, n)
	if err != nil {
		return nil, err
	}
	v, err := ints(f)
	if err != nil {
		return nil, err
	}
	for _, x := range v {
		if x < 0 {
			return nil, fmt.Errorf("argument %d is negative", x)
		}
	}
	return v, nil
}

// unescape turns the two-character sequences \n and \\ into a newline and a
// backslash; any other backslash is kept as it is.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			switch s[i+1] {
			case 'n':
				b.WriteByte('\n')
				i++
				continue
			case '\\':
				b.WriteByte('\\')
				i++
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func noArgs(rest string, s step) (step, error) {
	if strings.TrimSpace(rest) != "" {
		return nil, fmt.Errorf("takes no arguments")
	}
	return s, nil
}

func parseDirective(name, rest string) (step, error) {
	if id, ok := strings.CutPrefix(name, "chunk@"); ok {
		if id == "" {
			return nil, fmt.Errorf("chunk@ needs a message id")
		}
		text := unescape(rest)
		return func(t *turn) bool {
			t.update(textChunk("agent_message_chunk", text, id))
			return false
		}, nil
	}
	switch name {
	case "chunk", "thought", "user":
		kind := map[string]string{
			"chunk":   "agent_message_chunk",
			"thought": "agent_thought_chunk",
			"user":    "user_message_chunk",
		}[name]
		text := unescape(rest)
		return func(t *turn) bool {
			t.update(textChunk(kind, text, ""))
			return false
		}, nil

	case "chunk_meta":
		kv, text, _ := strings.Cut(strings.TrimLeft(rest, " "), " ")
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("wants KEY=VALUE TEXT")
		}
		text = unescape(text)
		return func(t *turn) bool {
			u := textChunk("agent_message_chunk", text, "")
			u["_meta"] = obj{k: v}
			t.update(u)
			return false
		}, nil

	case "image":
		return noArgs(rest, func(t *turn) bool {
			t.update(obj{"sessionUpdate": "agent_message_chunk",
				"content": obj{"type": "image", "data": "aGk=", "mimeType": "image/png"}})
			return false
		})

	case "tool":
		id, title, _ := strings.Cut(strings.TrimLeft(rest, " "), " ")
		if id == "" {
			return nil, fmt.Errorf("wants ID TITLE")
		}
		return func(t *turn) bool {
			t.update(obj{"sessionUpdate": "tool_call", "toolCallId": id, "title": title,
				"kind": "read", "status": "pending"})
			return false
		}, nil

	case "tool_done":
		f, err := fields(rest, 1, 1)
		if err != nil {
			return nil, err
		}
		return func(t *turn) bool {
			t.update(obj{"sessionUpdate": "tool_call_update", "toolCallId": f[0], "status": "completed",
				"content": []obj{{"type": "content", "content": obj{"type": "text", "text": "done"}}}})
			return false
		}, nil

	case "plan":
		entries := []obj{}
		if strings.TrimSpace(rest) != "" {
			for _, e := range strings.Split(rest, "|") {
				entries = append(entries, obj{"content": strings.TrimSpace(e), "priority": "medium", "status": "pending"})
			}
		}
		return func(t *turn) bool {
			t.update(obj{"sessionUpdate": "plan", "entries": entries})
			return false
		}, nil

	case "usage":
		f, err := fields(rest, 2, 4)
		if err != nil || len(f) == 3 {
			return nil, fmt.Errorf("wants SIZE USED [AMOUNT CURRENCY]")
		}
		v, err := intArgs(strings.Join(f[:2], " "), 2)
		if err != nil {
			return nil, err
		}
		u := obj{"sessionUpdate": "usage_update", "size": v[0], "used": v[1]}
		if len(f) == 4 {
			amount, err := strconv.ParseFloat(f[2], 64)
			if err != nil {
				return nil, fmt.Errorf("AMOUNT: %v", err)
			}
			u["cost"] = obj{"amount": amount, "currency": f[3]}
		}
		return func(t *turn) bool {
			t.update(u)
			return false
		}, nil

	case "raw":
		f, err := fields(rest, 1, 1)
		if err != nil {
			return nil, err
		}
		return func(t *turn) bool {
			t.update(obj{"sessionUpdate": f[0], "x": 1})
			return false
		}, nil

	case "permission":
		f, err := fields(rest, 1, 1)
		if err != nil {
			return nil, err
		}
		return func(t *turn) bool {
			t.say(askPermission(t, f[0]))
			return false
		}, nil

	case "elicit", "elicit_url":
		params := obj{"mode": "url", "message": "please open", "elicitationId": "e-1", "url": "https://example.com/connect"}
		if name == "elicit" {
			schema := json.RawMessage(strings.TrimSpace(rest))
			if !json.Valid(schema) {
				return nil, fmt.Errorf("wants a JSON schema")
			}
			params = obj{"mode": "form", "message": "please answer", "requestedSchema": schema}
		} else if strings.TrimSpace(rest) != "" {
			return nil, fmt.Errorf("takes no arguments")
		}
		return func(t *turn) bool {
			params["sessionId"] = t.sessionID
			t.say(elicit(t, params))
			return false
		}, nil

	case "read":
		f, err := fields(rest, 1, 3)
		if err != nil {
			return nil, err
		}
		nums, err := ints(f[1:])
		if err != nil {
			return nil, err
		}
		return func(t *turn) bool {
			params := obj{"sessionId": t.sessionID, "path": f[0]}
			if len(nums) > 0 {
				params["line"] = nums[0]
			}
			if len(nums) > 1 {
				params["limit"] = nums[1]
			}
			ans := t.call("fs/read_text_file", params)
			if ans.Error != nil {
				t.say(fmt.Sprintf("read-error:%d:%s", ans.Error.Code, ans.Error.Message))
				return false
			}
			var r struct {
				Content string `json:"content"`
			}
			_ = json.Unmarshal(ans.Result, &r)
			t.say("read:" + r.Content)
			return false
		}, nil

	case "write":
		path, text, _ := strings.Cut(strings.TrimLeft(rest, " "), " ")
		if path == "" {
			return nil, fmt.Errorf("wants PATH TEXT")
		}
		text = unescape(text)
		return func(t *turn) bool {
			ans := t.call("fs/write_text_file", obj{"sessionId": t.sessionID, "path": path, "content": text})
			if ans.Error != nil {
				t.say(fmt.Sprintf("write-error:%d:%s", ans.Error.Code, ans.Error.Message))
			} else {
				t.say("write:ok")
			}
			return false
		}, nil

	case "osread":
		path := strings.TrimSpace(rest)
		if path == "" {
			return nil, fmt.Errorf("wants PATH")
		}
		return func(t *turn) bool {
			b, err := os.ReadFile(path)
			if err != nil {
				t.say("osread-error:" + err.Error())
			} else {
				t.say("osread:" + string(b))
			}
			return false
		}, nil

	case "procs":
		word := strings.TrimSpace(rest)
		if word == "" {
			return nil, fmt.Errorf("wants WORD")
		}
		return func(t *turn) bool {
			t.say(procScan(word))
			return false
		}, nil

	case "unmountproc":
		return func(t *turn) bool {
			t.say(unmountProc())
			return false
		}, nil

	case "oswrite":
		path, text, _ := strings.Cut(strings.TrimLeft(rest, " "), " ")
		if path == "" {
			return nil, fmt.Errorf("wants PATH TEXT")
		}
		text = unescape(text)
		return func(t *turn) bool {
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.say("oswrite-error:" + err.Error())
			} else {
				t.say("oswrite:ok")
			}
			return false
		}, nil

	case "terminal":
		return noArgs(rest, func(t *turn) bool {
			ans := t.call("terminal/create", obj{"sessionId": t.sessionID, "command": "echo",
				"args": []string{"testagent"}})
			if ans.Error != nil {
				t.say(fmt.Sprintf("terminal-error:%d", ans.Error.Code))
			} else {
				t.say("terminal:ok")
			}
			return false
		})

	case "sleep":
		v, err := intArgs(rest, 1)
		if err != nil {
			return nil, err
		}
		return func(t *turn) bool {
			t.wait(time.Duration(v[0]) * time.Millisecond)
			return false
		}, nil

	case "hang":
		return noArgs(rest, func(t *turn) bool {
			t.wait(-1)
			return false
		})

	case "withdraw_after":
		v, err := intArgs(rest, 1)
		if err != nil {
			return nil, err
		}
		return func(t *turn) bool {
			t.mu.Lock()
			t.withdraw = time.Duration(v[0]) * time.Millisecond
			t.mu.Unlock()
			return false
		}, nil

	case "ignore_cancel":
		return noArgs(rest, func(t *turn) bool {
			t.mu.Lock()
			t.ignoreCancel = true
			t.mu.Unlock()
			return false
		})

	case "flood":
		v, err := intArgs(rest, 2)
		if err != nil {
			return nil, err
		}
		return func(t *turn) bool {
			line, _ := json.Marshal(outRequest{JSONRPC: "2.0", Method: "session/update", Params: obj{
				"sessionId": t.sessionID,
				"update":    textChunk("agent_message_chunk", strings.Repeat("x", v[1]), "flood"),
			}})
			t.a.out.writeRepeated(line, v[0])
			return false
		}, nil

	case "flood_timed":
		f, err := fields(rest, 2, 3)
		if err != nil {
			return nil, err
		}
		v, err := ints(f)
		if err != nil {
			return nil, err
		}
		for _, x := range v {
			if x < 0 {
				return nil, fmt.Errorf("argument %d is negative", x)
			}
		}
		if v[1] < stampLen {
			return nil, fmt.Errorf("SIZE %d is shorter than the %d-byte stamp", v[1], stampLen)
		}
		rate := 0
		if len(v) == 3 {
			rate = v[2]
		}
		return func(t *turn) bool {
			floodTimed(t, v[0], v[1], rate)
			return false
		}, nil

	case "stderr":
		v, err := intArgs(rest, 1)
		if err != nil {
			return nil, err
		}
		return func(t *turn) bool {
			writeStderr(v[0])
			return false
		}, nil

	case "stray":
		return func(t *turn) bool {
			t.a.out.writeRaw([]byte(rest))
			return false
		}, nil

	case "oversized":
		v, err := intArgs(rest, 1)
		if err != nil {
			return nil, err
		}
		return func(t *turn) bool {
			t.update(textChunk("agent_message_chunk", strings.Repeat("y", v[0]), ""))
			return false
		}, nil

	case "mode", "model":
		f, err := fields(rest, 1, 1)
		if err != nil {
			return nil, err
		}
		switchTo := (*turn).switchMode
		if name == "model" {
			switchTo = (*turn).switchModel
		}
		return func(t *turn) bool {
			switchTo(t, f[0])
			return false
		}, nil
	case "settings":
		return noArgs(rest, func(t *turn) bool {
			t.say(t.reportSettings())
			return false
		})
	case "history":
		return noArgs(rest, func(t *turn) bool {
			t.say(historyReport(t.openedBy, t.history))
			return false
		})
	case "grandchild":
		return noArgs(rest, func(t *turn) bool {
			t.say(startGrandchild())
			return false
		})

	// Endings.
	case "stop":
		f, err := fields(rest, 1, 1)
		if err != nil {
			return nil, err
		}
		return func(t *turn) bool {
			t.a.reply(t.id, obj{"stopReason": f[0]})
			return true
		}, nil

	case "stop_meta":
		f, err := fields(rest, 2, 2)
		if err != nil {
			return nil, err
		}
		k, v, ok := strings.Cut(f[1], "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("wants REASON KEY=VALUE")
		}
		return func(t *turn) bool {
			t.a.reply(t.id, obj{"stopReason": f[0], "_meta": obj{k: v}})
			return true
		}, nil

	case "stop_usage":
		f, err := fields(rest, 3, 3)
		if err != nil {
			return nil, err
		}
		v, err := ints(f[1:])
		if err != nil {
			return nil, err
		}
		return func(t *turn) bool {
			t.a.reply(t.id, obj{"stopReason": f[0], "usage": obj{
				"inputTokens": v[0], "outputTokens": v[1], "totalTokens": v[0] + v[1]}})
			return true
		}, nil

	case "error":
		code, msg, _ := strings.Cut(strings.TrimLeft(rest, " "), " ")
		n, err := strconv.Atoi(code)
		if err != nil {
			return nil, fmt.Errorf("wants CODE MESSAGE..., CODE an integer")
		}
		return func(t *turn) bool {
			t.a.replyError(t.id, n, msg)
			return true
		}, nil

	case "neither":
		return noArgs(rest, func(t *turn) bool {
			t.a.out.writeRaw(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s}`, t.id))
			return true
		})

	case "exit":
		v, err := intArgs(rest, 1)
		if err != nil {
			return nil, err
		}
		return func(t *turn) bool {
			os.Exit(v[0])
			return true
		}, nil

	case "close_stdout":
		return noArgs(rest, func(t *turn) bool {
			t.a.out.close()
			return true
		})

	case "garbage_response":
		return noArgs(rest, func(t *turn) bool {
			t.a.out.writeRaw(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":`, t.id))
			return true
		})

	case "spawn":
		f, err := fields(rest, 1, 2)
		if err != nil {
			return nil, err
		}
		setsid := len(f) == 2
		if setsid && f[0] != "--setsid" {
			return nil, fmt.Errorf("wants [--setsid] SECONDS")
		}
		v, err := intArgs(f[len(f)-1], 1)
		if err != nil {
			return nil, err
		}
		return func(t *turn) bool {
			t.say(spawn(v[0], setsid))
			return false
		}, nil

	// Not endings: directives added later are appended here.
	case "stall":
		return noArgs(rest, func(t *turn) bool {
			t.a.stall()
			return false
		})

	case "readflood":
		f, err := fields(rest, 2, 2)
		if err != nil {
			return nil, err
		}
		v, err := intArgs(f[0], 1)
		if err != nil {
			return nil, err
		}
		return func(t *turn) bool {
			t.a.sendRequests("fs/read_text_file", v[0], obj{"sessionId": t.sessionID, "path": f[1]})
			return false
		}, nil

	case "reqflood":
		v, err := intArgs(rest, 1)
		if err != nil {
			return nil, err
		}
		return func(t *turn) bool {
			t.a.sendRequests("testagent/flood", v[0], obj{})
			return false
		}, nil
	}
	return nil, fmt.Errorf("unknown directive %q", name)
}

// askPermission runs session/request_permission and words its outcome.
func askPermission(t *turn, toolCallID string) string {
	ans := t.call("session/request_permission", obj{
		"sessionId": t.sessionID,
		"toolCall":  obj{"toolCallId": toolCallID},
		"options": []obj{
			{"optionId": "allow", "name": "Allow", "kind": "allow_once"},
			{"optionId": "reject", "name": "Reject", "kind": "reject_once"},
		},
	})
	if ans.Error != nil {
		return fmt.Sprintf("permission-error:%d:%s", ans.Error.Code, ans.Error.Message)
	}
	var r struct {
		Outcome struct {
			Outcome  string `json:"outcome"`
			OptionID string `json:"optionId"`
		} `json:"outcome"`
	}
	if json.Unmarshal(ans.Result, &r) == nil {
		switch {
		case r.Outcome.Outcome == "cancelled":
			return "permission:cancelled"
		case r.Outcome.Outcome == "selected" && r.Outcome.OptionID != "":
			return "permission:" + r.Outcome.OptionID
		}
	}
	return "permission-invalid:" + string(ans.Result)
}

// writeStderr writes exactly n bytes of 80-byte 'e' lines to stderr.
func writeStderr(n int) {
	w := bufio.NewWriter(os.Stderr)
	for n > 0 {
		l := min(n, 80)
		_, _ = w.WriteString(strings.Repeat("e", l-1))
		_ = w.WriteByte('\n')
		n -= l
	}
	_ = w.Flush()
}

// startGrandchild starts a long sleep in our own process group and reports
// its pid, so that tests can check that the gateway cleans it up.
func startGrandchild() string {
	path := "/bin/sleep"
	if _, err := os.Stat(path); err != nil {
		if p, lerr := exec.LookPath("sleep"); lerr == nil {
			path = p
		}
	}
	cmd := exec.Command(path, "300")
	if err := cmd.Start(); err != nil {
		return "grandchild-error:" + err.Error()
	}
	go func() { _ = cmd.Wait() }() // reap it if it dies while we live
	return "grandchild:" + pidRef(cmd.Process.Pid)
}

// elicit sends elicitation/create and describes the answer:
// "elicitation:<action>", with ":<content as JSON>" when content came, or
// "elicitation-error:<code>:<message>".
func elicit(t *turn, params obj) string {
	ans := t.call("elicitation/create", params)
	if ans.Error != nil {
		return fmt.Sprintf("elicitation-error:%d:%s", ans.Error.Code, ans.Error.Message)
	}
	var r struct {
		Action  string          `json:"action"`
		Content json.RawMessage `json:"content"`
	}
	_ = json.Unmarshal(ans.Result, &r)
	if len(r.Content) > 0 && string(r.Content) != "null" {
		return "elicitation:" + r.Action + ":" + string(r.Content)
	}
	return "elicitation:" + r.Action
}
