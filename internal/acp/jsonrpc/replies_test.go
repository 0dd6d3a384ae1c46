package jsonrpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// textHandler answers "text" with a TextResult of size bytes, reserving
// them first as a file read does, and "huge" by reserving more than any
// budget lends.
type textHandler struct {
	recordingHandler
	size int
}

func (h textHandler) Request(ctx context.Context, method string, params json.RawMessage) (any, *ErrorObject) {
	switch method {
	case "text":
		if err := Reserve(ctx, int64(h.size)); err != nil {
			return nil, err
		}
		return TextResult{Member: "content", Text: strings.Repeat("x", h.size)}, nil
	case "huge":
		if err := Reserve(ctx, 1<<40); err != nil {
			return nil, err
		}
		return nil, nil
	}
	return h.recordingHandler.Request(ctx, method, params)
}

func newTextPeer(t *testing.T, opts Options, size int) *peer {
	notes := make(chan string, 100)
	p := newPeerServing(t, opts, textHandler{recordingHandler{notes}, size}, notes)
	p.lines.Buffer(make([]byte, 0, 64<<10), 4<<20)
	return p
}

// answers reads n answers, by id.
func (p *peer) answers(n int) map[float64]map[string]any {
	got := map[float64]map[string]any{}
	for range n {
		m := p.read()
		got[m["id"].(float64)] = m
	}
	return got
}

func TestAnswersThatDoNotFitWaitForTheAgentToReadEarlierOnesAndAreThenSent(t *testing.T) {
	const size = 300 << 10
	p := newTextPeer(t, Options{MaxReplyBytes: 400 << 10, ReplyWait: time.Minute}, size)
	for i := range 3 {
		p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"text","params":{}}`, i))
	}
	// The first answer fills the pipe and the budget; the others wait for
	// it to be read, and are sent as it is.
	time.Sleep(200 * time.Millisecond)
	for id, m := range p.answers(3) {
		result, _ := m["result"].(map[string]any)
		if content, _ := result["content"].(string); len(content) != size {
			t.Errorf("answer %v: %.200v", id, m)
		}
	}
}

func TestAnAnswerThatFindsNoRoomWithinTheWaitIsAnErrorSayingWhatToDo(t *testing.T) {
	const size = 300 << 10
	p := newTextPeer(t, Options{MaxReplyBytes: 400 << 10, ReplyWait: 100 * time.Millisecond}, size)
	p.send(`{"jsonrpc":"2.0","id":1,"method":"text","params":{}}`)
	p.send(`{"jsonrpc":"2.0","id":2,"method":"text","params":{}}`)
	// The agent does not read while the wait runs out.
	time.Sleep(500 * time.Millisecond)
	var results, refusals int
	for id, m := range p.answers(2) {
		if result, ok := m["result"].(map[string]any); ok && len(result["content"].(string)) == size {
			results++
			continue
		}
		e, _ := m["error"].(map[string]any)
		if e["code"] != float64(CodeReplyLimit) || !strings.Contains(e["message"].(string), "limits.max_agent_reply_bytes") || !strings.Contains(e["message"].(string), "read the answers") {
			t.Errorf("answer %v: %.300v", id, m)
		}
		refusals++
	}
	if results != 1 || refusals != 1 {
		t.Errorf("%d results and %d refusals, want one of each", results, refusals)
	}
}

func TestAnAnswerLargerThanTheWholeBudgetIsRefusedWithoutWaiting(t *testing.T) {
	p := newTextPeer(t, Options{MaxReplyBytes: 1 << 20, ReplyWait: time.Hour}, 0)
	p.send(`{"jsonrpc":"2.0","id":7,"method":"huge","params":{}}`)
	got := make(chan map[string]any, 1)
	go func() { got <- p.read() }()
	select {
	case m := <-got:
		e, _ := m["error"].(map[string]any)
		if e["code"] != float64(CodeReplyLimit) || !strings.Contains(e["message"].(string), "more than the 1048576 bytes") {
			t.Errorf("answer %v", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("an answer no wait could make room for waited")
	}
}

func TestTextIsWrittenEscapedExactlyAsEncodingJSONEscapesIt(t *testing.T) {
	tricky := "\"\\\n\t\x00\x1f<>&\u2028\u2029é€😀\xff\xe2\x82"
	var cases []string
	cases = append(cases, "", tricky, strings.Repeat(tricky, 5000))
	// A multi-byte rune, and a broken one, across the chunk boundary at
	// each offset.
	for _, r := range []string{"€", "😀", "\xe2\x82", "\x80\x80\x80\x80\x80"} {
		for back := range 5 {
			cases = append(cases, strings.Repeat("a", escapeChunk-back)+r+strings.Repeat("b", escapeChunk))
		}
	}
	for i, s := range cases {
		want, err := marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		w := bufio.NewWriter(&b)
		if err := writeEscaped(w, s); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if got := `"` + b.String() + `"`; got != string(want) {
			t.Errorf("case %d: written escaped differs from encoding/json (%d against %d bytes)", i, len(got), len(want))
		}
	}
}
