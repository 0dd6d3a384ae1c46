package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acpgate/acpgate/internal/store"
)

// The suite's part on session records.

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
