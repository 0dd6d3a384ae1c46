package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/acpgate/acpgate/internal/store"
)

// The suite's part on Begin: a new turn's record, and an idempotency key
// that starts one turn however many submit it at once.

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
