package clients

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/acpgate/acpgate/bench/internal/job"
	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/acp/agentproc"
)

func TestARelayTurnWaitingForAStartSlotGivesUpWhenItsCallerDoes(t *testing.T) {
	r := &relay{starts: make(chan struct{}, 1)}
	held, err := r.startSlot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := r.startSlot(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting for the one slot, held, returned %v, not the caller's deadline", err)
	}
	held()
	held() // a second release must not free a slot it does not hold
	if _, err := r.startSlot(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := r.startSlot(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a released slot was freed twice: a second start got one (%v)", err)
	}
}

// texts lists events as the chunks' texts and "started"/"outcome".
func texts(events []*acpgatev1.PromptEvent) []string {
	var out []string
	for _, ev := range events {
		switch e := ev.GetEvent().(type) {
		case *acpgatev1.PromptEvent_AgentMessageChunk:
			out = append(out, e.AgentMessageChunk.GetText())
		case *acpgatev1.PromptEvent_Started:
			out = append(out, "started")
		case *acpgatev1.PromptEvent_Outcome:
			out = append(out, "outcome")
		}
	}
	return out
}

func TestARelayQueueJoinsTheChunksThatArriveWhileTheSenderIsBusyAndKeepsTheEventsOrder(t *testing.T) {
	started := &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_Started{Started: &acpgatev1.TurnStarted{}}}
	outcome := &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_Outcome{Outcome: &acpgatev1.PromptOutcome{}}}
	for _, c := range []struct {
		coalesce    bool
		first, then []string
	}{
		{true, []string{"started", "ab"}, []string{"c", "de", "outcome"}},
		{false, []string{"started", "a", "b"}, []string{"c", "d", "e", "outcome"}},
	} {
		q := newRelayQueue(c.coalesce)
		q.push(started)
		q.chunk("a")
		q.chunk("b")
		got, more, err := q.take()
		if !more || err != nil || !slices.Equal(texts(got), c.first) {
			t.Fatalf("coalesce %v: took %q (more %v, %v), want %q", c.coalesce, texts(got), more, err, c.first)
		}
		// A chunk after a take starts a message of its own: "b" has gone.
		q.chunk("c")
		q.push(started)
		q.chunk("d")
		q.chunk("e")
		q.push(outcome)
		q.close(nil)
		got, more, err = q.take()
		want := slices.Insert(slices.Clone(c.then), 1, "started")
		if !more || err != nil || !slices.Equal(texts(got), want) {
			t.Fatalf("coalesce %v: took %q (more %v, %v), want %q", c.coalesce, texts(got), more, err, want)
		}
		if got, more, err := q.take(); more || err != nil || len(got) != 0 {
			t.Fatalf("coalesce %v: after everything was taken, take gave %q, more %v, %v", c.coalesce, texts(got), more, err)
		}
	}
}

func TestARelayQueueTakeWaitsForTheReaderAndEndsWithItsError(t *testing.T) {
	q := newRelayQueue(true)
	failed := errors.New("the agent's stdout closed")
	go func() {
		time.Sleep(20 * time.Millisecond)
		q.chunk("late")
		time.Sleep(20 * time.Millisecond)
		q.close(failed)
	}()
	got, more, err := q.take()
	if !more || err != nil || !slices.Equal(texts(got), []string{"late"}) {
		t.Fatalf("took %q (more %v, %v), want the chunk that came", texts(got), more, err)
	}
	if got, more, err := q.take(); more || !errors.Is(err, failed) || len(got) != 0 {
		t.Fatalf("after the reader failed, take gave %q, more %v, %v; want nothing more and its error", texts(got), more, err)
	}
}

func TestARelayTurnsReaderEndsWhenItsAgentIsKilledAndTheSenderSeesWhy(t *testing.T) {
	// An agent that never answers: the reader waits in its first read.
	a, err := startAgent(&containment{kind: agentproc.ContainProcessGroup}, "/bin/sleep", "60")
	if err != nil {
		t.Fatal(err)
	}
	defer a.stop()
	q := newRelayQueue(true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		q.close(converse(a, &acpgatev1.PromptRequest{Agent: job.NaiveAgent}, q, func() {}))
	}()
	time.AfterFunc(50*time.Millisecond, a.kill) // what the relay does when its caller leaves
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the reader of a killed agent had not ended 10 s later")
	}
	if got, more, err := q.take(); more || err == nil || len(got) != 0 {
		t.Fatalf("after the agent was killed, take gave %q, more %v, %v; want nothing more and the reader's error", texts(got), more, err)
	}
}
