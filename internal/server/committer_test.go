package server_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/server"
	"github.com/acpgate/acpgate/internal/store"
	"github.com/acpgate/acpgate/internal/store/memory"
)

// countingStore is a memory store that makes AppendAll itself, counting
// the turns of each call.
type countingStore struct {
	store.Store
	mu    sync.Mutex
	calls []int // the turns of each AppendAll
}

func (c *countingStore) AppendAll(ctx context.Context, batches []store.Appending) []error {
	c.mu.Lock()
	c.calls = append(c.calls, len(batches))
	c.mu.Unlock()
	errs := make([]error, len(batches))
	for i, b := range batches {
		errs[i] = c.Append(ctx, b.TurnID, b.Events)
	}
	return errs
}

func (c *countingStore) widest() (turns, calls int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.calls {
		turns = max(turns, n)
	}
	return turns, len(c.calls)
}

// Before the committer, each turn made a write of its own every window:
// a hundred turns paced like an LLM were 2,000 writes a second, queued
// for the store's one writer.
func TestTheEventsOfTurnsRunningTogetherAreCommittedInOneWriteAWindow(t *testing.T) {
	st := &countingStore{Store: memory.New()}
	h := startWith(t, func(o *server.Options) { o.Store = st })
	const turns = 6
	// Each turn streams for about 300 ms: several windows of 50 ms.
	script := "chunk one\nsleep 100\nchunk two\nsleep 100\nchunk three\nsleep 100\nchunk four\nstop end_turn"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	streams := make([][]*acpgatev1.PromptEvent, turns)
	for i := range turns {
		wg.Go(func() {
			stream, err := h.client.Prompt(ctx, &acpgatev1.PromptRequest{Agent: "test", Text: script})
			if err != nil {
				t.Error(err)
				return
			}
			streams[i] = receive(t, stream, nil)
		})
	}
	wg.Wait()
	for _, events := range streams {
		checkInvariants(t, events)
		if o := last(events).GetOutcome(); o == nil {
			t.Fatalf("a turn ended with %v", last(events))
		}
		w, err := h.client.WatchTurn(ctx, &acpgatev1.WatchTurnRequest{TurnId: events[0].GetStarted().GetTurnId()})
		if err != nil {
			t.Fatal(err)
		}
		replay := receive(t, w, nil)
		if len(replay) != len(events) {
			t.Fatalf("the journal holds %d events of a stream of %d", len(replay), len(events))
		}
		for i := range events {
			if !proto.Equal(replay[i], events[i]) {
				t.Errorf("event %d read back as %v; the stream had %v", i+1, replay[i], events[i])
			}
		}
	}
	if widest, calls := st.widest(); widest < 2 {
		t.Errorf("the widest of %d writes of events held %d turns; want the turns running together in one", calls, widest)
	}
}
