// Package fakegemini is a stand-in for the Gemini API, enough for Gemini CLI
// to complete whole turns without a network: pointed at it with
// GOOGLE_GEMINI_BASE_URL (and any GEMINI_API_KEY), Gemini CLI streams a fixed
// answer from it, so that its start-up and the gateway's handling of a real
// agent can be measured without a model in the way.
//
// It answers the three calls a turn makes, under any API version and model:
//
//	POST /{version}/models/{model}:streamGenerateContent?alt=sse   the answer, as server-sent events
//	POST /{version}/models/{model}:generateContent                 the answer, or a JSON value of the requested schema
//	POST /{version}/models/{model}:countTokens                     a token count
//
// Gemini CLI also asks generateContent for JSON of a given schema (whether
// the user speaks next, which model to route to): the answer is then the
// smallest value of that schema, taking the first value of every enum, so
// that its checks end the turn ("user" speaks next) instead of failing or
// looping. Anything else is a 404 in the API's error shape, counted, so that
// a new call Gemini CLI makes shows up instead of being guessed at.
package fakegemini

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
)

// Options says what the stand-in answers.
type Options struct {
	// Answer is the text of every answer; empty: DefaultAnswer.
	Answer string
	// Chunks is how many events the streamed answer is split into (at
	// least 1): Gemini CLI passes each on as an agent message chunk.
	Chunks int
	// Log, when set, gets one line per request (method, path, status).
	Log io.Writer
}

// DefaultAnswer is the answer when Options.Answer is empty.
const DefaultAnswer = "Hello from the stand-in model."

// Counts is how many requests of each kind the server answered.
type Counts struct {
	Stream, Generate, CountTokens, Unknown int64
}

// Server is the stand-in; it is an http.Handler.
type Server struct {
	opts                                   Options
	stream, generate, countTokens, unknown atomic.Int64
}

// New returns a stand-in answering as o says.
func New(o Options) *Server {
	if o.Answer == "" {
		o.Answer = DefaultAnswer
	}
	o.Chunks = max(1, o.Chunks)
	return &Server{opts: o}
}

// Counts reports the requests answered so far.
func (s *Server) Counts() Counts {
	return Counts{Stream: s.stream.Load(), Generate: s.generate.Load(), CountTokens: s.countTokens.Load(), Unknown: s.unknown.Load()}
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	status, contents := s.serve(w, r)
	if s.opts.Log != nil {
		fmt.Fprintf(s.opts.Log, "fakegemini: %s %s -> %d (%d contents)\n", r.Method, r.URL.RequestURI(), status, contents)
	}
}

// serve answers r and returns the status it answered with and the number
// of contents (turns of the conversation) the request carried: a resumed
// conversation shows in it.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) (int, int) {
	_, call, ok := strings.Cut(r.URL.Path, ":")
	if r.Method != http.MethodPost || !ok || !strings.Contains(r.URL.Path, "/models/") {
		s.unknown.Add(1)
		return apiError(w, http.StatusNotFound, "NOT_FOUND", "the stand-in model API does not serve "+r.Method+" "+r.URL.Path), 0
	}
	var req request
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<20)).Decode(&req); err != nil {
		return apiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "request body: "+err.Error()), 0
	}
	n := len(req.Contents)
	switch call {
	case "streamGenerateContent":
		s.stream.Add(1)
		return s.streamAnswer(w, req), n
	case "generateContent":
		s.generate.Add(1)
		return writeJSON(w, s.response(req, s.answerFor(req))), n
	case "countTokens":
		s.countTokens.Add(1)
		return writeJSON(w, map[string]any{"totalTokens": tokens(req)}), n
	default:
		s.unknown.Add(1)
		return apiError(w, http.StatusNotFound, "NOT_FOUND", "the stand-in model API does not serve :"+call), n
	}
}

// request is the part of a GenerateContentRequest (or CountTokensRequest)
// the stand-in reads.
type request struct {
	Contents         []json.RawMessage `json:"contents"`
	GenerationConfig struct {
		ResponseMimeType   string          `json:"responseMimeType"`
		ResponseSchema     json.RawMessage `json:"responseSchema"`
		ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
	} `json:"generationConfig"`
}

// answerFor is the text answering req: the fixed answer, or JSON of the
// schema req asks for.
func (s *Server) answerFor(req request) string {
	g := req.GenerationConfig
	if g.ResponseMimeType != "application/json" {
		return s.opts.Answer
	}
	schema := g.ResponseJSONSchema
	if len(schema) == 0 {
		schema = g.ResponseSchema
	}
	var sc jsonSchema
	_ = json.Unmarshal(schema, &sc) // no schema: an empty object
	b, _ := json.Marshal(sc.smallest(s.opts.Answer))
	return string(b)
}

// streamAnswer writes the answer as server-sent events, the last one with
// the finish reason and usage.
func (s *Server) streamAnswer(w http.ResponseWriter, req request) int {
	answer := s.answerFor(req)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	parts := split(answer, s.opts.Chunks)
	for i, p := range parts {
		resp := s.response(req, p)
		if i < len(parts)-1 {
			resp = map[string]any{"candidates": []any{candidate(p, "")}}
		}
		b, _ := json.Marshal(resp)
		fmt.Fprintf(w, "data: %s\r\n\r\n", b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	return http.StatusOK
}

// response is a complete GenerateContentResponse carrying text.
func (s *Server) response(req request, text string) map[string]any {
	in := tokens(req)
	out := max(1, len(text)/4)
	return map[string]any{
		"candidates":    []any{candidate(text, "STOP")},
		"usageMetadata": map[string]any{"promptTokenCount": in, "candidatesTokenCount": out, "totalTokenCount": in + out},
		"modelVersion":  "fakegemini",
	}
}

func candidate(text, finish string) map[string]any {
	c := map[string]any{"index": 0, "content": map[string]any{"role": "model", "parts": []any{map[string]any{"text": text}}}}
	if finish != "" {
		c["finishReason"] = finish
	}
	return c
}

// tokens estimates a request's tokens the usual way: four bytes a token.
func tokens(req request) int {
	n := 0
	for _, c := range req.Contents {
		n += len(c)
	}
	return max(1, n/4)
}

// split cuts s into n pieces of about equal length, on rune boundaries
// (fewer when s is short).
func split(s string, n int) []string {
	r := []rune(s)
	n = min(n, max(1, len(r)))
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, string(r[i*len(r)/n:(i+1)*len(r)/n]))
	}
	return out
}

func writeJSON(w http.ResponseWriter, v any) int {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
	return http.StatusOK
}

// apiError writes an error in the Gemini API's shape, which Gemini CLI
// reports with its message.
func apiError(w http.ResponseWriter, code int, status, msg string) int {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "message": msg, "status": status}})
	return code
}
