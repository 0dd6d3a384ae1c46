package fakemodel

import (
	"encoding/json"
	"net/http"
	"strings"
)

// messagesRequest is the part of an Anthropic Messages request the
// stand-in reads.
type messagesRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools"`
}

func (s *Server) messages(w http.ResponseWriter, r *http.Request) (string, int) {
	var req messagesRequest
	if err := decode(r, &req); err != nil {
		return "bad", anthropicError(w, http.StatusBadRequest, "request body: "+err.Error())
	}
	var t turn
	for _, m := range req.Messages {
		if m.Role != "user" {
			continue
		}
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(m.Content, &parts) != nil {
			t.prompt, t.toolResult = textOf(m.Content), false
			continue
		}
		// Claude Code sends a tool's result and the next prompt in one
		// message: what comes last decides.
		for _, p := range parts {
			switch {
			case p.Type == "tool_result":
				t.toolResult = true
			case p.Type == "text" && !strings.HasPrefix(p.Text, "<system-reminder>"):
				t.prompt, t.toolResult = p.Text, false
			}
		}
	}
	for _, tool := range req.Tools {
		t.tools = append(t.tools, Tool{Name: tool.Name, Schema: tool.InputSchema})
	}
	sc, text := t.plan()
	if sc == Fail {
		return sc.String(), anthropicError(w, http.StatusBadRequest, ErrorMessage)
	}
	stop := "end_turn"
	block := map[string]any{"type": "text", "text": text}
	var input []byte
	switch sc {
	case Permission:
		name, args, _ := ToolCall(t.prompt, t.tools)
		input, _ = json.Marshal(args)
		block = map[string]any{"type": "tool_use", "id": "toolu_stand_in", "name": name, "input": args}
		stop = "tool_use"
	case Refuse:
		stop = "refusal"
	}
	usage := map[string]any{"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
	msg := map[string]any{"id": "msg_stand_in", "type": "message", "role": "assistant", "model": req.Model, "content": []any{block}, "stop_reason": stop, "stop_sequence": nil, "usage": usage}
	if !req.Stream {
		return sc.String(), writeJSON(w, http.StatusOK, msg)
	}
	e := startSSE(w, r)
	start := map[string]any{}
	for k, v := range msg {
		start[k] = v
	}
	start["content"], start["stop_reason"] = []any{}, nil
	e.event("message_start", map[string]any{"type": "message_start", "message": start})
	if sc == Permission {
		e.event("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "tool_use", "id": "toolu_stand_in", "name": block["name"], "input": map[string]any{}}})
		e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
	} else {
		e.event("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		delta := func(p string) {
			e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": p}})
		}
		if sc == Slow {
			if !e.slow(delta) {
				return sc.String(), http.StatusOK
			}
		} else {
			for _, p := range Chunks(text, chunkCount) {
				delta(p)
			}
		}
	}
	e.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	e.event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 5}})
	e.event("message_stop", map[string]any{"type": "message_stop"})
	return sc.String(), http.StatusOK
}

func anthropicError(w http.ResponseWriter, code int, msg string) int {
	return writeJSON(w, code, map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": msg}})
}
