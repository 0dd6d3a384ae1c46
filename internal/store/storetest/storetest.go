// Package storetest is the one test suite every store.Store passes, so that
// the gateway can rely on the interface's contract and not on whichever
// implementation it happened to be tested with.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acpgate/acpgate/internal/store"
)

// base is a fixed instant so that failures print the same times every run.
var base = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// Run runs the suite; open returns a new, empty store, which Run closes.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	s := func(t *testing.T) store.Store {
		t.Helper()
		st := open(t)
		t.Cleanup(func() {
			if err := st.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return st
	}
	t.Run("begin", func(t *testing.T) { testBegin(t, s) })
	t.Run("journal", func(t *testing.T) { testJournal(t, s) })
	t.Run("list", func(t *testing.T) { testList(t, s) })
	t.Run("running and retention", func(t *testing.T) { testRetention(t, s) })
	t.Run("copies", func(t *testing.T) { testCopies(t, s) })
	t.Run("sessions", func(t *testing.T) { testSessions(t, s) })
	t.Run("reservation", func(t *testing.T) { testReservation(t, s) })
	t.Run("outbox", func(t *testing.T) { testOutbox(t, s) })
}

// NewSession is a session record as the gateway would keep it: created at
// base plus n seconds.
func NewSession(id string, n int) store.Session {
	return store.Session{
		ID:           id,
		Agent:        "echo",
		ACPSessionID: "acp-" + id,
		Cwd:          "project/" + id,
		Owner:        "owner-of-" + id,
		CreatedAt:    base.Add(time.Duration(n) * time.Second),
	}
}

// NewTurn is a running turn as the gateway would begin it: started at
// base plus n seconds.
func NewTurn(id, requestID string, attempt uint32, n int) store.Turn {
	return store.Turn{
		ID:         id,
		RequestID:  requestID,
		Attempt:    attempt,
		Agent:      "echo",
		Target:     "agent:echo",
		PromptHash: []byte("hash-of-" + requestID),
		Owner:      "owner-of-" + id,
		StartedAt:  base.Add(time.Duration(n) * time.Second),
	}
}

// Events returns the events seq from..to, each with distinct data.
func Events(from, to uint64) []store.Event {
	var out []store.Event
	for seq := from; seq <= to; seq++ {
		out = append(out, store.Event{Seq: seq, Data: fmt.Appendf(nil, "event %d", seq)})
	}
	return out
}

func testBegin(t *testing.T, open func(*testing.T) store.Store) {
	ctx := context.Background()

	t.Run("begin records a new running turn", func(t *testing.T) {
		st := open(t)
		want := NewTurn("t1", "r1", 1, 0)
		if _, created := mustBegin(t, st, want); !created {
			t.Fatal("created = false on an empty store")
		}
		got, err := st.Get(ctx, "t1")
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		assertTurn(t, got, want)
		if !got.Running() || got.LastSeq != 0 || got.Terminal != nil {
			t.Errorf("new turn: running %v, last seq %d, terminal %q; want running, 0, nil", got.Running(), got.LastSeq, got.Terminal)
		}
	})

	t.Run("a resubmission at the same or an earlier attempt returns the latest attempt and records nothing", func(t *testing.T) {
		st := open(t)
		mustBegin(t, st, NewTurn("t1", "r1", 1, 0))
		second := NewTurn("t2", "r1", 2, 1)
		mustBegin(t, st, second)
		for _, attempt := range []uint32{1, 2} {
			existing, created := mustBegin(t, st, NewTurn(fmt.Sprintf("dup%d", attempt), "r1", attempt, 2))
			if created {
				t.Fatalf("attempt %d: created a turn for a request id whose attempt 2 exists", attempt)
			}
			assertTurn(t, existing, second)
			if _, err := st.Get(ctx, fmt.Sprintf("dup%d", attempt)); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("attempt %d: Get of the refused turn: %v, want ErrNotFound", attempt, err)
			}
		}
		if got := listIDs(t, st, store.Filter{}); !slices.Equal(got, []string{"t2", "t1"}) {
			t.Errorf("List = %v, want [t2 t1]", got)
		}
	})

	t.Run("latest finds the newest attempt of a request id and nothing for an unknown one", func(t *testing.T) {
		st := open(t)
		mustBegin(t, st, NewTurn("t1", "r1", 1, 0))
		second := NewTurn("t2", "r1", 2, 1)
		mustBegin(t, st, second)
		got, err := st.Latest(ctx, "r1")
		if err != nil {
			t.Fatalf("Latest: %v", err)
		}
		assertTurn(t, got, second)
		for _, unknown := range []string{"r2", ""} {
			if _, err := st.Latest(ctx, unknown); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Latest(%q): %v, want ErrNotFound", unknown, err)
			}
		}
	})

	t.Run("a resubmission at the next attempt starts that attempt", func(t *testing.T) {
		st := open(t)
		mustBegin(t, st, NewTurn("t1", "r1", 1, 0))
		if _, created := mustBegin(t, st, NewTurn("t2", "r1", 2, 1)); !created {
			t.Fatal("attempt 2 after attempt 1: created = false")
		}
		existing, created := mustBegin(t, st, NewTurn("t3", "r1", 1, 2))
		if created || existing.ID != "t2" || existing.Attempt != 2 {
			t.Errorf("a late attempt 1: got %q attempt %d created %v, want t2 attempt 2 not created", existing.ID, existing.Attempt, created)
		}
	})

	t.Run("turns without a request id are never taken for one another", func(t *testing.T) {
		st := open(t)
		for _, id := range []string{"t1", "t2"} {
			if _, created := mustBegin(t, st, NewTurn(id, "", 1, 0)); !created {
				t.Errorf("%s without a request id: created = false", id)
			}
		}
	})

	t.Run("beginning a turn id that exists already is an error", func(t *testing.T) {
		st := open(t)
		mustBegin(t, st, NewTurn("t1", "r1", 1, 0))
		if _, _, err := st.Begin(ctx, NewTurn("t1", "r2", 1, 1)); err == nil {
			t.Fatal("Begin of an existing turn id: no error")
		}
		if got := listIDs(t, st, store.Filter{}); !slices.Equal(got, []string{"t1"}) {
			t.Errorf("List = %v, want [t1]", got)
		}
	})

	t.Run("a store acting for no replica records a turn's replica as none whatever the caller gave", func(t *testing.T) {
		st := open(t)
		tr := NewTurn("t1", "r1", 1, 0)
		tr.Replica = "someone"
		mustBegin(t, st, tr)
		if got, err := st.Get(ctx, "t1"); err != nil || got.Replica != "" {
			t.Errorf("Get: replica %q, %v; want \"\" (Replica is the store's to set, and only in a cluster)", got.Replica, err)
		}
	})

	t.Run("twenty concurrent submissions of one request id start one turn", func(t *testing.T) {
		st := open(t)
		winner := OneBeginWins(t, 20, func(int) store.Store { return st })
		if got := listIDs(t, st, store.Filter{}); !slices.Equal(got, []string{winner}) {
			t.Errorf("List = %v, want [%s]", got, winner)
		}
	})
}

