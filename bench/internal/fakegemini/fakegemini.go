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
// looping.
//
// A prompt carrying one of fakemodel's markers chooses a scenario, as with
// the other stand-ins: a call of Gemini CLI's write_file tool (which it asks
// permission for), a slow answer to cancel, a refusal (finish reason
// SAFETY), or an API error. Anything else is a 404 in the API's error shape, counted, so that
// a new call Gemini CLI makes shows up instead of being guessed at.
package fakegemini

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/acpgate/acpgate/bench/internal/fakemodel"
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
		return s.streamAnswer(w, r, req), n
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
	Contents []json.RawMessage `json:"contents"`
	Tools    []struct {
		FunctionDeclarations []struct {
			Name                 string          `json:"name"`
			Parameters           json.RawMessage `json:"parameters"`
			ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
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
	var sc fakemodel.Schema
	_ = json.Unmarshal(schema, &sc) // no schema: an empty object
	b, _ := json.Marshal(sc.Smallest(s.opts.Answer))
	return string(b)
}

// content is the part of a Content the stand-in reads.
type content struct {
	Role  string `json:"role"`
	Parts []struct {
		Text             string          `json:"text"`
		FunctionResponse json.RawMessage `json:"functionResponse"`
	} `json:"parts"`
}

// scenario is what the model does with req, and the tool call of the
// Permission scenario.
func scenario(req request) (fakemodel.Scenario, map[string]any) {
	var prompt string
	for _, raw := range req.Contents {
		var c content
		_ = json.Unmarshal(raw, &c)
		if c.Role != "user" {
			continue
		}
		text, result := "", false
		for _, p := range c.Parts {
			text += p.Text
			result = result || len(p.FunctionResponse) > 0
		}
		if result {
			prompt = "" // the tool ran: answer
		} else {
			prompt = text
		}
	}
	sc := fakemodel.ScenarioOf(prompt)
	if sc != fakemodel.Permission {
		return sc, nil
	}
	var tools []fakemodel.Tool
	for _, t := range req.Tools {
		for _, f := range t.FunctionDeclarations {
			schema := f.ParametersJSONSchema
			if len(schema) == 0 {
				schema = f.Parameters
			}
			tools = append(tools, fakemodel.Tool{Name: f.Name, Schema: schema})
		}
	}
	name, args, ok := fakemodel.ToolCall(prompt, tools)
	if !ok {
		return fakemodel.Answer, nil
	}
	return sc, map[string]any{"functionCall": map[string]any{"name": name, "args": args}}
}

// streamAnswer writes the answer as server-sent events, the last one with
// the finish reason and usage; or the prompt's scenario.
func (s *Server) streamAnswer(w http.ResponseWriter, r *http.Request, req request) int {
	answer := s.answerFor(req)
	sc, call := fakemodel.Answer, map[string]any(nil)
	if req.GenerationConfig.ResponseMimeType != "application/json" {
		sc, call = scenario(req)
	}
	if sc == fakemodel.Fail {
		return apiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", fakemodel.ErrorMessage)
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	send := func(resp map[string]any) {
		b, _ := json.Marshal(resp)
		fmt.Fprintf(w, "data: %s\r\n\r\n", b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	switch sc {
	case fakemodel.Permission:
		resp := s.response(req, "")
		resp["candidates"] = []any{map[string]any{"index": 0, "finishReason": "STOP", "content": map[string]any{"role": "model", "parts": []any{call}}}}
		send(resp)
		return http.StatusOK
	case fakemodel.Refuse:
		resp := s.response(req, "")
		resp["candidates"] = []any{map[string]any{"index": 0, "finishReason": "SAFETY", "content": map[string]any{"role": "model", "parts": []any{}}}}
		send(resp)
		return http.StatusOK
	case fakemodel.Slow:
		tick := time.NewTicker(fakemodel.SlowTick)
		defer tick.Stop()
		deadline := time.After(fakemodel.SlowFor)
		for {
			select {
			case <-r.Context().Done():
				return http.StatusOK
			case <-deadline:
				send(s.response(req, answer))
				return http.StatusOK
			case <-tick.C:
				send(map[string]any{"candidates": []any{candidate("tick ", "")}})
			}
		}
	}
	parts := fakemodel.Chunks(answer, s.opts.Chunks)
	for i, p := range parts {
		resp := s.response(req, p)
		if i < len(parts)-1 {
			resp = map[string]any{"candidates": []any{candidate(p, "")}}
		}
		send(resp)
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
