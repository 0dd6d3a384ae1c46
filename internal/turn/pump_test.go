package turn

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/acpgate/acpgate/internal/turn/wire"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

func chunk(text string) *acpgatev1.PromptEvent {
	return &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_AgentMessageChunk{AgentMessageChunk: &acpgatev1.MessageChunk{Text: text}}}
}

// fill queues maxQueuedEvents chunks, which fit without waiting.
func fill(q *Queue) {
	for range maxQueuedEvents {
		q.Push(chunk("x"))
	}
}

// pushes pushes one more event on a goroutine and reports when it returns.
func pushes(q *Queue, e *acpgatev1.PromptEvent) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		q.Push(e)
		close(done)
	}()
	return done
}

func returnsWithin(c <-chan struct{}, d time.Duration) bool {
	select {
	case <-c:
		return true
	case <-time.After(d):
		return false
	}
}

func TestAFullQueueHoldsTheTurnBackUntilTheStreamTakesItsEvents(t *testing.T) {
	q := NewQueue()
	fill(q)
	done := pushes(q, chunk("one more"))
	if returnsWithin(done, 50*time.Millisecond) {
		t.Fatal("a push into a full queue returned before anything was taken")
	}
	batch, ok := q.take(context.Background(), nil)
	if !ok || len(batch) != maxQueuedEvents {
		t.Fatalf("took %d events, %v", len(batch), ok)
	}
	if !returnsWithin(done, 5*time.Second) {
		t.Fatal("the push did not resume once the queue had room")
	}
	if batch, _ := q.take(context.Background(), nil); len(batch) != 1 || batch[0].GetAgentMessageChunk().GetText() != "one more" {
		t.Errorf("then took %v", batch)
	}
}

func TestACancelledTurnNeverWaitsForItsStreamAndItsTerminalStillArrives(t *testing.T) {
	q := NewQueue()
	fill(q)
	done := pushes(q, chunk("dropped"))
	q.Abandon()
	if !returnsWithin(done, 5*time.Second) {
		t.Fatal("a push blocked on a full queue did not return once the turn was cancelled")
	}
	if !returnsWithin(pushes(q, chunk("also dropped")), 5*time.Second) {
		t.Fatal("a push after the cancel waited")
	}
	terminal := &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_Error{Error: &acpgatev1.HarnessError{Message: "cancelled"}}}
	q.Finish(terminal, wire.Pieces{})
	batch, _ := q.take(context.Background(), nil)
	if len(batch) != maxQueuedEvents+1 || batch[len(batch)-1] != terminal {
		t.Errorf("took %d events ending with %v, want the %d queued and the terminal", len(batch), batch[len(batch)-1], maxQueuedEvents)
	}
}

func TestTheMergerJoinsOnlyQueuedTextChunksOfOneMessage(t *testing.T) {
	batch := []*acpgatev1.PromptEvent{chunk("a"), chunk("b"), chunk("c"),
		{Event: &acpgatev1.PromptEvent_AgentThoughtChunk{AgentThoughtChunk: &acpgatev1.MessageChunk{Text: "hm"}}},
		chunk("d")}
	var texts []string
	merged := mergeAll(batch)
	for _, e := range merged {
		if c := e.GetAgentMessageChunk(); c != nil {
			texts = append(texts, c.GetText())
		}
	}
	if n := len(merged); n != 3 || len(texts) != 2 || texts[0] != "abc" || texts[1] != "d" {
		t.Errorf("%d events with chunks %q, want abc, the thought, d", n, texts)
	}
}

func TestAChunkWithTheAgentsMetaIsNeverMergedSoItsMetaIsKept(t *testing.T) {
	meta, err := structpb.NewStruct(map[string]any{"example.com/source": "cache"})
	if err != nil {
		t.Fatal(err)
	}
	tagged := chunk("b")
	tagged.Meta = meta
	var got []string
	for _, e := range mergeAll([]*acpgatev1.PromptEvent{chunk("a"), tagged, chunk("c"), chunk("d")}) {
		got = append(got, e.GetAgentMessageChunk().GetText()+":"+e.GetMeta().GetFields()["example.com/source"].GetStringValue())
	}
	if want := []string{"a:", "b:cache", "cd:"}; !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
}

// mergeAll is batch as the pump journals it with Coalesce set: every
// mergeable chunk merged with the mergeable ones queued after it.
func mergeAll(batch []*acpgatev1.PromptEvent) []*acpgatev1.PromptEvent {
	var m merger
	var out []*acpgatev1.PromptEvent
	for i := 0; i < len(batch); i++ {
		e := batch[i]
		if mergeable(e) {
			e, i = m.merge(batch, i)
		}
		out = append(out, e)
	}
	return out
}
