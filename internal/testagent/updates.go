package main

import (
	"fmt"
	"strconv"
	"strings"
)

// parseUpdate parses the directives that send session/update
// notifications (message chunks, tool calls, plans, usage, the session's
// settings and history) and the lines of output a gateway must tolerate
// (stray, oversized).
func parseUpdate(name, rest string) (step, error) {
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
	}
	return nil, errOtherDirective
}
