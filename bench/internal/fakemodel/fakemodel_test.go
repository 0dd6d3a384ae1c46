package fakemodel

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// events posts body to path and returns the data of every server-sent
// event, in order.
func events(t *testing.T, path, body string) []string {
	t.Helper()
	srv := httptest.NewServer(New(Options{}))
	t.Cleanup(srv.Close)
	resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("%s: status %d, content type %q", path, resp.StatusCode, ct)
	}
	var out []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

func TestAChatCompletionStreamsTheAnswerInChunksEndingWithDone(t *testing.T) {
	ev := events(t, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if len(ev) < 4 || ev[len(ev)-1] != "[DONE]" {
		t.Fatalf("events %q", ev)
	}
	var text strings.Builder
	finish := ""
	for _, e := range ev[:len(ev)-1] {
		var c struct {
			Choices []struct {
				Delta        struct{ Content string }
				FinishReason *string `json:"finish_reason"`
			}
		}
		if err := json.Unmarshal([]byte(e), &c); err != nil {
			t.Fatal(err)
		}
		text.WriteString(c.Choices[0].Delta.Content)
		if c.Choices[0].FinishReason != nil {
			finish = *c.Choices[0].FinishReason
		}
	}
	if text.String() != AnswerText || finish != "stop" {
		t.Errorf("text %q, finish %q", text.String(), finish)
	}
}

func TestThePermissionScenarioCallsTheOfferedWriteToolWithThePathAfterTheMarker(t *testing.T) {
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"context /home/x/.agent\n[permission] write /w/new.txt"}],
		"tools":[{"type":"function","function":{"name":"run_shell_command","parameters":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}}},
		         {"type":"function","function":{"name":"write_file","parameters":{"type":"object","properties":{"file_path":{"type":"string"},"content":{"type":"string"}},"required":["file_path","content"]}}}]}`
	ev := events(t, "/v1/chat/completions", body)
	var call struct {
		Choices []struct {
			Delta struct {
				ToolCalls []struct {
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			}
		}
	}
	if err := json.Unmarshal([]byte(ev[1]), &call); err != nil || len(call.Choices[0].Delta.ToolCalls) != 1 {
		t.Fatalf("events %q: %v", ev, err)
	}
	fn := call.Choices[0].Delta.ToolCalls[0].Function
	if fn.Name != "write_file" || fn.Arguments != `{"content":"written by the stand-in model\n","file_path":"/w/new.txt"}` {
		t.Errorf("called %s(%s)", fn.Name, fn.Arguments)
	}
}

func TestAToolResultFollowedByAPromptInOneAnthropicMessageAnswersThePrompt(t *testing.T) {
	body := `{"model":"m","stream":true,"messages":[
		{"role":"user","content":"[permission] /w/a.txt"},
		{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"Write","input":{}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ok"},{"type":"text","text":"[refuse] now"}]}]}`
	ev := events(t, "/v1/messages", body)
	if !strings.Contains(strings.Join(ev, "\n"), `"stop_reason":"refusal"`) {
		t.Errorf("the prompt after the tool result was not refused:\n%s", strings.Join(ev, "\n"))
	}
}

func TestAResponsesStreamEndsWithTheCompletedResponse(t *testing.T) {
	ev := events(t, "/v1/responses", `{"model":"m","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}]}`)
	last := ev[len(ev)-1]
	if !strings.Contains(last, `"type":"response.completed"`) || !strings.Contains(last, AnswerText) {
		t.Errorf("last event %s", last)
	}
}