// OneBeginWins begins n turns t0..tn-1 of one request id at once, turn i
// through storeOf(i), and checks that exactly one was created and that
// every other Begin returned it; it returns the created turn's id.
func OneBeginWins(t *testing.T, n int, storeOf func(i int) store.Store) string {
	t.Helper()
	ctx := context.Background()
	type result struct {
		existing store.Turn
		created  bool
		err      error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			e, c, err := storeOf(i).Begin(ctx, NewTurn(fmt.Sprintf("t%d", i), "r1", 1, i))
			results[i] = result{e, c, err}
		})
	}
	close(start)
	wg.Wait()
	winner := ""
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("Begin %d: %v", i, r.err)
		}
		if r.created {
			if winner != "" {
				t.Fatalf("both t%d and %s were created", i, winner)
			}
			winner = fmt.Sprintf("t%d", i)
		}
	}
	if winner == "" {
		t.Fatal("no Begin created a turn")
	}
	for i, r := range results {
		if !r.created && r.existing.ID != winner {
			t.Errorf("Begin %d returned %q, want the created %q", i, r.existing.ID, winner)
		}
	}
	return winner
}

func testJournal(t *testing.T, open func(*testing.T) store.Store) {
	ctx := context.Background()

	t.Run("started sets the session and journals seq 1", func(t *testing.T) {
		st := open(t)
		startTurn(t, st, "t1")
		got, err := st.Get(ctx, "t1")
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if got.SessionID != "s1" || got.LastSeq != 1 {
			t.Errorf("after Started: session %q, last seq %d; want s1, 1", got.SessionID, got.LastSeq)
		}
		assertEvents(t, st, "t1", Events(1, 1))
	})

	t.Run("appends journal events in order", func(t *testing.T) {
		st := open(t)
		startTurn(t, st, "t1")
		mustAppend(t, st, "t1", Events(2, 4))
		mustAppend(t, st, "t1", Events(5, 5))
		mustAppend(t, st, "t1", nil)
		assertEvents(t, st, "t1", Events(1, 5))
		assertLastSeq(t, st, "t1", 5)
	})

	t.Run("an append whose seqs do not follow is an error and journals nothing", func(t *testing.T) {
		st := open(t)
		startTurn(t, st, "t1")
		for name, batch := range map[string][]store.Event{
			"a gap before the batch":     Events(3, 4),
			"a repeat of a journaled":    Events(1, 2),
			"a gap inside the batch":     append(Events(2, 3), Events(5, 5)...),
			"a repeat inside the batch":  append(Events(2, 3), Events(3, 3)...),
			"a batch not starting right": {{Seq: 0, Data: []byte("x")}},
		} {
			if err := st.Append(ctx, "t1", batch); err == nil {
				t.Errorf("%s: no error", name)
			}
		}
		assertEvents(t, st, "t1", Events(1, 1))
		assertLastSeq(t, st, "t1", 1)
	})

	t.Run("end journals the terminal and records when the turn ended", func(t *testing.T) {
		st := open(t)
		startTurn(t, st, "t1")
		mustAppend(t, st, "t1", Events(2, 3))
		terminal := store.Event{Seq: 4, Data: []byte("ended: ok")}
		endedAt := base.Add(time.Minute + time.Nanosecond)
		if err := st.End(ctx, "t1", nil, terminal, endedAt); err != nil {
			t.Fatalf("End: %v", err)
		}
		got, err := st.Get(ctx, "t1")
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if got.Running() || !got.EndedAt.Equal(endedAt) || !bytes.Equal(got.Terminal, terminal.Data) || got.LastSeq != 4 {
			t.Errorf("after End: running %v, ended at %v, terminal %q, last seq %d; want ended at %v, %q, 4",
				got.Running(), got.EndedAt, got.Terminal, got.LastSeq, endedAt, terminal.Data)
		}
		assertEvents(t, st, "t1", append(Events(1, 3), terminal))
		assertExtent(t, st, "t1", 4, true)
	})

	t.Run("a large terminal is kept whole and read back by every method", func(t *testing.T) {
		st := open(t)
		tr := NewTurn("t1", "r1", 1, 0)
		mustBegin(t, st, tr)
		if err := st.Started(ctx, "t1", "s1", Events(1, 1)[0]); err != nil {
			t.Fatalf("Started: %v", err)
		}
		mustAppend(t, st, "t1", Events(2, 3))
		terminal := store.Event{Seq: 4, Data: bytes.Repeat([]byte("outcome "), 40_000)} // 320 KB
		if err := st.End(ctx, "t1", nil, terminal, base.Add(time.Minute)); err != nil {
			t.Fatalf("End: %v", err)
		}
		got, err := st.Get(ctx, "t1")
		if err != nil || !bytes.Equal(got.Terminal, terminal.Data) || got.LastSeq != 4 {
			t.Errorf("Get: terminal of %d bytes, last seq %d, %v; want %d bytes, 4", len(got.Terminal), got.LastSeq, err, len(terminal.Data))
		}
		if got, err := st.Latest(ctx, "r1"); err != nil || !bytes.Equal(got.Terminal, terminal.Data) {
			t.Errorf("Latest: terminal of %d bytes, %v", len(got.Terminal), err)
		}
		if list, err := st.List(ctx, store.Filter{}, 10, nil); err != nil || len(list) != 1 || !bytes.Equal(list[0].Terminal, terminal.Data) {
			t.Errorf("List: %d turns, %v", len(list), err)
		}
		if existing, created, err := st.Begin(ctx, NewTurn("t2", "r1", 1, 1)); err != nil || created || !bytes.Equal(existing.Terminal, terminal.Data) {
			t.Errorf("Begin of the same request: created %v, terminal of %d bytes, %v", created, len(existing.Terminal), err)
		}
		assertEvents(t, st, "t1", append(Events(1, 3), terminal))
		if events, err := st.Events(ctx, "t1", 3, 10, 100); err != nil || len(events) != 1 || !bytes.Equal(events[0].Data, terminal.Data) {
			t.Errorf("Events after 3 with a small byte bound: %d events, %v; want the terminal alone", len(events), err)
		}
		assertExtent(t, st, "t1", 4, true)
	})

	t.Run("a terminal in pieces is kept as their concatenation", func(t *testing.T) {
		for _, size := range []int{10, 40_000} { // held by the record, and too large for it
			st := open(t)
			startTurn(t, st, "t1")
			answer := bytes.Repeat([]byte("answer "), size)
			terminal := store.Event{Seq: 2, Data: []byte("head "), More: [][]byte{answer, {}, []byte(" mid "), answer, []byte(" tail")}}
			want := store.Event{Seq: 2, Data: slices.Concat(terminal.Data, answer, []byte(" mid "), answer, []byte(" tail"))}
			if err := st.End(ctx, "t1", nil, terminal, base); err != nil {
				t.Fatalf("End: %v", err)
			}
			answer[0] = 'X' // the caller's memory, after End: the store must not share it
			if got, err := st.Get(ctx, "t1"); err != nil || !bytes.Equal(got.Terminal, want.Data) {
				t.Errorf("%d: Get: terminal of %d bytes, %v; want %d bytes", size, len(got.Terminal), err, len(want.Data))
			}
			assertEvents(t, st, "t1", append(Events(1, 1), want))
		}
	})

	t.Run("events with a repeated part are read back whole, however the repeat falls across pieces", func(t *testing.T) {
		st := open(t)
		startTurn(t, st, "t1")
		text := bytes.Repeat([]byte("0123456789abcdef"), 64) // 1 KiB
		whole := func(pieces ...[]byte) []byte { return slices.Concat(pieces...) }
		// Each: the event given, whose encoding repeats text (or a tail of
		// it) at Echo.At.
		events := []store.Event{
			// In one piece, as a chunk's event is.
			{Data: whole([]byte("hd"), text, []byte("mid"), text, []byte("tl")), Echo: store.Echo{From: 2, At: 2 + len(text) + 3, Len: len(text)}},
			// In pieces, the repeat a piece of its own, as an outcome's is.
			{Data: []byte("hd"), More: [][]byte{text, []byte("mid"), text[512:], []byte("tl")}, Echo: store.Echo{From: 2 + 512, At: 2 + len(text) + 3, Len: 512}},
			// The repeat across three pieces, and at the very end.
			{Data: whole([]byte("h"), text[:100]), More: [][]byte{text[100:], text[:10], text[10:1000], text[1000:]}, Echo: store.Echo{From: 1, At: 1 + len(text), Len: len(text)}},
			// Too short to be worth it, and an Echo that does not fit the
			// encoding: both kept as they are.
			{Data: whole([]byte("ab"), text[:8], text[:8]), Echo: store.Echo{From: 2, At: 10, Len: 8}},
			{Data: whole([]byte("ab"), text), Echo: store.Echo{From: 0, At: 100, Len: 2000}},
			// Bytes that start with a zero, which a store of opaque bytes
			// must keep as they are too.
			{Data: []byte{0, 1, 2, 3}},
			{Data: whole([]byte{0}, text, text), Echo: store.Echo{From: 1, At: 1 + len(text), Len: len(text)}},
		}
		var want []store.Event
		for i := range events {
			events[i].Seq = uint64(2 + i)
			want = append(want, store.Event{Seq: events[i].Seq, Data: events[i].Bytes()})
		}
		mustAppend(t, st, "t1", events)
		terminal := store.Event{Seq: uint64(2 + len(events)), Data: []byte("end"), More: [][]byte{bytes.Repeat(text, 80), bytes.Repeat(text, 80)}}
		terminal.Echo = store.Echo{From: 3, At: 3 + 80*len(text), Len: 80 * len(text)} // 80 KiB, held by the files
		if err := st.End(ctx, "t1", nil, terminal, base); err != nil {
			t.Fatalf("End: %v", err)
		}
		want = append(want, store.Event{Seq: terminal.Seq, Data: terminal.Bytes()})
		assertEvents(t, st, "t1", append(Events(1, 1), want...))
		if got, err := st.Get(ctx, "t1"); err != nil || !bytes.Equal(got.Terminal, terminal.Bytes()) {
			t.Errorf("Get: terminal of %d bytes, %v; want %d bytes", len(got.Terminal), err, terminal.Len())
		}
	})

	t.Run("an end whose seq does not follow is an error and leaves the turn running", func(t *testing.T) {
		st := open(t)
		startTurn(t, st, "t1")
		if err := st.End(ctx, "t1", nil, store.Event{Seq: 3, Data: []byte("ended")}, base); err == nil {
			t.Fatal("End with a gap: no error")
		}
		if got, _ := st.Get(ctx, "t1"); !got.Running() || got.LastSeq != 1 || got.Terminal != nil {
			t.Errorf("after a refused End: running %v, last seq %d, terminal %q", got.Running(), got.LastSeq, got.Terminal)
		}
	})

	t.Run("an end journals the events not yet journaled before its terminal", func(t *testing.T) {
		// Both places a terminal is kept: a small one beside the turn's
		// record, a large one after the events it follows.
		for _, size := range []int{5, 200 << 10} {
			st := open(t)
			startTurn(t, st, "t1")
			mustAppend(t, st, "t1", Events(2, 3))
			terminal := store.Event{Seq: 504, Data: bytes.Repeat([]byte("e"), size)}
			if err := st.End(ctx, "t1", Events(4, 503), terminal, base); err != nil {
				t.Fatalf("End with 500 events and a terminal of %d bytes: %v", size, err)
			}
			assertEvents(t, st, "t1", append(Events(1, 503), terminal))
			got, err := st.Get(ctx, "t1")
			if err != nil || got.Running() || got.LastSeq != 504 || !bytes.Equal(got.Terminal, terminal.Data) {
				t.Errorf("Get after End (terminal of %d bytes): running %v, last seq %d, terminal of %d bytes, %v", size, got.Running(), got.LastSeq, len(got.Terminal), err)
			}
		}
	})

	t.Run("an end whose events do not follow journals none of them and leaves the turn running", func(t *testing.T) {
		st := open(t)
		startTurn(t, st, "t1")
		rest := append(Events(2, 5), Events(7, 7)...)
		if err := st.End(ctx, "t1", rest, store.Event{Seq: 8, Data: []byte("ended")}, base); err == nil {
			t.Fatal("End with a gap among its events: no error")
		}
		if got, _ := st.Get(ctx, "t1"); !got.Running() || got.LastSeq != 1 || got.Terminal != nil {
			t.Errorf("after a refused End: running %v, last seq %d, terminal %q", got.Running(), got.LastSeq, got.Terminal)
		}
		assertEvents(t, st, "t1", Events(1, 1))
		// The turn still takes the events, and its end.
		if err := st.End(ctx, "t1", Events(2, 7), store.Event{Seq: 8, Data: []byte("ended")}, base); err != nil {
			t.Fatalf("End after a refused one: %v", err)
		}
		assertEvents(t, st, "t1", append(Events(1, 7), store.Event{Seq: 8, Data: []byte("ended")}))
	})

	t.Run("an ended turn's journal takes no more events", func(t *testing.T) {
		st := open(t)
		startTurn(t, st, "t1")
		if err := st.End(ctx, "t1", nil, store.Event{Seq: 2, Data: []byte("ended")}, base); err != nil {
			t.Fatalf("End: %v", err)
		}
		if err := st.Append(ctx, "t1", Events(3, 3)); !errors.Is(err, store.ErrEnded) {
			t.Errorf("Append after End: %v, want ErrEnded", err)
		}
		if err := st.Append(ctx, "t1", nil); !errors.Is(err, store.ErrEnded) {
			t.Errorf("an empty Append after End: %v, want ErrEnded", err)
		}
		if err := st.End(ctx, "t1", nil, store.Event{Seq: 3, Data: []byte("again")}, base); !errors.Is(err, store.ErrEnded) {
			t.Errorf("End after End: %v, want ErrEnded", err)
		}
		if err := st.Started(ctx, "t1", "s2", store.Event{Seq: 3}); !errors.Is(err, store.ErrEnded) {
			t.Errorf("Started after End: %v, want ErrEnded", err)
		}
		assertEvents(t, st, "t1", append(Events(1, 1), store.Event{Seq: 2, Data: []byte("ended")}))
	})

	t.Run("every method on an unknown turn reports ErrNotFound", func(t *testing.T) {
		st := open(t)
		mustBegin(t, st, NewTurn("t1", "r1", 1, 0))
		checks := map[string]error{
			"Started":         st.Started(ctx, "nope", "s1", Events(1, 1)[0]),
			"Append":          st.Append(ctx, "nope", Events(1, 1)),
			"an empty Append": st.Append(ctx, "nope", nil),
			"End":             st.End(ctx, "nope", nil, Events(1, 1)[0], base),
		}
		_, checks["Get"] = st.Get(ctx, "nope")
		_, _, checks["Extent"] = st.Extent(ctx, "nope")
		_, checks["Owner"] = st.Owner(ctx, "nope")
		_, checks["Events"] = st.Events(ctx, "nope", 0, 10, 0)
		for method, err := range checks {
			if !errors.Is(err, store.ErrNotFound) {
				t.Errorf("%s: %v, want ErrNotFound", method, err)
			}
		}
	})

	t.Run("events after a seq come in order up to the limit", func(t *testing.T) {
		st := open(t)
		startTurn(t, st, "t1")
		mustAppend(t, st, "t1", Events(2, 10))
		for _, c := range []struct {
			after    uint64
			limit    int
			from, to uint64 // want Events(from, to); from > to for none
		}{
			{0, 3, 1, 3},
			{3, 3, 4, 6},
			{8, 100, 9, 10},
			{0, 100, 1, 10},
			{10, 5, 1, 0},
			{11, 5, 1, 0},
			{1 << 40, 5, 1, 0},
		} {
			got, err := st.Events(ctx, "t1", c.after, c.limit, 0)
			if err != nil {
				t.Errorf("Events(after %d, limit %d): %v", c.after, c.limit, err)
				continue
			}
			if want := Events(c.from, c.to); !equalEvents(got, want) {
				t.Errorf("Events(after %d, limit %d) = %s, want %s", c.after, c.limit, seqs(got), seqs(want))
			}
		}
	})

	t.Run("a byte bound cuts a page between events, never below one event", func(t *testing.T) {
		st := open(t)
		startTurn(t, st, "t1")
		// Events 2..5 of 100 bytes each, then a 300-byte terminal.
		var batch []store.Event
		for seq := uint64(2); seq <= 5; seq++ {
			batch = append(batch, store.Event{Seq: seq, Data: bytes.Repeat([]byte{byte('a' + seq)}, 100)})
		}
		mustAppend(t, st, "t1", batch)
		terminal := store.Event{Seq: 6, Data: bytes.Repeat([]byte{'z'}, 300)}
		if err := st.End(ctx, "t1", nil, terminal, base); err != nil {
			t.Fatalf("End: %v", err)
		}
		for _, c := range []struct {
			after    uint64
			maxBytes int
			want     string
		}{
			{1, 250, "2,3"},     // 200 bytes fit, a third would pass 250
			{1, 200, "2,3"},     // exactly at the bound
			{1, 50, "2"},        // one event, however large
			{4, 350, "5"},       // 100 + the terminal's 300 would pass 350
			{4, 400, "5,6"},     // and here they fit
			{5, 10, "6"},        // the terminal alone, past the bound
			{1, 0, "2,3,4,5,6"}, // no bound
			{0, 1 << 20, "1,2,3,4,5,6"},
		} {
			got, err := st.Events(ctx, "t1", c.after, 100, c.maxBytes)
			if err != nil {
				t.Errorf("Events(after %d, max bytes %d): %v", c.after, c.maxBytes, err)
				continue
			}
			if seqList(got) != c.want {
				t.Errorf("Events(after %d, max bytes %d) = %s, want %s", c.after, c.maxBytes, seqList(got), c.want)
			}
		}
	})

	t.Run("a turn with an empty journal has no events", func(t *testing.T) {
		st := open(t)
		mustBegin(t, st, NewTurn("t1", "r1", 1, 0))
		assertEvents(t, st, "t1", nil)
	})
}

