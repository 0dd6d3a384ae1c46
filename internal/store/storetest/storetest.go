// Package storetest is the one test suite every store.Store passes, so that
// the gateway can rely on the interface's contract and not on whichever
// implementation it happened to be tested with.
package storetest

import (
	"fmt"
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
	t.Run("append to several turns", func(t *testing.T) { testAppendAll(t, s) })
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
