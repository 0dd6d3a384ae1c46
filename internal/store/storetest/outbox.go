package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/acpgate/acpgate/internal/store"
)

// hook is the notification target of the outbox's turns.
const hook = "https://hooks.example.com/turns"

// endNotified begins turn id with NotifyURL url, journals its start and
// ends it at endedAt.
func endNotified(t *testing.T, st store.Store, id, url string, endedAt time.Time) {
	t.Helper()
	tr := NewTurn(id, "r-"+id, 1, 0)
	tr.NotifyURL = url
	mustBegin(t, st, tr)
	mustStarted(t, st, id)
	if err := st.End(context.Background(), id, nil, store.Event{Seq: 2, Data: []byte("ended: ok")}, endedAt); err != nil {
		t.Fatalf("End(%s): %v", id, err)
	}
}

func claim(t *testing.T, st store.Store, claimer string, now time.Time, limit int) []store.Notification {
	t.Helper()
	got, err := st.ClaimNotifications(context.Background(), claimer, now, time.Minute, limit)
	if err != nil {
		t.Fatalf("ClaimNotifications(%s, %v): %v", claimer, now, err)
	}
	return got
}

func assertOldest(t *testing.T, st store.Store, want time.Time) {
	t.Helper()
	got, err := st.OldestNotification(context.Background())
	if err != nil || !got.Equal(want) {
		t.Errorf("OldestNotification = %v, %v; want %v", got, err, want)
	}
}

