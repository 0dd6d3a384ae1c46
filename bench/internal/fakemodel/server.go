package fakemodel

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Options says how the stand-in answers.
type Options struct {
	// Log, when set, gets one line per request (method, path, scenario,
	// status).
	Log io.Writer
}

// Server is the stand-in; it is an http.Handler serving, under any prefix
// (/v1 or none):
//
//	POST .../chat/completions            OpenAI chat completions (streamed or not)
//	POST .../responses                   OpenAI Responses API (streamed)
//	POST .../messages                    Anthropic Messages (streamed or not)
//	POST .../messages/count_tokens       Anthropic token count
//	GET  .../models                      a model list
//
// Anything else is a 404, counted in Unknown, so that a call an agent
// starts making shows up instead of being guessed at.
type Server struct {
	opts    Options
	unknown atomic.Int64
	mu      sync.Mutex
	seen    []string
}

// New returns a stand-in answering as o says.
func New(o Options) *Server { return &Server{opts: o} }

// Unknown is how many requests the stand-in did not serve.
func (s *Server) Unknown() int64 { return s.unknown.Load() }

// Seen lists the requests answered so far, one "METHOD path scenario"
// each: what a failing test prints.
func (s *Server) Seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

func (s *Server) record(r *http.Request, what string, status int) {
	line := fmt.Sprintf("%s %s %s -> %d", r.Method, r.URL.Path, what, status)
	s.mu.Lock()
	s.seen = append(s.seen, line)
	s.mu.Unlock()
	if s.opts.Log != nil {
		fmt.Fprintln(s.opts.Log, "fakemodel:", line)
	}
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := strings.TrimSuffix(r.URL.Path, "/")
	var status int
	var what string
	switch {
	case r.Method == http.MethodGet && strings.HasSuffix(p, "/models"):
		what, status = "models", writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{map[string]any{"id": "stand-in", "object": "model", "owned_by": "stand-in", "type": "model", "display_name": "Stand-in", "created_at": "2026-01-01T00:00:00Z"}}})
	case r.Method == http.MethodPost && strings.HasSuffix(p, "/chat/completions"):
		what, status = s.chat(w, r)
	case r.Method == http.MethodPost && strings.HasSuffix(p, "/responses"):
		what, status = s.responses(w, r)
	case r.Method == http.MethodPost && strings.HasSuffix(p, "/messages/count_tokens"):
		what, status = "count_tokens", writeJSON(w, http.StatusOK, map[string]any{"input_tokens": 10})
	case r.Method == http.MethodPost && strings.HasSuffix(p, "/messages"):
		what, status = s.messages(w, r)
	default:
		s.unknown.Add(1)
		what, status = "unknown", writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]any{"type": "not_found_error", "message": "the stand-in model API does not serve " + r.Method + " " + r.URL.Path}})
	}
	s.record(r, what, status)
}

// turn is what the stand-in reads of a request, whatever its API: the
// last user text, whether the last message is a tool's result, and the
// tools offered.
type turn struct {
	prompt     string
	toolResult bool
	tools      []Tool
}

// plan is what the model does on this request.
func (t turn) plan() (Scenario, string) {
	if t.toolResult {
		return Answer, ToolDone
	}
	sc := ScenarioOf(t.prompt)
	switch sc {
	case Permission:
		if _, _, ok := ToolCall(t.prompt, t.tools); !ok {
			return Answer, AnswerText // a side request: no tool to call
		}
	case Refuse:
		return Refuse, RefusalText
	}
	return sc, AnswerText
}

func (sc Scenario) String() string {
	return [...]string{"answer", "permission", "slow", "refuse", "error"}[sc]
}

// sse writes server-sent events, flushing each.
type sse struct {
	w http.ResponseWriter
	r *http.Request
}

func startSSE(w http.ResponseWriter, r *http.Request) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w, r: r}
}

// event writes one event; name may be empty (OpenAI chat names none).
func (e *sse) event(name string, v any) {
	if name != "" {
		fmt.Fprintf(e.w, "event: %s\n", name)
	}
	switch d := v.(type) {
	case string:
		fmt.Fprintf(e.w, "data: %s\n\n", d)
	default:
		b, _ := json.Marshal(v)
		fmt.Fprintf(e.w, "data: %s\n\n", b)
	}
	if f, ok := e.w.(http.Flusher); ok {
		f.Flush()
	}
}

// slow streams text pieces through send every SlowTick until SlowFor
// passes or the client hangs up; it reports whether the client is still
// there.
func (e *sse) slow(send func(string)) bool {
	deadline := time.NewTimer(SlowFor)
	defer deadline.Stop()
	tick := time.NewTicker(SlowTick)
	defer tick.Stop()
	for {
		select {
		case <-e.r.Context().Done():
			return false
		case <-deadline.C:
			return true
		case <-tick.C:
			send("tick ")
		}
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) int {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
	return code
}

// decode reads a request body of at most 64 MiB into v.
func decode(r *http.Request, v any) error {
	return json.NewDecoder(io.LimitReader(r.Body, 64<<20)).Decode(v)
}

// textOf is the text of a message content that is a string, or the last
// text part of a list of parts: the newest prompt, since agents put their
// own context before it, and Qwen Code sends a prompt that had no answer
// (a model error) in one message with the next.
func textOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	last := ""
	for _, p := range parts {
		if strings.TrimSpace(p.Text) != "" {
			last = p.Text
		}
	}
	return last
}

// chunkCount is how many events an answer is streamed in: several, so
// that a client sees a stream, not one block.
const chunkCount = 3
