package admission

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// waitFor is how long a test waits for something that should happen at
// once; a failure takes that long, a pass does not.
const waitFor = 10 * time.Second

func TestAtMostTheLimitOfStartUpsRunAndTheNextBeginsWhenOneEnds(t *testing.T) {
	s := NewStarts(2)
	ctx := context.Background()
	r1, w1, err1 := s.Wait(ctx, waitFor)
	r2, w2, err2 := s.Wait(ctx, waitFor)
	if err1 != nil || err2 != nil || w1 != 0 || w2 != 0 {
		t.Fatalf("the first two start-ups: errors %v, %v, waited %s, %s; want both at once", err1, err2, w1, w2)
	}
	third := make(chan time.Duration, 1)
	go func() {
		r3, waited, err := s.Wait(ctx, waitFor)
		if err != nil {
			t.Errorf("the third start-up: %v", err)
		} else {
			r3()
		}
		third <- waited
	}()
	select {
	case <-third:
		t.Fatal("a third start-up began while two were under way")
	case <-time.After(50 * time.Millisecond):
	}
	r1()
	r1() // a second release gives nothing back
	select {
	case waited := <-third:
		if waited < 50*time.Millisecond {
			t.Errorf("the third start-up says it waited %s, less than it did", waited)
		}
	case <-time.After(waitFor):
		t.Fatal("the third start-up did not begin once one had ended")
	}
	// r1 was released twice: if both counted, two more would begin now.
	r4, _, err := s.Wait(ctx, waitFor)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Wait(ctx, 20*time.Millisecond); !errors.Is(err, ErrStartWaitExpired) {
		t.Errorf("with two start-ups under way a third got %v; a double release gave a slot back twice", err)
	}
	r2()
	r4()
}

// full is a bound of one start-up with that one under way until the test
// ends.
func full(t *testing.T) *Starts {
	t.Helper()
	s := NewStarts(1)
	release, _, err := s.Wait(context.Background(), waitFor)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	return s
}

func TestAStartUpThatWaitsOutItsBoundFailsAsTheGatewayBeingBusy(t *testing.T) {
	s := full(t)
	const bound = 30 * time.Millisecond
	_, waited, err := s.Wait(context.Background(), bound)
	if !errors.Is(err, ErrStartWaitExpired) {
		t.Fatalf("got %v, want ErrStartWaitExpired", err)
	}
	if waited < bound {
		t.Errorf("it gave up after %s, before its bound of %s", waited, bound)
	}
	for _, want := range []string{"limits.max_starting_agents allows (1) were under way", "30ms"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q does not say %q", err, want)
		}
	}
}

func TestAStartUpWhoseCallerLeavesStopsWaitingWithTheCallersError(t *testing.T) {
	s := full(t)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	_, _, err := s.Wait(ctx, waitFor)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrStartWaitExpired) {
		t.Errorf("got %v, want the caller's cancellation and not the gateway's busyness", err)
	}
}

func TestWithoutABoundStartUpsNeverWait(t *testing.T) {
	s := NewStarts(0)
	if s != nil {
		t.Fatalf("NewStarts(0) = %v, want nil (no bound)", s)
	}
	for range 100 {
		release, waited, err := s.Wait(context.Background(), time.Nanosecond)
		if err != nil || waited != 0 {
			t.Fatalf("got waited %s, err %v; want no wait", waited, err)
		}
		defer release()
	}
}

func TestAWarmStartUpTakesAFreeSlotOrNoneAndNeverQueuesAheadOfACallersStartUp(t *testing.T) {
	s := NewStarts(1)
	release, ok := s.TryTake()
	if !ok {
		t.Fatal("a free slot was not taken")
	}
	if _, ok := s.TryTake(); ok {
		t.Fatal("a slot was taken while the only one was held")
	}
	// A caller's start-up waits; a slot given back goes to it, not to a
	// warm start-up trying at that moment.
	waited := make(chan error, 1)
	var callers func()
	go func() {
		r, _, err := s.Wait(context.Background(), waitFor)
		callers = r
		waited <- err
	}()
	// TryAcquire(0) fails only while a start-up waits in the queue.
	for deadline := time.Now().Add(waitFor); s.sem.TryAcquire(0); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the caller's start-up never began to wait")
		}
	}
	release()
	if _, ok := s.TryTake(); ok {
		t.Error("a warm start-up took the slot given back while a caller's start-up waited for it")
	}
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	callers()
	if r, ok := s.TryTake(); !ok {
		t.Error("no slot was free once every start-up had ended")
	} else {
		r()
	}
	if r, ok := NewStarts(0).TryTake(); !ok {
		t.Error("without a bound a warm start-up was refused")
	} else {
		r()
	}
}
