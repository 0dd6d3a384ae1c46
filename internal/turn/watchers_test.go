package turn

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/acpgate/acpgate/internal/store"
)

func TestAReaderWaitsForRoomInTheReadBudgetAndTakesItOnceGivenBack(t *testing.T) {
	b := NewReadBudget(100, 10*time.Second)
	if ok, err := b.take(context.Background(), 60); !ok || err != nil {
		t.Fatalf("take 60 of 100: %v, %v", ok, err)
	}
	took := make(chan bool, 1)
	go func() {
		ok, _ := b.take(context.Background(), 50)
		took <- ok
	}()
	select {
	case <-took:
		t.Fatal("50 more were taken while only 40 were free")
	case <-time.After(100 * time.Millisecond):
	}
	b.give(60)
	select {
	case ok := <-took:
		if !ok {
			t.Fatal("the waiting reader was refused once there was room")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting reader did not take the room given back")
	}
	if n := b.inUse(); n != 50 {
		t.Errorf("%d bytes in use, want 50", n)
	}
}

func TestAReaderIsRefusedOnceItHasWaitedTheReadBudgetsWait(t *testing.T) {
	const wait = 200 * time.Millisecond
	b := NewReadBudget(100, wait)
	if ok, _ := b.take(context.Background(), 100); !ok {
		t.Fatal("the whole budget was refused")
	}
	began := time.Now()
	ok, err := b.take(context.Background(), 1)
	if ok || err != nil {
		t.Fatalf("a full budget gave room: %v, %v", ok, err)
	}
	if took := time.Since(began); took < wait || took > wait+5*time.Second {
		t.Errorf("refused after %s, want about %s", took, wait)
	}
	if n := b.inUse(); n != 100 {
		t.Errorf("a refusal took bytes: %d in use, want 100", n)
	}
}

func TestAReaderStopsWaitingForTheReadBudgetWhenItsStreamEnds(t *testing.T) {
	b := NewReadBudget(100, time.Minute)
	b.take(context.Background(), 100)
	ctx, cancel := context.WithCancelCause(context.Background())
	gone := errors.New("the client went away")
	time.AfterFunc(50*time.Millisecond, func() { cancel(gone) })
	began := time.Now()
	if ok, err := b.take(ctx, 1); ok || !errors.Is(err, gone) {
		t.Fatalf("take on an ended stream: %v, %v; want its cause", ok, err)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("the wait ended %s after the stream, not at once", took)
	}
}

// wantRetryLater checks that err is RESOURCE_EXHAUSTED with a RetryInfo.
func wantRetryLater(t *testing.T, what string, err error) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("%s: %v, want RESOURCE_EXHAUSTED", what, err)
	}
	for _, d := range st.Details() {
		if _, ok := d.(*errdetails.RetryInfo); ok {
			return
		}
	}
	t.Fatalf("%s: %v carries no RetryInfo", what, err)
}

func TestWatchersAreBoundedPerTurnAndPerPrincipalAndAdmittedAgainOnceOneLeaves(t *testing.T) {
	w := NewWatchLimits(2, 3)
	alice1, err := w.Enter("t1", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Enter("t1", "alice"); err != nil {
		t.Fatal(err)
	}
	_, err = w.Enter("t1", "bob")
	wantRetryLater(t, "a third watcher of t1", err)
	if _, err := w.Enter("t2", "alice"); err != nil {
		t.Fatalf("alice's third watcher, of another turn: %v", err)
	}
	_, err = w.Enter("t3", "alice")
	wantRetryLater(t, "alice's fourth watcher", err)
	if _, err := w.Enter("t3", "bob"); err != nil {
		t.Fatalf("bob is refused for alice's watchers: %v", err)
	}
	alice1()
	alice1() // a second call counts once
	if _, err := w.Enter("t1", "bob"); err != nil {
		t.Fatalf("a watcher of t1 once one left: %v", err)
	}
	if _, err := w.Enter("t3", "alice"); err != nil {
		t.Fatalf("alice once one of hers left: %v", err)
	}
	_, err = w.Enter("t1", "carol")
	wantRetryLater(t, "t1 full again", err)
}

func TestAPageHoldsItsOwnCopyOfAtMostFollowBytes(t *testing.T) {
	big := make([]byte, followBytes/2+1)
	batch := []store.Event{{Seq: 1, Data: big}, {Seq: 2, Data: big}, {Seq: 3, Data: big}}
	page := holdPage(nil, batch)
	if len(page) != 1 || page[0].Seq != 1 {
		t.Fatalf("a page of %d events from %d of over half followBytes each", len(page), len(batch))
	}
	batch[0].Seq = 9
	if page[0].Seq != 1 {
		t.Error("the page shares the batch's array")
	}
	if page = holdPage(page, []store.Event{{Seq: 1, Data: make([]byte, 3*followBytes)}}); len(page) != 1 {
		t.Errorf("an event over followBytes was not held alone: %d events", len(page))
	}
	small := []store.Event{{Seq: 1, Data: []byte("a")}, {Seq: 2, Data: []byte("b")}}
	if page = holdPage(page, small); len(page) != 2 {
		t.Errorf("%d small events held of 2", len(page))
	}
}
