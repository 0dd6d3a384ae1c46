package server

import (
	"runtime"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/outcome"
)

func TestTheAuditLearnsATurnCompletedWithoutCopyingItsAnswer(t *testing.T) {
	answer := strings.Repeat("an answer ", 800_000) // 8 MB, twice in the outcome
	ev := encodeEvent(terminal(outcome.Result{Outcome: &acpgatev1.PromptOutcome{
		Text:         answer,
		FinalMessage: answer,
		StopReason:   "end_turn",
	}}), 7)

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got := asEvent(encodedEvent(ev))
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
		"a failure":   terminal(outcome.Result{Error: in.JournalFailed("the disk is full", outcome.WholeText("partial"))}),
		"a started":   started("turn-1", "session-1", "echo", false),
		"a heartbeat": {Event: &acpgatev1.PromptEvent_Heartbeat{Heartbeat: &acpgatev1.Heartbeat{LastSeq: 3}}},
	} {
		ev := encodeEvent(e, 3)
		want := &acpgatev1.PromptEvent{}
		if err := proto.Unmarshal(ev.Data, want); err != nil {
			t.Fatal(err)
		}
		if got := asEvent(encodedEvent(ev)); !proto.Equal(got, want) {
			t.Errorf("%s: decoded for the audit as %v; want %v", name, got, want)
		}
	}
	if got := asEvent(encodedEvent{Data: []byte{0xff}}); got != nil {
		t.Errorf("bytes that do not decode: %v; want nil", got)
	}
}
