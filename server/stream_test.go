package server

import (
	"context"
	"testing"
	"time"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

func chunk(text string) *acpgatev1.PromptEvent {
	return &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_AgentMessageChunk{AgentMessageChunk: &acpgatev1.MessageChunk{
		Text: text, Content: &acpgatev1.ContentBlock{Block: &acpgatev1.ContentBlock_Text{Text: text}},
	}}}
}

// fill queues maxQueuedEvents chunks, which fit without waiting.
func fill(q *eventQueue) {
	for range maxQueuedEvents {
		q.push(chunk("x"))
	}
}

// pushes pushes one more event on a goroutine and reports when it returns.
func pushes(q *eventQueue, e *acpgatev1.PromptEvent) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		q.push(e)
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
	q := newEventQueue()
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
	q := newEventQueue()
	fill(q)
	done := pushes(q, chunk("dropped"))
	q.abandon()
	if !returnsWithin(done, 5*time.Second) {
		t.Fatal("a push blocked on a full queue did not return once the turn was cancelled")
	}
	if !returnsWithin(pushes(q, chunk("also dropped")), 5*time.Second) {
		t.Fatal("a push after the cancel waited")
	}
	terminal := &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_Error{Error: &acpgatev1.HarnessError{Message: "cancelled"}}}
	q.finish(terminal)
	batch, _ := q.take(context.Background(), nil)
	if len(batch) != maxQueuedEvents+1 || batch[len(batch)-1] != terminal {
		t.Errorf("took %d events ending with %v, want the %d queued and the terminal", len(batch), batch[len(batch)-1], maxQueuedEvents)
	}
}

func TestAStreamThatHungUpReleasesTheTurnAndKeepsNothing(t *testing.T) {
	q := newEventQueue()
	fill(q)
	done := pushes(q, chunk("x"))
	q.hangUp()
	if !returnsWithin(done, 5*time.Second) {
		t.Fatal("a push blocked on a full queue did not return once the stream hung up")
	}
	q.push(chunk("y"))
	q.finish(chunk("terminal"))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if batch, ok := q.take(ctx, nil); ok {
		t.Errorf("a hung-up queue kept %d events", len(batch))
	}
}

// recorder is a Prompt stream that records what is sent.
type recorder struct {
	acpgatev1.AgentGateway_PromptServer
	ctx  context.Context
	sent []*acpgatev1.PromptEvent
}

func (r *recorder) Context() context.Context { return r.ctx }
func (r *recorder) Send(e *acpgatev1.PromptEvent) error {
	r.sent = append(r.sent, e)
	return nil
}

func TestTheWriterNumbersWhatItSendsWithoutGapsAndMergesOnlyQueuedChunksOfOneMessage(t *testing.T) {
	q := newEventQueue()
	q.push(&acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_Started{Started: &acpgatev1.TurnStarted{TurnId: "t"}}})
	for _, text := range []string{"a", "b", "c"} {
		q.push(chunk(text))
	}
	q.push(&acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_AgentThoughtChunk{AgentThoughtChunk: &acpgatev1.MessageChunk{Text: "hm"}}})
	q.push(chunk("d"))
	q.finish(&acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_Outcome{Outcome: &acpgatev1.PromptOutcome{Text: "abcd"}}})
	r := &recorder{ctx: context.Background()}
	w := &streamWriter{stream: r, coalesce: true}
	if err := w.run(q); err != nil {
		t.Fatal(err)
	}
	var texts []string
	for i, e := range r.sent {
		if e.GetSeq() != uint64(i+1) {
			t.Errorf("event %d has seq %d", i, e.GetSeq())
		}
		if c := e.GetAgentMessageChunk(); c != nil {
			texts = append(texts, c.GetText())
		}
	}
	if len(r.sent) != 5 || len(texts) != 2 || texts[0] != "abc" || texts[1] != "d" {
		t.Errorf("sent %d events with chunks %q, want started, abc, the thought, d, the outcome", len(r.sent), texts)
	}
}