func testList(t *testing.T, open func(*testing.T) store.Store) {
	ctx := context.Background()

	// populate begins 30 turns over three sessions and two agents, with
	// several started at the same instant, so that the order depends on
	// the ids for them.
	populate := func(t *testing.T, st store.Store) []store.Turn {
		var all []store.Turn
		for i := range 30 {
			tr := NewTurn(fmt.Sprintf("t%02d", (i*7)%30), fmt.Sprintf("r%d", i), 1, i/4)
			tr.Agent = []string{"echo", "cat"}[i%2]
			tr.Owner = []string{"", "alice", "bob", "alice", "carol"}[i%5]
			mustBegin(t, st, tr)
			tr.SessionID = fmt.Sprintf("s%d", i%3)
			if err := st.Started(ctx, tr.ID, tr.SessionID, Events(1, 1)[0]); err != nil {
				t.Fatalf("Started: %v", err)
			}
			all = append(all, tr)
		}
		slices.SortFunc(all, func(a, b store.Turn) int {
			return -store.ComparePositions(store.PositionOf(a), store.PositionOf(b))
		})
		return all
	}
	filtered := func(all []store.Turn, f store.Filter) []string {
		var ids []string
		for _, tr := range all {
			if (f.SessionID == "" || tr.SessionID == f.SessionID) && (f.Agent == "" || tr.Agent == f.Agent) && (f.Owner == nil || tr.Owner == *f.Owner) {
				ids = append(ids, tr.ID)
			}
		}
		return ids
	}
	alice, anonymous := "alice", ""
	filters := []store.Filter{{}, {SessionID: "s1"}, {Agent: "cat"}, {SessionID: "s2", Agent: "echo"}, {SessionID: "none"},
		{Owner: &alice}, {Owner: &anonymous}, {Owner: &alice, Agent: "echo"}}

	t.Run("list returns the matching turns newest first", func(t *testing.T) {
		st := open(t)
		all := populate(t, st)
		for _, f := range filters {
			got, err := st.List(ctx, f, 1000, nil)
			if err != nil {
				t.Fatalf("List(%+v): %v", f, err)
			}
			if ids, want := turnIDs(got), filtered(all, f); !slices.Equal(ids, want) {
				t.Errorf("List(%+v) = %v, want %v", f, ids, want)
			}
		}
	})

	t.Run("paging with the last turn's position visits every turn once, ties included", func(t *testing.T) {
		st := open(t)
		all := populate(t, st)
		for _, f := range filters {
			for _, size := range []int{1, 3, 4, 7} {
				var ids []string
				var from *store.Position
				for page := 0; ; page++ {
					if page > 100 {
						t.Fatalf("List(%+v) in pages of %d does not end", f, size)
					}
					got, err := st.List(ctx, f, size, from)
					if err != nil {
						t.Fatalf("List: %v", err)
					}
					if len(got) > size {
						t.Fatalf("a page of %d turns with limit %d", len(got), size)
					}
					ids = append(ids, turnIDs(got)...)
					if len(got) < size {
						break
					}
					p := store.PositionOf(got[len(got)-1])
					from = &p
				}
				if want := filtered(all, f); !slices.Equal(ids, want) {
					t.Errorf("List(%+v) in pages of %d = %v, want %v", f, size, ids, want)
				}
			}
		}
	})

	t.Run("list returns the records in full", func(t *testing.T) {
		st := open(t)
		want := NewTurn("t1", "r1", 3, 0)
		want.SessionID = "s1"
		mustBegin(t, st, want)
		mustStarted(t, st, "t1")
		got, err := st.List(ctx, store.Filter{}, 10, nil)
		if err != nil || len(got) != 1 {
			t.Fatalf("List = %v, %v; want one turn", got, err)
		}
		assertTurn(t, got[0], want)
	})
}

