package server_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/server"
	"github.com/acpgate/acpgate/internal/store"
	"github.com/acpgate/acpgate/internal/store/memory"
)

// refuseStart is a store that refuses every turn's started event, as a
// full disk would.
type refuseStart struct{ store.Store }

func (refuseStart) Started(context.Context, string, string, store.Event) error {
	return errors.New("the disk is full")
}

// Before the started event was kept in memory on a refusal, its stream
// waited forever for the event the store did not have.
func TestATurnWhoseStartTheStoreRefusesEndsWithARetryableJournalFailureAfterItsStartedEvent(t *testing.T) {
	h := startWith(t, func(o *server.Options) { o.Store = refuseStart{memory.New()} })
	// An agent that answers and then waits for a cancel: the refusal
	// must end the turn, not wait for the agent.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := h.client.Prompt(ctx, &acpgatev1.PromptRequest{Agent: "test", Text: "chunk hello\nhang"})
	if err != nil {
		t.Fatal(err)
	}
	events := receive(t, stream, nil)
	checkInvariants(t, events)
	if events[0].GetStarted() == nil {
		t.Fatalf("the first event is %v, want the started event", events[0])
	}
	e := last(events).GetError()
	if e.GetGateway() == nil || !e.GetRetryable() || !strings.Contains(e.GetMessage(), "journal") || !strings.Contains(e.GetGateway().GetDetail(), "the disk is full") {
		t.Fatalf("the turn ended with %v; want a retryable gateway error about the journal, naming the store's refusal", last(events))
	}
}

// refuseAppends is a store that refuses every write of a running turn's
// events, as a disk that fills mid-turn would.
type refuseAppends struct{ store.Store }

func (refuseAppends) Append(context.Context, string, []store.Event) error {
	return errors.New("the disk is full")
}

// Events that come after the journal failed, and its ending, once made
// the committer read the ended journal's events as if they still
// followed the committed ones, and the gateway panicked.
func TestATurnWhoseEventsTheStoreRefusesEndsWithARetryableJournalFailureAndTheGatewayGoesOn(t *testing.T) {
	h := startWith(t, func(o *server.Options) { o.Store = refuseAppends{memory.New()} })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 2 {
		stream, err := h.client.Prompt(ctx, &acpgatev1.PromptRequest{Agent: "test", Text: "ignore_cancel\nchunk one\nsleep 80\nchunk two\nsleep 80\nchunk three\nstop end_turn"})
		if err != nil {
			t.Fatal(err)
		}
		events := receive(t, stream, nil)
		e := last(events).GetError()
		if e.GetGateway() == nil || !e.GetRetryable() || !strings.Contains(e.GetGateway().GetDetail(), "the disk is full") {
			t.Fatalf("the turn ended with %v; want a retryable gateway error naming the store's refusal", last(events))
		}
		// The committer's next window comes after the turn's end.
		time.Sleep(100 * time.Millisecond)
	}
}
