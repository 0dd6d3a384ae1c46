package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acpgate/acpgate/internal/store"
)

// testAppendAll checks store.AppendAll, which the gateway commits every
// running turn's events of a window with: in one write for a store that
// can (store.GroupAppender), else one Append per turn.
func testAppendAll(t *testing.T, open func(*testing.T) store.Store) {
	ctx := context.Background()

	t.Run("appending to several turns at once journals each one's events", func(t *testing.T) {
		st := open(t)
		for _, id := range []string{"t1", "t2", "t3"} {
			startTurn(t, st, id)
		}
		mustAppend(t, st, "t2", Events(2, 3))
		errs := store.AppendAll(ctx, st, []store.Appending{
			{TurnID: "t1", Events: Events(2, 4)},
			{TurnID: "t2", Events: Events(4, 4)},
			{TurnID: "t3", Events: Events(2, 2)},
		})
		if err := errors.Join(errs...); err != nil || len(errs) != 3 {
			t.Fatalf("AppendAll: %d results, %v", len(errs), err)
		}
		errs = store.AppendAll(ctx, st, []store.Appending{{TurnID: "t3", Events: Events(3, 5)}})
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("AppendAll of one turn: %v", err)
		}
		assertEvents(t, st, "t1", Events(1, 4))
		assertEvents(t, st, "t2", Events(1, 4))
		assertEvents(t, st, "t3", Events(1, 5))
		assertLastSeq(t, st, "t1", 4)
		assertLastSeq(t, st, "t3", 5)
	})

	t.Run("one turn's failure is its own: the others' events are journaled", func(t *testing.T) {
		st := open(t)
		for _, id := range []string{"ok1", "ended", "gap", "ok2"} {
			startTurn(t, st, id)
		}
		if err := st.End(ctx, "ended", nil, store.Event{Seq: 2, Data: []byte("ended")}, base.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		errs := store.AppendAll(ctx, st, []store.Appending{
			{TurnID: "ok1", Events: Events(2, 3)},
			{TurnID: "ended", Events: Events(3, 3)},
			{TurnID: "gap", Events: Events(3, 4)},
			{TurnID: "unknown", Events: Events(1, 1)},
			{TurnID: "ok2", Events: Events(2, 2)},
		})
		if len(errs) != 5 || errs[0] != nil || errs[4] != nil {
			t.Fatalf("AppendAll's results %v; want the first and the last nil", errs)
		}
		if !errors.Is(errs[1], store.ErrEnded) {
			t.Errorf("appending to an ended turn: %v; want ErrEnded", errs[1])
		}
		if errs[2] == nil {
			t.Error("appending events that do not follow the journal: no error")
		}
		if !errors.Is(errs[3], store.ErrNotFound) {
			t.Errorf("appending to an unknown turn: %v; want ErrNotFound", errs[3])
		}
		assertEvents(t, st, "ok1", Events(1, 3))
		assertEvents(t, st, "ok2", Events(1, 2))
		assertEvents(t, st, "gap", Events(1, 1))
		assertLastSeq(t, st, "gap", 1)
		// The failed turn's journal takes the events that follow.
		if err := errors.Join(store.AppendAll(ctx, st, []store.Appending{{TurnID: "gap", Events: Events(2, 2)}})...); err != nil {
			t.Fatalf("appending after a failure: %v", err)
		}
		assertEvents(t, st, "gap", Events(1, 2))
	})
}
