package server_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/server"
	"github.com/acpgate/acpgate/store"
)

// recordReads is a store that counts the reads of whole turn records,
// which carry the terminal.
type recordReads struct {
	store.Store
	gets atomic.Int64
}

func (s *recordReads) Get(ctx context.Context, turnID string) (store.Turn, error) {
	s.gets.Add(1)
	return s.Store.Get(ctx, turnID)
}

func TestAStreamBehindAnEndedTurnReadsItsPagesWithoutItsTerminal(t *testing.T) {
	st := &recordReads{Store: store.NewMemory()}
	h := startWith(t, func(o *server.Options) { o.Store = st })
	// About 10 MiB of events: a client that reads them after the turn
	// has ended reads about ten pages from the store.
	stream, err := h.client.Prompt(context.Background(), &acpgatev1.PromptRequest{Agent: "test", Text: "flood 100 50000\nstop end_turn"}, grpc.MaxCallRecvMsgSize(64<<20))
	if err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	turnID := first.GetStarted().GetTurnId()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, ended, err := st.Store.Extent(context.Background(), turnID); err == nil && ended {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the turn did not end within 30 s while its client was not reading")
		}
		time.Sleep(10 * time.Millisecond)
	}
	before := st.gets.Load()
	events := receive(t, stream, []*acpgatev1.PromptEvent{first})
	checkInvariants(t, events)
	if got := len(last(events).GetOutcome().GetText()); got != 100*50000 {
		t.Errorf("the outcome's text has %d bytes; want %d", got, 100*50000)
	}
	if n := st.gets.Load() - before; n != 0 {
		t.Errorf("the stream read the turn's record, terminal and all, %d times while it caught up; want none", n)
	}
}
