package fakemodel

import (
	"encoding/json"
	"net/http"
	"time"
)

// chatRequest is the part of an OpenAI chat completions request the
// stand-in reads.
type chatRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	ResponseFormat struct {
		Type       string `json:"type"`
		JSONSchema struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	} `json:"response_format"`
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) (string, int) {
	var req chatRequest
	if err := decode(r, &req); err != nil {
		return "bad", openAIError(w, http.StatusBadRequest, "request body: "+err.Error())
	}
	var t turn
	for _, m := range req.Messages {
		switch m.Role {
		case "user":
			t.prompt, t.toolResult = textOf(m.Content), false
		case "tool":
			t.toolResult = true
		}
	}
	for _, tool := range req.Tools {
		t.tools = append(t.tools, Tool{Name: tool.Function.Name, Schema: tool.Function.Parameters})
	}
	sc, text := t.plan()
	if req.ResponseFormat.Type == "json_schema" {
		var schema Schema
		_ = json.Unmarshal(req.ResponseFormat.JSONSchema.Schema, &schema)
		b, _ := json.Marshal(schema.Smallest(AnswerText))
		sc, text = Answer, string(b)
	}
	if sc == Fail {
		return sc.String(), openAIError(w, http.StatusBadRequest, ErrorMessage)
	}
	id, created := "chatcmpl-stand-in", time.Now().Unix()
	var call map[string]any
	finish := "stop"
	if sc == Permission {
		name, args, _ := ToolCall(t.prompt, t.tools)
		b, _ := json.Marshal(args)
		call = map[string]any{"index": 0, "id": "call_stand_in", "type": "function", "function": map[string]any{"name": name, "arguments": string(b)}}
		finish = "tool_calls"
	}
	if sc == Refuse {
		finish = "content_filter"
	}
	usage := map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
	if !req.Stream {
		msg := map[string]any{"role": "assistant", "content": text}
		if call != nil {
			msg["content"] = nil
			msg["tool_calls"] = []any{call}
		}
		return sc.String(), writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "chat.completion", "created": created, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage})
	}
	e := startSSE(w, r)
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	e.event("", chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	switch {
	case call != nil:
		e.event("", chunk(map[string]any{"tool_calls": []any{call}}, nil))
	case sc == Slow:
		if !e.slow(func(p string) { e.event("", chunk(map[string]any{"content": p}, nil)) }) {
			return sc.String(), http.StatusOK
		}
	case sc == Refuse:
		e.event("", chunk(map[string]any{"refusal": text}, nil))
	default:
		for _, p := range Chunks(text, chunkCount) {
			e.event("", chunk(map[string]any{"content": p}, nil))
		}
	}
	last := chunk(map[string]any{}, finish)
	last["usage"] = usage
	e.event("", last)
	e.event("", "[DONE]")
	return sc.String(), http.StatusOK
}

func openAIError(w http.ResponseWriter, code int, msg string) int {
	return writeJSON(w, code, map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "param": nil, "code": "stand_in_error"}})
}

// responsesRequest is the part of an OpenAI Responses API request the
// stand-in reads.
type responsesRequest struct {
	Model string `json:"model"`
	Input []struct {
		Type    string          `json:"type"`
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"input"`
	Tools []struct {
		Type       string          `json:"type"`
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"tools"`
}

func (s *Server) responses(w http.ResponseWriter, r *http.Request) (string, int) {
	var req responsesRequest
	if err := decode(r, &req); err != nil {
		return "bad", openAIError(w, http.StatusBadRequest, "request body: "+err.Error())
	}
	var t turn
	for _, in := range req.Input {
		switch {
		case in.Type == "message" && in.Role == "user", in.Type == "" && in.Role == "user":
			t.prompt, t.toolResult = textOf(in.Content), false
		case in.Type == "function_call_output" || in.Type == "custom_tool_call_output" || in.Type == "local_shell_call_output":
			t.toolResult = true
		}
	}
	for _, tool := range req.Tools {
		if tool.Type == "function" {
			t.tools = append(t.tools, Tool{Name: tool.Name, Schema: tool.Parameters})
		}
	}
	sc, text := t.plan()
	if sc == Fail {
		return sc.String(), openAIError(w, http.StatusBadRequest, ErrorMessage)
	}
	e := startSSE(w, r)
	resp := map[string]any{"id": "resp_stand_in", "object": "response", "model": req.Model, "status": "in_progress", "output": []any{}}
	e.event("response.created", map[string]any{"type": "response.created", "response": resp})
	var item map[string]any
	switch sc {
	case Permission:
		name, args, _ := ToolCall(t.prompt, t.tools)
		b, _ := json.Marshal(args)
		item = map[string]any{"type": "function_call", "id": "fc_stand_in", "call_id": "call_stand_in", "name": name, "arguments": string(b), "status": "completed"}
		e.event("response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": 0, "item": item})
	case Refuse:
		item = map[string]any{"type": "message", "id": "msg_stand_in", "role": "assistant", "status": "completed", "content": []any{map[string]any{"type": "refusal", "refusal": text}}}
		e.event("response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": 0, "item": item})
	default:
		added := map[string]any{"type": "message", "id": "msg_stand_in", "role": "assistant", "status": "in_progress", "content": []any{}}
		e.event("response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": 0, "item": added})
		delta := func(p string) {
			e.event("response.output_text.delta", map[string]any{"type": "response.output_text.delta", "item_id": "msg_stand_in", "output_index": 0, "content_index": 0, "delta": p})
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
		item = map[string]any{"type": "message", "id": "msg_stand_in", "role": "assistant", "status": "completed", "content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}
	}
	e.event("response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item})
	resp["status"], resp["output"] = "completed", []any{item}
	resp["usage"] = map[string]any{"input_tokens": 10, "input_tokens_details": map[string]any{"cached_tokens": 0}, "output_tokens": 5, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 15}
	e.event("response.completed", map[string]any{"type": "response.completed", "response": resp})
	return sc.String(), http.StatusOK
}