func testRetention(t *testing.T, open func(*testing.T) store.Store) {
	ctx := context.Background()
	cutoff := base.Add(time.Hour)

	// endedTurns begins turns that ended an hour before the cutoff, a
	// nanosecond before it, at it, after it, and one still running.
	endedTurns := func(t *testing.T, st store.Store) {
		for i, endedAt := range []time.Time{cutoff.Add(-time.Hour), cutoff.Add(-time.Nanosecond), cutoff, cutoff.Add(time.Hour), {}} {
			id := fmt.Sprintf("t%d", i)
			mustBegin(t, st, NewTurn(id, "r"+id, 1, i))
			mustStarted(t, st, id)
			mustAppend(t, st, id, Events(2, 5))
			if !endedAt.IsZero() {
				if err := st.End(ctx, id, nil, store.Event{Seq: 6, Data: []byte("ended")}, endedAt); err != nil {
					t.Fatalf("End: %v", err)
				}
			}
		}
	}

	t.Run("running returns exactly the turns that have not ended", func(t *testing.T) {
		st := open(t)
		if got, err := st.Running(ctx); err != nil || len(got) != 0 {
			t.Fatalf("Running on an empty store = %v, %v", got, err)
		}
		endedTurns(t, st)
		mustBegin(t, st, NewTurn("t9", "", 1, 9))
		got, err := st.Running(ctx)
		if err != nil {
			t.Fatalf("Running: %v", err)
		}
		ids := turnIDs(got)
		slices.Sort(ids)
		if !slices.Equal(ids, []string{"t4", "t9"}) {
			t.Errorf("Running = %v, want [t4 t9]", ids)
		}
	})

	t.Run("delete ended removes only the turns that ended before the cutoff, journals and all", func(t *testing.T) {
		st := open(t)
		endedTurns(t, st)
		n, err := st.DeleteEnded(ctx, cutoff)
		if err != nil || n != 2 {
			t.Fatalf("DeleteEnded = %d, %v; want 2", n, err)
		}
		for _, id := range []string{"t0", "t1"} {
			if _, err := st.Get(ctx, id); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Get(%s) after its deletion: %v, want ErrNotFound", id, err)
			}
			if _, err := st.Events(ctx, id, 0, 10, 0); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Events(%s) after its deletion: %v, want ErrNotFound", id, err)
			}
		}
		for _, id := range []string{"t2", "t3", "t4"} {
			if got, err := st.Events(ctx, id, 0, 10, 0); err != nil || len(got) < 5 {
				t.Errorf("Events(%s), which was kept: %d events, %v", id, len(got), err)
			}
		}
		if got := listIDs(t, st, store.Filter{}); !slices.Equal(got, []string{"t4", "t3", "t2"}) {
			t.Errorf("List after DeleteEnded = %v, want [t4 t3 t2]", got)
		}
		if n, err := st.DeleteEnded(ctx, cutoff); err != nil || n != 0 {
			t.Errorf("a second DeleteEnded = %d, %v; want 0", n, err)
		}
	})

	t.Run("deleting a request id's turns frees it for a new first attempt", func(t *testing.T) {
		st := open(t)
		for i, id := range []string{"t1", "t2"} {
			mustBegin(t, st, NewTurn(id, "r1", uint32(i+1), i))
			mustStarted(t, st, id)
			if err := st.End(ctx, id, nil, store.Event{Seq: 2, Data: []byte("ended")}, base.Add(time.Duration(i)*time.Second)); err != nil {
				t.Fatalf("End: %v", err)
			}
		}
		if n, err := st.DeleteEnded(ctx, cutoff); err != nil || n != 2 {
			t.Fatalf("DeleteEnded = %d, %v; want 2", n, err)
		}
		if existing, created := mustBegin(t, st, NewTurn("t3", "r1", 1, 5)); !created {
			t.Errorf("attempt 1 of a deleted request id returned %q, want a new turn", existing.ID)
		}
	})
}

