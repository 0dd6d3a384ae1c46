package storetest

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/acpgate/acpgate/internal/store"
)

// The suite's part on a turn's journal: Started, Append and End, and the
// events read back in pages.

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
