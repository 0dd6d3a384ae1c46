package storetest

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/acpgate/acpgate/internal/store"
)

// The suite's steps and checks, shared by its parts.

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
