package clients

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestARelayTurnWaitingForAStartSlotGivesUpWhenItsCallerDoes(t *testing.T) {
	r := &relay{starts: make(chan struct{}, 1)}
	held, err := r.startSlot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := r.startSlot(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting for the one slot, held, returned %v, not the caller's deadline", err)
	}
	held()
	held() // a second release must not free a slot it does not hold
	if _, err := r.startSlot(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := r.startSlot(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a released slot was freed twice: a second start got one (%v)", err)
	}
}
