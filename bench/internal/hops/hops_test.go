package hops

import (
	"bytes"
	"runtime/trace"
	"strings"
	"testing"
)

//go:noinline
func handOff(ch chan<- int, v int) { ch <- v }

func TestHopsCountsEachWaitUnderTheCallThatWokeTheGoroutine(t *testing.T) {
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Skipf("tracing is in use: %v", err)
	}
	const n = 50
	ch := make(chan int)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range n {
			<-ch
		}
	}()
	for i := range n {
		handOff(ch, i)
	}
	<-done
	trace.Stop()

	h, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var site string
	for s := range h.waits {
		if strings.HasPrefix(s, "hops.handOff") {
			site = s
		}
	}
	if site == "" {
		t.Fatalf("no wait is attributed to handOff; sites: %v", h.Table(20))
	}
	// A send wakes the receiver only when it finds it parked, so there is
	// at most one wait per send, and at least one.
	if got := len(h.waits[site]); got < 1 || got > n {
		t.Errorf("%d waits under %q, want between 1 and %d", got, site, n)
	}
	t.Logf("%d waits under %q", len(h.waits[site]), site)
	if !strings.Contains(h.Table(20), "| "+site+" | ") {
		t.Errorf("the table has no row for %q:\n%s", site, h.Table(20))
	}
}
