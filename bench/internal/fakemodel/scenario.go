// Package fakemodel is a stand-in for the model APIs that real ACP agents
// call: OpenAI's chat completions and Responses API, and Anthropic's
// Messages API, each streamed as server-sent events as the real API
// streams. Pointed at it through the agent's base URL, an agent completes
// whole turns without a network or a key, so that the gateway's handling
// of real agents can be verified end to end.
//
// The prompt chooses what the model does (see Scenario): a plain answer,
// a tool call that the agent must ask permission for, a slow answer to
// cancel, a refusal, or an API error. Without a scenario every agent would
// only ever be seen answering, and permission, cancellation and failure
// paths — where agents differ most — would go unverified.
package fakemodel

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Scenario is what the stand-in model does with a prompt; the prompt's
// text chooses it with one of the markers below.
type Scenario int

const (
	// Answer streams Answer in several chunks and ends the turn.
	Answer Scenario = iota
	// Permission calls a tool that writes a file (or, failing that, runs
	// a command): the agent asks the client's permission before running
	// it. The first absolute path in the prompt is the file to write.
	// When the tool's result comes back, the model answers ToolDone.
	Permission
	// Slow streams a chunk every SlowTick until SlowFor has passed or the
	// agent hangs up: a turn to cancel.
	Slow
	// Refuse declines, as the API marks a refusal.
	Refuse
	// Fail answers with an API error (400: agents do not retry it).
	Fail
)

// The markers that choose a scenario, and the texts the stand-in answers.
const (
	MarkPermission = "[permission]"
	MarkSlow       = "[slow]"
	MarkRefuse     = "[refuse]"
	MarkError      = "[error]"

	AnswerText   = "Hello from the stand-in model."
	ToolDone     = "The tool ran; done."
	RefusalText  = "I can't help with that."
	ErrorMessage = "the stand-in model was asked to fail"
	// FileContent is what the Permission scenario writes.
	FileContent = "written by the stand-in model\n"
	// command is what the Permission scenario runs when no tool writes:
	// it writes FileContent to the path, so that the outcome is the same.
	command = "printf 'written by the stand-in model\\n' > %q"
)

// SlowTick and SlowFor pace the Slow scenario: long enough that a cancel
// always lands mid-answer, bounded so that a forgotten turn still ends.
const (
	SlowTick = 100 * time.Millisecond
	SlowFor  = 60 * time.Second
)

// ScenarioOf is the scenario the prompt text asks for.
func ScenarioOf(prompt string) Scenario {
	switch {
	case strings.Contains(prompt, MarkPermission):
		return Permission
	case strings.Contains(prompt, MarkSlow):
		return Slow
	case strings.Contains(prompt, MarkRefuse):
		return Refuse
	case strings.Contains(prompt, MarkError):
		return Fail
	}
	return Answer
}

// Tool is a tool an agent offers the model: its name and the JSON Schema
// of its arguments.
type Tool struct {
	Name   string
	Schema json.RawMessage
}

// writeTools and shellTools are the tool names the agents give their file
// writer and their shell, in the order the stand-in prefers them: a write
// first, since every agent's "ask" mode asks before one.
var (
	writeTools = []string{"write_file", "write", "Write"}
	shellTools = []string{"run_shell_command", "shell", "shell_command", "exec_command", "bash", "Bash"}
)

// ToolCall is the call the Permission scenario makes: the first offered
// tool that writes, else that runs a command, with arguments made from its
// schema. ok is false when the agent offered neither (a side request,
// such as a title, that carries the prompt).
func ToolCall(prompt string, tools []Tool) (name string, args map[string]any, ok bool) {
	for _, want := range append(append([]string{}, writeTools...), shellTools...) {
		for _, t := range tools {
			if t.Name == want {
				return t.Name, Arguments(t.Schema, prompt), true
			}
		}
	}
	return "", nil, false
}

var absPath = regexp.MustCompile(`(^|\s)(/[^\s]+)`)

// Arguments fills a tool's required arguments (all of them, when none are
// marked required): a path from the prompt, the file content, the command,
// a description, and the smallest value of any other.
func Arguments(schema json.RawMessage, prompt string) map[string]any {
	var s Schema
	_ = json.Unmarshal(schema, &s) // no schema: no arguments
	path := "/tmp/stand-in.txt"
	if _, after, ok := strings.Cut(prompt, MarkPermission); ok {
		prompt = after // agents put context with paths of their own before it
	}
	if m := absPath.FindStringSubmatch(prompt); m != nil {
		path = m[2]
	}
	names := s.Required
	if len(names) == 0 {
		for n := range s.Properties {
			names = append(names, n)
		}
	}
	args := map[string]any{}
	for _, n := range names {
		p := s.Properties[n]
		lower := strings.ToLower(n)
		switch {
		case strings.Contains(lower, "path"):
			args[n] = path
		case lower == "content" || lower == "contents":
			args[n] = FileContent
		case lower == "command" || lower == "cmd":
			cmd := fmt.Sprintf(command, path)
			if p != nil && p.TypeName() == "array" {
				args[n] = []string{"bash", "-lc", cmd}
			} else {
				args[n] = cmd
			}
		case lower == "description":
			args[n] = "Write a file for the stand-in"
		default:
			args[n] = p.Smallest("")
		}
	}
	return args
}

// Schema is the part of a JSON Schema (or the Gemini API's Schema, types
// in upper case) the stand-in reads.
type Schema struct {
	Type       any                `json:"type"` // a name, or a list of names
	Enum       []any              `json:"enum"`
	Properties map[string]*Schema `json:"properties"`
	Required   []string           `json:"required"`
	Items      *Schema            `json:"items"`
}

// Smallest is the smallest value of the schema: every property of an
// object, the first value of an enum, text for a string, zero, false, an
// empty list. An agent that asks for JSON of a schema (whether the user
// speaks next, which model to route to) gets a value it accepts.
func (s *Schema) Smallest(text string) any {
	if s == nil {
		return map[string]any{}
	}
	if len(s.Enum) > 0 {
		return s.Enum[0]
	}
	switch s.TypeName() {
	case "string":
		return text
	case "number", "integer":
		return 0
	case "boolean":
		return false
	case "array":
		return []any{}
	case "null":
		return nil
	default:
		obj := map[string]any{}
		for name, p := range s.Properties {
			obj[name] = p.Smallest(text)
		}
		return obj
	}
}

// TypeName is the schema's type in lower case: the first that is not
// "null" when several are listed.
func (s *Schema) TypeName() string {
	if s == nil {
		return ""
	}
	switch t := s.Type.(type) {
	case string:
		return strings.ToLower(t)
	case []any:
		for _, v := range t {
			if name, ok := v.(string); ok && name != "null" {
				return strings.ToLower(name)
			}
		}
	}
	if len(s.Properties) > 0 {
		return "object"
	}
	return ""
}

// Chunks cuts s into n pieces of about equal length, on rune boundaries
// (fewer when s is short): each is one streamed event.
func Chunks(s string, n int) []string {
	r := []rune(s)
	n = min(max(1, n), max(1, len(r)))
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, string(r[i*len(r)/n:(i+1)*len(r)/n]))
	}
	return out
}
