package server

import (
	"bytes"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/store"
)

// assertEcho checks that ev's Echo names two places of its encoding that
// both hold want.
func assertEcho(t *testing.T, name string, ev store.Event, want string) {
	t.Helper()
	b, e := ev.Bytes(), ev.Echo
	if e.Len != len(want) || e.From < 0 || e.From+e.Len > e.At || e.At+e.Len > len(b) {
		t.Errorf("%s: echo %+v in an encoding of %d bytes; want one of %d bytes", name, e, len(b), len(want))
		return
	}
	if !bytes.Equal(b[e.From:e.From+e.Len], []byte(want)) || !bytes.Equal(b[e.At:e.At+e.Len], []byte(want)) {
		t.Errorf("%s: the echo's places hold %.20q and %.20q; want %.20q twice", name, b[e.From:e.From+e.Len], b[e.At:e.At+e.Len], want)
	}
}

func TestATextChunkEventTellsTheJournalWhereItsTextIsRepeated(t *testing.T) {
	text := strings.Repeat("chunk text ", 6000) // 66 KB: a two-byte length varint is three here
	chunk := func(text string) *acpgatev1.MessageChunk {
		return &acpgatev1.MessageChunk{MessageId: "m1", Text: text, Content: &acpgatev1.ContentBlock{Block: &acpgatev1.ContentBlock_Text{Text: text}}}
	}
	for name, e := range map[string]*acpgatev1.PromptEvent{
		"agent message":                 {Event: &acpgatev1.PromptEvent_AgentMessageChunk{AgentMessageChunk: chunk(text)}},
		"agent thought":                 {Event: &acpgatev1.PromptEvent_AgentThoughtChunk{AgentThoughtChunk: chunk(text)}},
		"user message":                  {Event: &acpgatev1.PromptEvent_UserMessageChunk{UserMessageChunk: chunk(text)}},
		"one byte of text":              {Event: &acpgatev1.PromptEvent_AgentMessageChunk{AgentMessageChunk: chunk("x")}},
		"with the event's other fields": {Meta: &structpb.Struct{Fields: map[string]*structpb.Value{"k": structpb.NewStringValue("v")}}, Event: &acpgatev1.PromptEvent_AgentMessageChunk{AgentMessageChunk: chunk(text[:300])}},
	} {
		ev := encodeEvent(e, 5)
		var want string
		switch c := e.GetEvent().(type) {
		case *acpgatev1.PromptEvent_AgentMessageChunk:
			want = c.AgentMessageChunk.Text
		case *acpgatev1.PromptEvent_AgentThoughtChunk:
			want = c.AgentThoughtChunk.Text
		case *acpgatev1.PromptEvent_UserMessageChunk:
			want = c.UserMessageChunk.Text
		}
		assertEcho(t, name, ev, want)
	}
}

func TestEventsWithoutARepeatedTextHaveNoEcho(t *testing.T) {
	image := &acpgatev1.MessageChunk{Content: &acpgatev1.ContentBlock{Block: &acpgatev1.ContentBlock_Image{Image: &acpgatev1.ImageContent{Data: "cG5n", MimeType: "image/png"}}}}
	for name, e := range map[string]*acpgatev1.PromptEvent{
		"an image chunk":             {Event: &acpgatev1.PromptEvent_AgentMessageChunk{AgentMessageChunk: image}},
		"text unlike its content":    {Event: &acpgatev1.PromptEvent_AgentMessageChunk{AgentMessageChunk: &acpgatev1.MessageChunk{Text: "a", Content: &acpgatev1.ContentBlock{Block: &acpgatev1.ContentBlock_Text{Text: "b"}}}}},
		"a heartbeat":                {Event: &acpgatev1.PromptEvent_Heartbeat{Heartbeat: &acpgatev1.Heartbeat{LastSeq: 3}}},
		"an outcome with no message": {Event: &acpgatev1.PromptEvent_Outcome{Outcome: &acpgatev1.PromptOutcome{Text: "text only"}}},
		"an outcome whose final message is not the text's tail": {Event: &acpgatev1.PromptEvent_Outcome{Outcome: &acpgatev1.PromptOutcome{Text: "one", FinalMessage: "two"}}},
	} {
		if ev := encodeEvent(e, 5); ev.Echo != (store.Echo{}) {
			t.Errorf("%s: echo %+v; want none", name, ev.Echo)
		}
	}
}

func TestAnOutcomeTellsTheJournalThatItsFinalMessageRepeatsItsText(t *testing.T) {
	answer := "first message\n\n" + strings.Repeat("the final message ", 10_000)
	for name, o := range map[string]*acpgatev1.PromptOutcome{
		"one message":              {Text: answer, FinalMessage: answer, StopReason: "end_turn"},
		"the final message a tail": {Text: answer, FinalMessage: answer[len("first message\n\n"):], TurnId: "t1"},
		"a short answer":           {Text: "ok", FinalMessage: "ok"},
	} {
		ev := encodeEvent(&acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_Outcome{Outcome: o}}, 7)
		assertEcho(t, name, ev, o.FinalMessage)
	}
}
