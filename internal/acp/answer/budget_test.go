package answer

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

func TestTheAnswerBudgetIsNeverOverdrawnByConcurrentReservations(t *testing.T) {
	b := NewBudget(256 << 10)
	var wg sync.WaitGroup
	var overdrawn atomic.Int64
	for g := range 8 {
		wg.Go(func() {
			// Each holds a few reservations at a time, so the budget is
			// mostly close to full.
			r := rand.New(rand.NewPCG(uint64(g), 7))
			var held []int64
			for range 20000 {
				if len(held) == 4 || (len(held) > 0 && r.IntN(2) == 0) {
					i := r.IntN(len(held))
					b.release(held[i])
					held = append(held[:i], held[i+1:]...)
					continue
				}
				n := int64(1 + r.IntN(64<<10))
				if !b.reserve(n) {
					continue
				}
				held = append(held, n)
				if used := b.Used(); used > b.Capacity() {
					overdrawn.Store(used)
				}
			}
			for _, n := range held {
				b.release(n)
			}
		})
	}
	wg.Wait()
	if o := overdrawn.Load(); o != 0 {
		t.Errorf("%d bytes reserved of a %d-byte budget", o, b.Capacity())
	}
	if b.Used() != 0 {
		t.Errorf("%d bytes still reserved", b.Used())
	}
}
