package access

import (
	"runtime"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/turn/wire"
	"github.com/acpgate/acpgate/outcome"
)

func TestTheAuditLearnsATurnCompletedWithoutCopyingItsAnswer(t *testing.T) {
	answer := strings.Repeat("an answer ", 800_000) // 8 MB, twice in the outcome
	ev := wire.Encode(&acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_Outcome{Outcome: &acpgatev1.PromptOutcome{
		Text:         answer,
		FinalMessage: answer,
		StopReason:   "end_turn",
	}}}, 7)

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got := asEvent(wire.Encoded(ev))
	runtime.ReadMemStats(&after)

	if got.GetOutcome() == nil || got.GetSeq() != 7 {
		t.Fatalf("decoded for the audit: %v; want an outcome at seq 7", got)
	}
	if copied := after.TotalAlloc - before.TotalAlloc; copied > 1<<20 {
		t.Errorf("decoding a terminal of %d bytes for the audit allocated %d bytes; want under 1 MiB", len(ev.Data), copied)
	}
}

func TestTheAuditDecodesEveryOtherEventWhole(t *testing.T) {
	in := outcome.Interpreter{}
	for name, e := range map[string]*acpgatev1.PromptEvent{
		"a failure":   {Event: &acpgatev1.PromptEvent_Error{Error: in.JournalFailed("the disk is full", outcome.WholeText("partial"))}},
		"a started":   {Event: &acpgatev1.PromptEvent_Started{Started: &acpgatev1.TurnStarted{TurnId: "turn-1", SessionId: "session-1", Agent: "echo"}}},
		"a heartbeat": {Event: &acpgatev1.PromptEvent_Heartbeat{Heartbeat: &acpgatev1.Heartbeat{LastSeq: 3}}},
	} {
		ev := wire.Encode(e, 3)
		want := &acpgatev1.PromptEvent{}
		if err := proto.Unmarshal(ev.Data, want); err != nil {
			t.Fatal(err)
		}
		if got := asEvent(wire.Encoded(ev)); !proto.Equal(got, want) {
			t.Errorf("%s: decoded for the audit as %v; want %v", name, got, want)
		}
	}
	if got := asEvent(wire.Encoded{Data: []byte{0xff}}); got != nil {
		t.Errorf("bytes that do not decode: %v; want nil", got)
	}
}