func testOutbox(t *testing.T, open func(*testing.T) store.Store) {
	ctx := context.Background()
	ended := base.Add(time.Hour)

	t.Run("ending a turn with a target writes its notification, and only then", func(t *testing.T) {
		st := open(t)
		tr := NewTurn("t1", "r-t1", 1, 0)
		tr.NotifyURL = hook
		mustBegin(t, st, tr)
		mustStarted(t, st, "t1")
		got, err := st.Get(ctx, "t1")
		if err != nil || got.NotifyURL != hook {
			t.Fatalf("Get: NotifyURL %q, %v; want %q", got.NotifyURL, err, hook)
		}
		assertOldest(t, st, time.Time{})
		if n := claim(t, st, "a", ended.Add(time.Hour), 10); len(n) != 0 {
			t.Fatalf("a running turn's notification was claimed: %+v", n)
		}
		// An End the store refuses (its seq skips within the
		// reservation) ends nothing and announces nothing.
		if err := st.End(ctx, "t1", nil, store.Event{Seq: 5, Data: []byte("x")}, ended); err == nil {
			t.Fatal("End with a seq that skips within the reservation was taken")
		}
		assertOldest(t, st, time.Time{})
		if err := st.End(ctx, "t1", nil, store.Event{Seq: 2, Data: []byte("ended: ok")}, ended); err != nil {
			t.Fatalf("End: %v", err)
		}
		endNotified(t, st, "t2", "", ended.Add(-time.Minute))
		assertOldest(t, st, ended)
		n := claim(t, st, "a", ended, 10)
		want := store.Notification{TurnID: "t1", URL: hook, CreatedAt: ended, Attempts: 1}
		if len(n) != 1 || n[0].TurnID != want.TurnID || n[0].URL != want.URL || !n[0].CreatedAt.Equal(want.CreatedAt) || n[0].Attempts != 1 {
			t.Fatalf("claimed %+v; want [%+v]", n, want)
		}
	})

	t.Run("a claim holds a notification from others until its lease has passed", func(t *testing.T) {
		st := open(t)
		endNotified(t, st, "t1", hook, ended)
		if n := claim(t, st, "a", ended, 10); len(n) != 1 {
			t.Fatalf("a claimed %d notifications, want 1", len(n))
		}
		if n := claim(t, st, "b", ended.Add(59*time.Second), 10); len(n) != 0 {
			t.Fatalf("b claimed a notification a's claim holds: %+v", n)
		}
		n := claim(t, st, "b", ended.Add(time.Minute), 10)
		if len(n) != 1 || n[0].Attempts != 2 {
			t.Fatalf("after a's lease, b claimed %+v; want t1 at its second attempt", n)
		}
		// a's claim has passed: finishing it leaves b's.
		if err := st.FinishNotification(ctx, "t1", "a"); err != nil {
			t.Fatal(err)
		}
		assertOldest(t, st, ended)
		if err := st.FinishNotification(ctx, "t1", "b"); err != nil {
			t.Fatal(err)
		}
		assertOldest(t, st, time.Time{})
		if n := claim(t, st, "c", ended.Add(time.Hour), 10); len(n) != 0 {
			t.Fatalf("a finished notification was claimed again: %+v", n)
		}
	})

	t.Run("a claimer's own claim, left by an earlier run, is claimable again at once", func(t *testing.T) {
		st := open(t)
		endNotified(t, st, "t1", hook, ended)
		claim(t, st, "a", ended, 10)
		if n := claim(t, st, "a", ended.Add(time.Second), 10); len(n) != 1 || n[0].Attempts != 2 {
			t.Fatalf("a claimed %+v again; want t1 at its second attempt", n)
		}
	})

	t.Run("a retried notification is due again at its time and is anyone's then", func(t *testing.T) {
		st := open(t)
		endNotified(t, st, "t1", hook, ended)
		claim(t, st, "a", ended, 10)
		next := ended.Add(10 * time.Second)
		if err := st.RetryNotification(ctx, "t1", "a", next); err != nil {
			t.Fatal(err)
		}
		if n := claim(t, st, "a", next.Add(-time.Nanosecond), 10); len(n) != 0 {
			t.Fatalf("claimed before it was due: %+v", n)
		}
		if n := claim(t, st, "b", next, 10); len(n) != 1 || n[0].Attempts != 2 {
			t.Fatalf("b claimed %+v when it was due; want t1 at its second attempt", n)
		}
		// Another's retry of it does not release b's claim.
		if err := st.RetryNotification(ctx, "t1", "a", next); err != nil {
			t.Fatal(err)
		}
		if n := claim(t, st, "c", next, 10); len(n) != 0 {
			t.Fatalf("c claimed what b holds: %+v", n)
		}
	})

	t.Run("claims come oldest first up to the limit", func(t *testing.T) {
		st := open(t)
		for i := range 5 {
			endNotified(t, st, fmt.Sprintf("t%d", i), hook, ended.Add(time.Duration(4-i)*time.Second))
		}
		assertOldest(t, st, ended)
		n := claim(t, st, "a", ended.Add(time.Minute), 3)
		if len(n) != 3 || n[0].TurnID != "t4" || n[1].TurnID != "t3" || n[2].TurnID != "t2" {
			t.Fatalf("claimed %+v; want t4, t3, t2", n)
		}
	})

	t.Run("two claimers at once deliver each notification once", func(t *testing.T) {
		st := open(t)
		const turns = 40
		for i := range turns {
			endNotified(t, st, fmt.Sprintf("t%02d", i), hook, ended)
		}
		var mu sync.Mutex
		seen := map[string]string{}
		var wg sync.WaitGroup
		for _, claimer := range []string{"a", "b"} {
			wg.Go(func() {
				for range turns {
					n, err := st.ClaimNotifications(ctx, claimer, ended, time.Minute, 3)
					if err != nil {
						t.Errorf("%s: %v", claimer, err)
						return
					}
					mu.Lock()
					for _, x := range n {
						if other, dup := seen[x.TurnID]; dup {
							t.Errorf("%s claimed %s, which %s holds", claimer, x.TurnID, other)
						}
						seen[x.TurnID] = claimer
					}
					mu.Unlock()
					// As a deliverer does before it claims again: its own
					// claims are claimable by it.
					for _, x := range n {
						if err := st.FinishNotification(ctx, x.TurnID, claimer); err != nil {
							t.Errorf("%s: %v", claimer, err)
						}
					}
				}
			})
		}
		wg.Wait()
		if len(seen) != turns {
			t.Errorf("%d of %d notifications were claimed", len(seen), turns)
		}
	})
}