func testCopies(t *testing.T, open func(*testing.T) store.Store) {
	ctx := context.Background()
	t.Run("the store keeps copies of what it is given and hands out copies", func(t *testing.T) {
		st := open(t)
		tr := NewTurn("t1", "r1", 1, 0)
		want := NewTurn("t1", "r1", 1, 0)
		mustBegin(t, st, tr)
		tr.PromptHash[0] ^= 0xff
		events := Events(1, 3)
		if err := st.Started(ctx, "t1", "", events[0]); err != nil {
			t.Fatalf("Started: %v", err)
		}
		mustAppend(t, st, "t1", events[1:])
		terminal := store.Event{Seq: 4, Data: []byte("ended")}
		if err := st.End(ctx, "t1", nil, terminal, base); err != nil {
			t.Fatalf("End: %v", err)
		}
		for _, e := range events {
			e.Data[0] ^= 0xff
		}
		terminal.Data[0] ^= 0xff

		scribble := func() {
			got, _ := st.Get(ctx, "t1")
			got.PromptHash[0] ^= 0xff
			got.Terminal[0] ^= 0xff
			listed, _ := st.List(ctx, store.Filter{}, 10, nil)
			listed[0].PromptHash[0] ^= 0xff
			listed[0].Terminal[0] ^= 0xff
			journal, _ := st.Events(ctx, "t1", 0, 10, 0)
			for _, e := range journal {
				e.Data[0] ^= 0xff
			}
		}
		scribble()

		got, err := st.Get(ctx, "t1")
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		assertTurn(t, got, want)
		if string(got.Terminal) != "ended" {
			t.Errorf("Terminal = %q, want %q", got.Terminal, "ended")
		}
		assertEvents(t, st, "t1", append(Events(1, 3), store.Event{Seq: 4, Data: []byte("ended")}))
	})
}

