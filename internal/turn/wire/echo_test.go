package wire

import (
	"bytes"
	"strings"
	"testing"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/store"
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

func TestEventsWithoutARepeatedTextHaveNoEcho(t *testing.T) {
	text := strings.Repeat("chunk text ", 6000)
	image := &acpgatev1.MessageChunk{Content: &acpgatev1.ContentBlock{Block: &acpgatev1.ContentBlock_Image{Image: &acpgatev1.ImageContent{Data: "cG5n", MimeType: "image/png"}}}}
	for name, e := range map[string]*acpgatev1.PromptEvent{
		"an image chunk": {Event: &acpgatev1.PromptEvent_AgentMessageChunk{AgentMessageChunk: image}},
		"a text chunk, which carries its text once":             {Event: &acpgatev1.PromptEvent_AgentMessageChunk{AgentMessageChunk: &acpgatev1.MessageChunk{MessageId: "m1", Text: text}}},
		"a short text chunk":                                    {Event: &acpgatev1.PromptEvent_AgentThoughtChunk{AgentThoughtChunk: &acpgatev1.MessageChunk{Text: "x"}}},
		"a heartbeat":                                           {Event: &acpgatev1.PromptEvent_Heartbeat{Heartbeat: &acpgatev1.Heartbeat{LastSeq: 3}}},
		"an outcome with no message":                            {Event: &acpgatev1.PromptEvent_Outcome{Outcome: &acpgatev1.PromptOutcome{Text: "text only"}}},
		"an outcome whose final message is not the text's tail": {Event: &acpgatev1.PromptEvent_Outcome{Outcome: &acpgatev1.PromptOutcome{Text: "one", FinalMessage: "two"}}},
	} {
		if ev := Encode(e, 5); ev.Echo != (store.Echo{}) {
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
		ev := Encode(&acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_Outcome{Outcome: o}}, 7)
		assertEcho(t, name, ev, o.FinalMessage)
	}
}
