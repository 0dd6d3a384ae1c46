package wire

import (
	"bytes"
	"strings"
	"testing"
	"unsafe"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

func TestALongTextChunkEncodedInPiecesIsTheEncodingProtoMarshalGives(t *testing.T) {
	text := strings.Repeat("a long chunk ", 5100) // 66 KB
	chunk := func(id string) *acpgatev1.MessageChunk {
		return &acpgatev1.MessageChunk{MessageId: id, Text: text}
	}
	meta := &structpb.Struct{Fields: map[string]*structpb.Value{"example.com/k": structpb.NewStringValue("v")}}
	for name, e := range map[string]*acpgatev1.PromptEvent{
		"an agent message chunk with a message id": {Event: &acpgatev1.PromptEvent_AgentMessageChunk{AgentMessageChunk: chunk("m1")}},
		"without a message id":                     {Event: &acpgatev1.PromptEvent_AgentMessageChunk{AgentMessageChunk: chunk("")}},
		"with _meta":                               {Meta: meta, Event: &acpgatev1.PromptEvent_AgentMessageChunk{AgentMessageChunk: chunk("m2")}},
		"a thought":                                {Event: &acpgatev1.PromptEvent_AgentThoughtChunk{AgentThoughtChunk: chunk("m3")}},
		"a user message":                           {Event: &acpgatev1.PromptEvent_UserMessageChunk{UserMessageChunk: chunk("")}},
	} {
		ev := Encode(e, 300) // a seq of two bytes
		want, err := proto.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if got := ev.Bytes(); !bytes.Equal(got, want) {
			t.Errorf("%s: pieces joined are %d bytes unlike proto.Marshal's %d", name, len(got), len(want))
		}
		shared := 0
		for _, p := range ev.Pieces() {
			if unsafe.SliceData(p) == unsafe.StringData(text) && len(p) == len(text) {
				shared++
			}
		}
		if shared != 1 {
			t.Errorf("%s: %d pieces are the text's own memory; want 1: a chunk carries its text once", name, shared)
		}
	}
}

func TestAShortTextChunkIsEncodedInOnePiece(t *testing.T) {
	text := strings.Repeat("x", minChunkPieces-1)
	e := &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_AgentMessageChunk{AgentMessageChunk: &acpgatev1.MessageChunk{Text: text}}}
	if ev := Encode(e, 2); len(ev.More) != 0 {
		t.Errorf("a chunk of %d bytes was encoded in %d pieces; want one", len(text), 1+len(ev.More))
	}
}
