package wire

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

func TestAnOutcomeEncodedInPiecesIsTheEncodingProtoMarshalGives(t *testing.T) {
	answer := "first message\n\n" + strings.Repeat("the final message ", 10_000)
	final := answer[len("first message\n\n"):]
	for name, o := range map[string]*acpgatev1.PromptOutcome{
		"text and its tail as the final message": {Text: answer, FinalMessage: final, StopReason: "end_turn", StopKind: acpgatev1.StopKind_STOP_KIND_END_TURN},
		"one message, both fields alike":         {Text: final, FinalMessage: final, SessionId: "s1", TurnId: "t1"},
		"text only":                              {Text: "text"},
		"final message only":                     {FinalMessage: "final"},
		"with usage after the text":              {Text: "a", FinalMessage: "a", Usage: &acpgatev1.Usage{InputTokens: proto.Int64(3), OutputTokens: proto.Int64(4)}},
		"with every scalar past them":            {Text: "a", FinalMessage: "a", TextBytes: 1, FinalMessageBytes: 1, TextOmission: acpgatev1.TextOmission_TEXT_OMISSION_CLIENT_GONE},
	} {
		e := &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_Outcome{Outcome: o}}
		ev := Encode(e, 9)
		if len(ev.More) == 0 {
			t.Errorf("%s: encoded in one piece; want the answer in pieces of its own", name)
		}
		want, err := proto.Marshal(e) // e now has its seq and time
		if err != nil {
			t.Fatal(err)
		}
		if got := ev.Bytes(); !bytes.Equal(got, want) {
			t.Errorf("%s: pieces joined are %d bytes unlike proto.Marshal's %d", name, len(got), len(want))
		}
		if ev.Seq != 9 || ev.Len() != len(want) {
			t.Errorf("%s: seq %d, length %d; want 9, %d", name, ev.Seq, ev.Len(), len(want))
		}
	}
}

func TestAnOutcomeInPiecesSharesTheAnswerInsteadOfCopyingIt(t *testing.T) {
	answer := strings.Repeat("a long answer ", 100_000)
	e := &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_Outcome{Outcome: &acpgatev1.PromptOutcome{
		Text: answer, FinalMessage: answer, StopReason: "end_turn",
	}}}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	ev := Encode(e, 2)
	runtime.ReadMemStats(&after)
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 64<<10 {
		t.Errorf("encoding an outcome repeating a %d-byte answer allocated %d bytes; want a few KiB", len(answer), allocated)
	}
	shared, own := 0, 0
	for _, p := range ev.Pieces() {
		if unsafe.SliceData(p) == unsafe.StringData(answer) {
			shared++
		} else {
			own += len(p)
		}
	}
	if shared != 2 || own > 1<<10 {
		t.Errorf("%d pieces are the answer's memory and %d bytes are the encoding's own; want 2 and a few", shared, own)
	}
}

func TestAnOutcomeWithMetaDecodesAsItWasInPieces(t *testing.T) {
	meta, err := structpb.NewStruct(map[string]any{"b": "2", "a": 1.0, "c": []any{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	e := &acpgatev1.PromptEvent{
		Meta:  meta,
		Event: &acpgatev1.PromptEvent_Outcome{Outcome: &acpgatev1.PromptOutcome{Text: "answer", FinalMessage: "answer", Meta: meta}},
	}
	ev := Encode(e, 4)
	got := &acpgatev1.PromptEvent{}
	if err := proto.Unmarshal(ev.Bytes(), got); err != nil {
		t.Fatalf("the pieces joined do not decode: %v", err)
	}
	if !proto.Equal(got, e) {
		t.Errorf("decoded %v; want %v", got, e)
	}
}

func TestAnOutcomeWithoutTextIsEncodedInOnePiece(t *testing.T) {
	e := &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_Outcome{Outcome: &acpgatev1.PromptOutcome{TextOmitted: true, TextBytes: 5}}}
	ev := Encode(e, 3)
	want, _ := proto.Marshal(e)
	if len(ev.More) != 0 || !bytes.Equal(ev.Data, want) {
		t.Errorf("encoded as %d bytes and %d more pieces; want proto.Marshal's %d bytes alone", len(ev.Data), len(ev.More), len(want))
	}
}

func TestAnOutcomeWhoseTextIsInPiecesIsEncodedAsTheOutcomeWithTheTextJoined(t *testing.T) {
	first := []string{"first ", "message"}
	last := []string{"the final ", "", "message ", strings.Repeat("in pieces ", 1_000)}
	text := append(append(append([]string{}, first...), "\n\n"), last...)
	joined := &acpgatev1.PromptOutcome{Text: strings.Join(text, ""), FinalMessage: strings.Join(last, ""), StopReason: "end_turn", TurnId: "t1"}
	e := &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_Outcome{Outcome: &acpgatev1.PromptOutcome{StopReason: "end_turn", TurnId: "t1"}}}
	ev := EncodeTerminal(e, 7, Pieces{Text: text, Final: last})
	want, err := proto.Marshal(&acpgatev1.PromptEvent{Seq: 7, Time: e.GetTime(), Event: &acpgatev1.PromptEvent_Outcome{Outcome: joined}})
	if err != nil {
		t.Fatal(err)
	}
	if got := ev.Bytes(); !bytes.Equal(got, want) {
		t.Fatalf("the pieces encode as %d bytes unlike the joined outcome's %d", len(got), len(want))
	}
	// The final message is the text's tail: the journal keeps it once.
	if ev.Echo.Len != len(joined.FinalMessage) {
		t.Errorf("echo of %d bytes; want the final message's %d", ev.Echo.Len, len(joined.FinalMessage))
	}
	long := last[len(last)-1]
	shared := 0
	for _, p := range ev.Pieces() {
		if unsafe.SliceData(p) == unsafe.StringData(long) {
			shared++
		}
	}
	if shared != 2 {
		t.Errorf("the long piece is referred to %d times by the encoding; want twice (text and final message), never copied", shared)
	}
}

func TestTheFinalMessageIsFoundAtTheTextsEndHoweverBothAreCut(t *testing.T) {
	for _, c := range []struct {
		text, final []string
		tail        bool
	}{
		{[]string{"ab", "cd"}, []string{"cd"}, true},
		{[]string{"ab", "cd"}, []string{"b", "c", "d"}, true},
		{[]string{"abcd"}, []string{"", "bc", "d", ""}, true},
		{[]string{"ab", "cd"}, []string{"ab", "cd"}, true},
		{[]string{"ab", "cd"}, []string{"xab", "cd"}, false},
		{[]string{"ab", "cd"}, []string{"bd"}, false},
		{nil, []string{"a"}, false},
		{[]string{"a"}, nil, true},
	} {
		if got := isTail(c.text, c.final); got != c.tail {
			t.Errorf("isTail(%q, %q) = %v, want %v", c.text, c.final, got, c.tail)
		}
	}
}