func testSessions(t *testing.T, open func(*testing.T) store.Store) {
	ctx := context.Background()

	t.Run("an empty store has no session records", func(t *testing.T) {
		st := open(t)
		if got := mustSessions(t, st); len(got) != 0 {
			t.Fatalf("Sessions = %v, want none", got)
		}
	})

	t.Run("recorded sessions are listed oldest first with every field", func(t *testing.T) {
		st := open(t)
		newer := NewSession("s2", 5)
		newer.Mode = "architect"
		newer.ConfigOptions = map[string]string{"model": "large", "effort": "high"}
		newer.SuspendedAt = base.Add(time.Hour)
		older := NewSession("s1", 1)
		sameTime := NewSession("s0", 5) // created with s2: ordered by id
		for _, s := range []store.Session{newer, older, sameTime} {
			mustPutSession(t, st, s)
		}
		AssertSessions(t, mustSessions(t, st), []store.Session{older, sameTime, newer})
	})

	t.Run("one session record is found by its id, and an unknown id is not found", func(t *testing.T) {
		st := open(t)
		want := NewSession("s1", 1)
		want.Mode = "ask"
		want.ConfigOptions = map[string]string{"model": "small"}
		want.SuspendedAt = base.Add(time.Hour)
		mustPutSession(t, st, want)
		mustPutSession(t, st, NewSession("s2", 2))
		got, err := st.Session(ctx, "s1")
		if err != nil {
			t.Fatalf("Session(s1): %v", err)
		}
		AssertSessions(t, []store.Session{got}, []store.Session{want})
		if _, err := st.Session(ctx, "s3"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Session of an unknown id: %v, want ErrNotFound", err)
		}
	})

	t.Run("putting a session again replaces its record", func(t *testing.T) {
		st := open(t)
		s := NewSession("s1", 0)
		mustPutSession(t, st, s)
		s.Mode = "ask"
		s.ConfigOptions = map[string]string{"model": "small"}
		s.SuspendedAt = base.Add(time.Minute)
		mustPutSession(t, st, s)
		AssertSessions(t, mustSessions(t, st), []store.Session{s})
		// Re-opened: no longer suspended.
		s.SuspendedAt = time.Time{}
		mustPutSession(t, st, s)
		AssertSessions(t, mustSessions(t, st), []store.Session{s})
	})

	t.Run("a store acting for no replica records a session's replica as none whatever the caller gave", func(t *testing.T) {
		st := open(t)
		s := NewSession("s1", 0)
		s.Replica = "someone"
		mustPutSession(t, st, s)
		AssertSessions(t, mustSessions(t, st), []store.Session{NewSession("s1", 0)})
	})

	t.Run("a deleted session is gone and deleting an unknown one is no error", func(t *testing.T) {
		st := open(t)
		keep, gone := NewSession("keep", 0), NewSession("gone", 1)
		mustPutSession(t, st, keep)
		mustPutSession(t, st, gone)
		for _, id := range []string{"gone", "gone", "never"} {
			if err := st.DeleteSession(ctx, id); err != nil {
				t.Fatalf("DeleteSession(%q): %v", id, err)
			}
		}
		AssertSessions(t, mustSessions(t, st), []store.Session{keep})
	})

	t.Run("session records are independent of turns and their retention", func(t *testing.T) {
		st := open(t)
		s := NewSession("s1", 0)
		mustPutSession(t, st, s)
		startTurn(t, st, "t1")
		if err := st.End(ctx, "t1", nil, store.Event{Seq: 2, Data: []byte("end")}, base); err != nil {
			t.Fatalf("End: %v", err)
		}
		if _, err := st.DeleteEnded(ctx, base.Add(time.Hour)); err != nil {
			t.Fatalf("DeleteEnded: %v", err)
		}
		AssertSessions(t, mustSessions(t, st), []store.Session{s})
	})

	t.Run("the store keeps a copy of a session's config options", func(t *testing.T) {
		st := open(t)
		s := NewSession("s1", 0)
		s.ConfigOptions = map[string]string{"model": "large"}
		mustPutSession(t, st, s)
		s.ConfigOptions["model"] = "scribbled"
		mustSessions(t, st)[0].ConfigOptions["model"] = "scribbled too"
		want := NewSession("s1", 0)
		want.ConfigOptions = map[string]string{"model": "large"}
		AssertSessions(t, mustSessions(t, st), []store.Session{want})
	})
}

