package translate

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"unsafe"

	"google.golang.org/protobuf/proto"
)

// slowUpdate decodes params through the general path only.
func slowUpdate(params json.RawMessage) (string, Update, error) {
	var head updateHead
	if err := json.Unmarshal(params, &head); err != nil {
		return "", Update{}, err
	}
	var kind kindHead
	if err := json.Unmarshal(head.Update, &kind); err != nil {
		return "", Update{}, err
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
	id, fast, ok := decodeTextChunk(params, nil)
	if !ok {
		return
	}
	slowID, slow, err := slowUpdate(params)
	if err != nil {
		t.Fatalf("the fast path took what the general path rejects (%v): %s", err, params)
	}
	if id != slowID || !proto.Equal(fast.Event, slow.Event) {
		t.Fatalf("paths disagree on %s:\nfast %v\nslow %v", params, fast.Event, slow.Event)
	}
	if fast.HasChunk != slow.HasChunk || fast.Chunk != slow.Chunk {
		t.Fatalf("paths disagree on accumulation of %s: %+v vs %+v", params, fast.Chunk, slow.Chunk)
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
		if _, ok := scanTextChunk([]byte(sample), nil); !ok {
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
		if _, ok := scanTextChunk([]byte(refused), nil); ok {
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
	got, ok := scanTextChunk(params, nil)
	if !ok {
		return
	}
	var want chunkParams
	if err := json.Unmarshal(params, &want); err != nil {
		t.Fatalf("the scanner accepted what encoding/json rejects (%v): %q", err, params)
	}
	if w := want.flat(); !reflect.DeepEqual(got, w) {
		t.Fatalf("scanner and encoding/json disagree on %q:\n got %+v\nwant %+v", params, got, w)
	}
}

func TestChunksDecodedThroughOneConnectionShareTheIdsTheyRepeat(t *testing.T) {
	var ids IDCache
	chunk := func(session, message, text string) []byte {
		return fmt.Appendf(nil, `{"sessionId":%q,"update":{"sessionUpdate":"agent_message_chunk","messageId":%q,"content":{"type":"text","text":%q}}}`, session, message, text)
	}
	lines := [][]byte{chunk("s1", "m1", "a"), chunk("s1", "m1", "b"), chunk("s1", "m2", "c"), chunk("s2", "m2", "d"), chunk("s\u00e9", "m\\u0031", "e")}
	var prev Update
	var prevSession string
	for i, line := range lines {
		session, u, ok := decodeTextChunk(line, &ids)
		if !ok {
			t.Fatalf("line %d was refused: %s", i, line)
		}
		slowSession, slow, err := slowUpdate(line)
		if err != nil || session != slowSession || !proto.Equal(u.Event, slow.Event) || u.Chunk != slow.Chunk {
			t.Errorf("line %d: %s %v, the general path %s %v (%v)", i, session, u.Event, slowSession, slow.Event, err)
		}
		if i == 1 && (unsafe.StringData(session) != unsafe.StringData(prevSession) || unsafe.StringData(u.Chunk.MessageID) != unsafe.StringData(prev.Chunk.MessageID)) {
			t.Errorf("the second chunk of a message read its session and message ids anew")
		}
		prev, prevSession = u, session
	}
}

// FuzzLiteralAgreesWithAByteLoop holds the eight-bytes-at-a-time test of a
// JSON string's bytes to the plain loop it replaces.
func FuzzLiteralAgreesWithAByteLoop(f *testing.F) {
	for _, s := range []string{"", "plain text of some length", "a\\b", "tab\there", "\x1f", "\x20\x7f\x80\xff", "12345678\\", "1234567\x00", "\xc3\xa9\\\"", "0123456789abcdef\x19"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want := true
		for _, c := range b {
			if c < 0x20 || c == '\\' {
				want = false
			}
		}
		if got := literal(b); got != want {
			t.Fatalf("literal(%q) = %v, want %v", b, got, want)
		}
	})
}
