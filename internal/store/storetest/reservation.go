package storetest

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/acpgate/acpgate/internal/store"
)

// testReservation checks the seq reservation (store.Turn.Reserved): a
// gateway sends no event above it, so a turn ended without its gateway
// is numbered above it, and a seq a client saw never names another event.
func testReservation(t *testing.T, open func(*testing.T) store.Store) {
	ctx := context.Background()

	t.Run("begin reserves the started event's seq, each write of events seqs ahead of its last, and the records show it", func(t *testing.T) {
		st := open(t)
		mustBegin(t, st, NewTurn("t1", "r-t1", 1, 0))
		assertReserved(t, st, "t1", store.BeginReserved)
		mustStarted(t, st, "t1")
		assertReserved(t, st, "t1", 1+store.ReserveAhead)
		mustAppend(t, st, "t1", Events(2, 5))
		assertReserved(t, st, "t1", 5+store.ReserveAhead)
		running, err := st.Running(ctx)
		if err != nil || len(running) != 1 || running[0].Reserved != 5+store.ReserveAhead || running[0].StoppedSeq() <= store.FailedSeq(5+store.ReserveAhead) {
			t.Errorf("Running = %+v, %v; want t1 reserved to %d", running, err, 5+store.ReserveAhead)
		}
	})

	for _, size := range []int{16, 80 << 10} {
		t.Run("a terminal alone above the reservation ends the turn, skipping the seqs between", func(t *testing.T) {
			st := open(t)
			startTurn(t, st, "t1")
			mustAppend(t, st, "t1", Events(2, 5))
			rec, err := st.Get(ctx, "t1")
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			terminal := store.Event{Seq: rec.StoppedSeq(), Data: bytes.Repeat([]byte("t"), size)}
			if err := st.End(ctx, "t1", nil, terminal, base.Add(time.Minute)); err != nil {
				t.Fatalf("End with the terminal at %d, above the reservation: %v", terminal.Seq, err)
			}
			got, err := st.Get(ctx, "t1")
			if err != nil || got.Running() || got.LastSeq != terminal.Seq || !bytes.Equal(got.Terminal, terminal.Data) {
				t.Errorf("after End: running %v, last seq %d, terminal of %d bytes, %v; want ended at seq %d with %d bytes",
					got.Running(), got.LastSeq, len(got.Terminal), err, terminal.Seq, size)
			}
			assertExtent(t, st, "t1", terminal.Seq, true)
			assertEvents(t, st, "t1", append(Events(1, 5), terminal))
			// A reader past the events the store has, or at any seq up
			// to the terminal's, reads the terminal next.
			for _, after := range []uint64{4, 5, 6, 1000, terminal.Seq - 1} {
				events, err := st.Events(ctx, "t1", after, 10, 0)
				if err != nil {
					t.Fatalf("Events after %d: %v", after, err)
				}
				want := []store.Event{terminal}
				if after < 5 {
					want = append(Events(after+1, 5), terminal)
				}
				if !equalEvents(events, want) {
					t.Errorf("Events after %d = %s, want %s", after, seqList(events), seqList(want))
				}
			}
			if events, err := st.Events(ctx, "t1", terminal.Seq, 10, 0); err != nil || len(events) != 0 {
				t.Errorf("Events after the terminal = %s, %v; want none", seqList(events), err)
			}
		})
	}

	t.Run("a terminal that skips seqs within the reservation, or after events, is refused", func(t *testing.T) {
		st := open(t)
		startTurn(t, st, "t1")
		mustAppend(t, st, "t1", Events(2, 5))
		above := uint64(6 + store.ReserveAhead)
		for name, end := range map[string]struct {
			rest     []store.Event
			terminal uint64
		}{
			"alone, within the reservation":       {nil, 7},
			"alone, at the reservation":           {nil, above - 1},
			"after events, above the reservation": {Events(6, 6), above},
			"alone, at a journaled seq":           {nil, 5},
		} {
			if err := st.End(ctx, "t1", end.rest, store.Event{Seq: end.terminal, Data: []byte("ended")}, base); err == nil {
				t.Errorf("%s: End took a terminal at %d", name, end.terminal)
			}
		}
		assertLastSeq(t, st, "t1", 5)
		assertEvents(t, st, "t1", Events(1, 5))
	})
}

func assertReserved(t *testing.T, st store.Store, id string, want uint64) {
	t.Helper()
	got, err := st.Get(context.Background(), id)
	if err != nil || got.Reserved != want {
		t.Errorf("Reserved of %s = %d, %v; want %d", id, got.Reserved, err, want)
	}
}
