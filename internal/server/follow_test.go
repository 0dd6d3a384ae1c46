package server_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/server"
	"github.com/acpgate/acpgate/internal/store"
	"github.com/acpgate/acpgate/internal/store/memory"
	"github.com/acpgate/acpgate/internal/store/sqlite"
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

// startFlood starts a turn of 100 chunks of 50,000 bytes and returns its
// stream and its first event.
func startFlood(t *testing.T, h *harness) (acpgatev1.AgentGateway_PromptClient, *acpgatev1.PromptEvent) {
	t.Helper()
	stream, err := h.client.Prompt(context.Background(), &acpgatev1.PromptRequest{Agent: "test", Text: "flood 100 50000\nstop end_turn"}, grpc.MaxCallRecvMsgSize(64<<20))
	if err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	return stream, first
}

func TestAStreamBehindAnEndedTurnReadsItsPagesWithoutItsTerminal(t *testing.T) {
	st := &recordReads{Store: memory.New()}
	h := startWith(t, func(o *server.Options) { o.Store = st })
	// About 10 MiB of events: a client that reads them after the turn
	// has ended reads about ten pages from the store.
	stream, first := startFlood(t, h)
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

func TestWhenAClientHasATurnsTerminalTheStoreHasEveryEventItsStreamCarriedAndTheTerminal(t *testing.T) {
	// A short turn's events are all still waiting for the store when it
	// ends (they fit between two batches): the ending writes them with
	// the terminal. Both shapes of terminal: a small one (the record
	// keeps it) and one of over 64 KiB (the journal files keep it).
	for _, tc := range []struct{ name, script string }{
		{"a small terminal", "flood 100 64\nstop end_turn"},
		{"a large terminal", "flood 1000 200\nstop end_turn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := sqlite.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			h := startWith(t, func(o *server.Options) { o.Store = st })
			stream, err := h.client.Prompt(context.Background(), &acpgatev1.PromptRequest{Agent: "test", Text: tc.script})
			if err != nil {
				t.Fatal(err)
			}
			events := receive(t, stream, nil)
			checkInvariants(t, events)
			if last(events).GetOutcome() == nil {
				t.Fatalf("the turn ended with %v", last(events))
			}
			turnID := events[0].GetStarted().GetTurnId()
			ctx := context.Background()
			rec, err := st.Get(ctx, turnID)
			if err != nil || rec.Running() || rec.LastSeq != uint64(len(events)) {
				t.Fatalf("the store's record once the client has the terminal: running %v, last seq %d, %v; want ended at seq %d", rec.Running(), rec.LastSeq, err, len(events))
			}
			stored, err := st.Events(ctx, turnID, 0, len(events)+1, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(stored) != len(events) {
				t.Fatalf("the store has %d events; the stream carried %d", len(stored), len(events))
			}
			for i, e := range stored {
				got := &acpgatev1.PromptEvent{}
				if err := proto.Unmarshal(e.Flat(), got); err != nil || !proto.Equal(got, events[i]) {
					t.Fatalf("stored event %d (%v) is not the one the stream carried: %v", i+1, err, got)
				}
			}
			if terminal := (&acpgatev1.PromptEvent{}); proto.Unmarshal(rec.Terminal, terminal) != nil || !proto.Equal(terminal, last(events)) {
				t.Errorf("the record's terminal is not the one the stream carried")
			}
		})
	}
}

func TestAWatcherOfACompletedTurnNeverReadsItsRecordWithTheAnswer(t *testing.T) {
	st := &recordReads{Store: memory.New()}
	h := startWith(t, func(o *server.Options) { o.Store = st })
	// The terminal repeats the answer, 5 MB: reading the record for
	// each watcher that joins read and copied it each time.
	stream, first := startFlood(t, h)
	events := receive(t, stream, []*acpgatev1.PromptEvent{first})
	checkInvariants(t, events)
	before := st.gets.Load()
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		w, err := h.client.WatchTurn(ctx, &acpgatev1.WatchTurnRequest{TurnId: first.GetStarted().GetTurnId()}, grpc.MaxCallRecvMsgSize(64<<20))
		if err != nil {
			t.Fatal(err)
		}
		if got := receive(t, w, nil); len(got) != len(events) {
			t.Errorf("a watcher got %d events, the turn's stream %d", len(got), len(events))
		}
		cancel()
	}
	if n := st.gets.Load() - before; n != 0 {
		t.Errorf("3 watchers read the turn's record, terminal and all, %d times; want none", n)
	}
}

// A long answer's outcome is encoded from the chunks' own strings (in
// pieces, see answer.PiecesFrom) rather than from one joined copy: what a
// client receives, live or replayed, must be the outcome of the joined
// text, byte for byte.
func TestALongAnswerInPiecesArrivesAsTheJoinedTextLiveAndReplayed(t *testing.T) {
	h := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := h.client.Prompt(ctx, &acpgatev1.PromptRequest{Agent: "test", Text: "flood 40 40000\nchunk@m2 the second message\nflood 3 100\nchunk@m4 short\nflood 30 30000\nstop end_turn"}, grpc.MaxCallRecvMsgSize(64<<20))
	if err != nil {
		t.Fatal(err)
	}
	live := receive(t, stream, nil)
	checkInvariants(t, live)
	var messages []string
	id := "\x00"
	for _, e := range live {
		if c := e.GetAgentMessageChunk(); c != nil {
			if c.GetMessageId() != id || len(messages) == 0 {
				messages, id = append(messages, ""), c.GetMessageId()
			}
			messages[len(messages)-1] += c.GetText()
		}
	}
	o := last(live).GetOutcome()
	if want := strings.Join(messages, "\n\n"); len(want) < 1<<20 || o.GetText() != want || o.GetFinalMessage() != messages[len(messages)-1] {
		t.Fatalf("the outcome has %d bytes of text and %d of final message; want the %d messages joined (%d bytes) and the last (%d)",
			len(o.GetText()), len(o.GetFinalMessage()), len(messages), len(want), len(messages[len(messages)-1]))
	}
	watch, err := h.client.WatchTurn(ctx, &acpgatev1.WatchTurnRequest{TurnId: live[0].GetStarted().GetTurnId()}, grpc.MaxCallRecvMsgSize(64<<20))
	if err != nil {
		t.Fatal(err)
	}
	replayed := receive(t, watch, nil)
	if len(replayed) != len(live) {
		t.Fatalf("the replay has %d events, the live stream %d", len(replayed), len(live))
	}
	for i := range live {
		if !proto.Equal(replayed[i], live[i]) {
			t.Fatalf("event %d replayed differs from the live one", i+1)
		}
	}
}