func mustPutSession(t *testing.T, st store.Store, s store.Session) {
	t.Helper()
	if err := st.PutSession(context.Background(), s); err != nil {
		t.Fatalf("PutSession(%s): %v", s.ID, err)
	}
}

func mustSessions(t *testing.T, st store.Store) []store.Session {
	t.Helper()
	got, err := st.Sessions(context.Background())
	if err != nil {
		t.Fatalf("Sessions: %v", err)
	}
	return got
}

// AssertSessions compares records field by field, Replica included; times
// as instants, and an empty ConfigOptions as nil.
func AssertSessions(t *testing.T, got, want []store.Session) {
	t.Helper()
	norm := func(s store.Session) string {
		suspended := "no"
		if !s.SuspendedAt.IsZero() {
			suspended = fmt.Sprint(s.SuspendedAt.UnixNano())
		}
		return fmt.Sprintf("%s agent=%s acp=%s cwd=%s owner=%s created=%d mode=%q options=%v suspended=%s replica=%q",
			s.ID, s.Agent, s.ACPSessionID, s.Cwd, s.Owner, s.CreatedAt.UnixNano(), s.Mode, s.ConfigOptions, suspended, s.Replica)
	}
	var g, w []string
	for _, s := range got {
		g = append(g, norm(s))
	}
	for _, s := range want {
		w = append(w, norm(s))
	}
	if !slices.Equal(g, w) {
		t.Fatalf("Sessions =\n  %s\nwant\n  %s", strings.Join(g, "\n  "), strings.Join(w, "\n  "))
	}
}

