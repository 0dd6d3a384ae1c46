package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/acpgate/acpgate/internal/store"
)

// The suite's part on the reads of many turns (List), retention
// (Running, DeleteEnded), and the copies a store hands out.

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
