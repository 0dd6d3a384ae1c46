package acp

import (
	"encoding/json"
	"testing"

	"google.golang.org/protobuf/proto"
)

// slowUpdate decodes params through the general path only.
func slowUpdate(params json.RawMessage) (string, update, error) {
	var head updateHead
	if err := json.Unmarshal(params, &head); err != nil {
		return "", update{}, err
	}
	var kind kindHead
	if err := json.Unmarshal(head.Update, &kind); err != nil {
		return "", update{}, err
	}
	u, err := translateUpdate(kind.SessionUpdate, head.Update)
	return head.SessionID, u, err
}

var chunkSamples = []string{
	`{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}`,
	`{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","messageId":"m","content":{"type":"text","text":"h\u00e9\n\"x\""}}}`,
	`{"sessionId":"s","update":{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"hmm","annotations":{"priority":1}}}}`,
	`{"sessionId":"s","update":{"sessionUpdate":"user_message_chunk","messageId":"u","content":{"type":"text","text":""}}}`,
	`{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"image","data":"aGk=","mimeType":"image/png"}}}`,
	`{"sessionId":"s","update":{"sessionUpdate":"plan","entries":[]}}`,
}

func TestTheChunkFastPathAgreesWithTheGeneralPath(t *testing.T) {
	for _, sample := range chunkSamples {
		checkFastPathAgrees(t, []byte(sample))
	}
}

func FuzzTheChunkFastPathAgreesWithTheGeneralPath(f *testing.F) {
	for _, s := range chunkSamples {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, params []byte) { checkFastPathAgrees(t, params) })
}

func checkFastPathAgrees(t *testing.T, params []byte) {
	t.Helper()
	id, fast, ok := decodeTextChunk(params)
	if !ok {
		return
	}
	slowID, slow, err := slowUpdate(params)
	if err != nil {
		t.Fatalf("the fast path took what the general path rejects (%v): %s", err, params)
	}
	if id != slowID || !proto.Equal(fast.event, slow.event) {
		t.Fatalf("paths disagree on %s:\nfast %v\nslow %v", params, fast.event, slow.event)
	}
	if fast.hasChunk != slow.hasChunk || fast.chunk != slow.chunk {
		t.Fatalf("paths disagree on accumulation of %s: %+v vs %+v", params, fast.chunk, slow.chunk)
	}
}

var scanSamples = []string{
	`{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}`,
	`{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","messageId":"m","content":{"type":"text","text":"h\u00e9\n\"x\""}}}`,
	` { "update" : { "content" : { "text" : "a" , "type" : "text" } , "sessionUpdate" : "user_message_chunk" } , "sessionId" : "s" } `,
	`{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","messageId":"m","content":{"type":"text","text":"\ud83d\ude00 \ud800"}}}`,
}

func TestTheScannerReadsTheCommonShapesAndRefusesTheRest(t *testing.T) {
	for _, sample := range scanSamples {
		if _, ok := scanTextChunk([]byte(sample)); !ok {
			t.Errorf("the scanner refused a common shape: %s", sample)
		}
		checkScannerAgrees(t, []byte(sample))
	}
	for _, refused := range []string{
		`{"sessionId":"s","sessionId":"t","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a"}}}`,
		`{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a","annotations":{}}}}`,
		`{"SessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a"}}}`,
		`{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","messageId":null,"content":{"type":"text","text":"a"}}}`,
		`{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a"}}},`,
		`{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a` + "\x01" + `"}}}`,
	} {
		if _, ok := scanTextChunk([]byte(refused)); ok {
			t.Errorf("the scanner accepted what it must leave to encoding/json: %s", refused)
		}
	}
}

func FuzzTheScannerAgreesWithEncodingJSON(f *testing.F) {
	for _, s := range append(scanSamples, chunkSamples...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, params []byte) { checkScannerAgrees(t, params) })
}

func checkScannerAgrees(t *testing.T, params []byte) {
	t.Helper()
	got, ok := scanTextChunk(params)
	if !ok {
		return
	}
	var want chunkParams
	if err := json.Unmarshal(params, &want); err != nil {
		t.Fatalf("the scanner accepted what encoding/json rejects (%v): %q", err, params)
	}
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Fatalf("scanner and encoding/json disagree on %q:\n got %s\nwant %s", params, g, w)
	}
}