func mustBegin(t *testing.T, st store.Store, tr store.Turn) (store.Turn, bool) {
	t.Helper()
	existing, created, err := st.Begin(context.Background(), tr)
	if err != nil {
		t.Fatalf("Begin(%s): %v", tr.ID, err)
	}
	return existing, created
}

// startTurn begins turn id and journals its start.
func startTurn(t *testing.T, st store.Store, id string) {
	t.Helper()
	mustBegin(t, st, NewTurn(id, "r-"+id, 1, 0))
	mustStarted(t, st, id)
}

func assertLastSeq(t *testing.T, st store.Store, id string, want uint64) {
	t.Helper()
	got, err := st.Get(context.Background(), id)
	if err != nil || got.LastSeq != want {
		t.Errorf("LastSeq of %s = %d, %v; want %d", id, got.LastSeq, err, want)
	}
	assertExtent(t, st, id, want, !got.Running())
	if owner, err := st.Owner(context.Background(), id); err != nil || owner != got.Owner {
		t.Errorf("Owner(%s) = %q, %v; want %q, as Get says", id, owner, err, got.Owner)
	}
}

// assertExtent checks that Extent agrees with what the test expects, which
// Get shows too.
func assertExtent(t *testing.T, st store.Store, id string, lastSeq uint64, ended bool) {
	t.Helper()
	gotSeq, gotEnded, err := st.Extent(context.Background(), id)
	if err != nil || gotSeq != lastSeq || gotEnded != ended {
		t.Errorf("Extent(%s) = %d, ended %v, %v; want %d, ended %v", id, gotSeq, gotEnded, err, lastSeq, ended)
	}
}

func mustStarted(t *testing.T, st store.Store, id string) {
	t.Helper()
	if err := st.Started(context.Background(), id, "s1", Events(1, 1)[0]); err != nil {
		t.Fatalf("Started(%s): %v", id, err)
	}
}

func mustAppend(t *testing.T, st store.Store, id string, events []store.Event) {
	t.Helper()
	if err := st.Append(context.Background(), id, events); err != nil {
		t.Fatalf("Append(%s, %s): %v", id, seqs(events), err)
	}
}

func listIDs(t *testing.T, st store.Store, f store.Filter) []string {
	t.Helper()
	got, err := st.List(context.Background(), f, 1000, nil)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	return turnIDs(got)
}

func turnIDs(turns []store.Turn) []string {
	ids := []string{}
	for _, tr := range turns {
		ids = append(ids, tr.ID)
	}
	return ids
}

// assertTurn compares the fields Begin and Started set, Replica included
// (NewTurn's is "", as a store outside a cluster records it); times by instant,
// since a store need not keep a time's location or monotonic reading.
func assertTurn(t *testing.T, got, want store.Turn) {
	t.Helper()
	if got.ID != want.ID || got.RequestID != want.RequestID || got.Attempt != want.Attempt ||
		got.Agent != want.Agent || got.Target != want.Target || got.SessionID != want.SessionID || got.Owner != want.Owner || got.Replica != want.Replica ||
		got.NotifyURL != want.NotifyURL || !bytes.Equal(got.PromptHash, want.PromptHash) || !got.StartedAt.Equal(want.StartedAt) {
		t.Errorf("turn = %+v\nwant %+v", got, want)
	}
}

func assertEvents(t *testing.T, st store.Store, id string, want []store.Event) {
	t.Helper()
	got, err := st.Events(context.Background(), id, 0, 1000, 0)
	if err != nil {
		t.Fatalf("Events(%s): %v", id, err)
	}
	if !equalEvents(got, want) {
		t.Errorf("journal of %s = %s, want %s", id, seqs(got), seqs(want))
	}
}

func equalEvents(a, b []store.Event) bool {
	return slices.EqualFunc(a, b, func(x, y store.Event) bool {
		return x.Seq == y.Seq && bytes.Equal(x.Flat(), y.Flat())
	})
}

func seqs(events []store.Event) string {
	var b bytes.Buffer
	for _, e := range events {
		fmt.Fprintf(&b, "%d:%q ", e.Seq, e.Flat())
	}
	return "[" + string(bytes.TrimSpace(b.Bytes())) + "]"
}

// seqList is events' seqs, comma-separated.
func seqList(events []store.Event) string {
	var b []string
	for _, e := range events {
		b = append(b, fmt.Sprint(e.Seq))
	}
	return strings.Join(b, ",")
}
