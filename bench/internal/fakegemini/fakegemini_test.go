package fakegemini

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// post sends body to path on a stand-in answering opts and returns the
// response and the stand-in.
func post(t *testing.T, opts Options, path, body string) (*http.Response, *Server) {
	t.Helper()
	s := New(opts)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp, s
}

// answerText is the text of a GenerateContentResponse.
type answerText struct {
	Candidates []struct {
		Content struct {
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
}

func TestAStreamedAnswerComesAsServerSentEventsEndingWithStop(t *testing.T) {
	resp, s := post(t, Options{Answer: "one two three", Chunks: 3}, "/v1beta/models/m:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var text strings.Builder
	var finish []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(strings.TrimRight(sc.Text(), "\r"), "data: ")
		if !ok {
			continue
		}
		var a answerText
		if err := json.Unmarshal([]byte(data), &a); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		text.WriteString(a.Candidates[0].Content.Parts[0].Text)
		finish = append(finish, a.Candidates[0].FinishReason)
	}
	if text.String() != "one two three" {
		t.Fatalf("answer %q", text.String())
	}
	if strings.Join(finish, ",") != ",,STOP" {
		t.Fatalf("finish reasons %q: only the last event ends the answer", finish)
	}
	if c := s.Counts(); c.Stream != 1 || c.Unknown != 0 {
		t.Fatalf("counts %+v", c)
	}
}

func TestAJSONRequestGetsTheSmallestValueOfItsSchemaSoTheUserSpeaksNext(t *testing.T) {
	body := `{"contents":[],"generationConfig":{"responseMimeType":"application/json","responseJsonSchema":{
		"type":"object","properties":{"reasoning":{"type":"string"},"next_speaker":{"type":"string","enum":["user","model"]},"n":{"type":["null","integer"]}}}}}`
	resp, _ := post(t, Options{}, "/v1beta/models/m:generateContent", body)
	var a answerText
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(a.Candidates[0].Content.Parts[0].Text), &got); err != nil {
		t.Fatalf("answer is not JSON: %v", err)
	}
	if got["next_speaker"] != "user" || got["reasoning"] != DefaultAnswer || got["n"] != float64(0) {
		t.Fatalf("answer %v", got)
	}
}

func TestACallTheStandInDoesNotServeIsANotFoundAndCounted(t *testing.T) {
	resp, s := post(t, Options{}, "/v1beta/models/m:embedContent", `{}`)
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var e struct {
		Error struct {
			Status string `json:"status"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || e.Error.Status != "NOT_FOUND" {
		t.Fatalf("error body %+v, %v", e, err)
	}
	if c := s.Counts(); c.Unknown != 1 {
		t.Fatalf("counts %+v", c)
	}
}

func TestThePermissionScenarioCallsGeminiCLIsWriteFileWithThePathAfterTheMarker(t *testing.T) {
	body := `{"contents":[{"role":"user","parts":[{"text":"context /root/.gemini"},{"text":"[permission] write /w/new.txt"}]}],
		"tools":[{"functionDeclarations":[{"name":"write_file","parametersJsonSchema":{"type":"object","properties":{"file_path":{"type":"string"},"content":{"type":"string"}},"required":["file_path","content"]}}]}]}`
	resp, _ := post(t, Options{}, "/v1beta/models/m:streamGenerateContent?alt=sse", body)
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), `"functionCall":{"args":{"content":"written by the stand-in model\n","file_path":"/w/new.txt"},"name":"write_file"}`) {
		t.Errorf("no write_file call of /w/new.txt:\n%s", b)
	}
}
