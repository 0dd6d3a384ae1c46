// Package bytebudget lends bytes from a fixed budget to callers that wait,
// for a bounded time, for room: what the gateway holds for readers of the
// store and for answers an agent has not read yet, so that memory a client
// or an agent makes the gateway hold has a bound, and a wait for room has
// one too.
package bytebudget

import (
	"context"
	"sync"
	"time"
)

// Budget is size bytes, lent by Take and given back by Give.
type Budget struct {
	size int64
	wait time.Duration

	mu    sync.Mutex
	used  int64
	freed chan struct{} // closed, then replaced, when bytes are given back
}

// New returns a budget of size bytes whose Take waits at most wait.
func New(size int64, wait time.Duration) *Budget {
	return &Budget{size: size, wait: wait, freed: make(chan struct{})}
}

// Size is the budget's bytes.
func (b *Budget) Size() int64 { return b.size }

// Wait is how long Take waits for room.
func (b *Budget) Wait() time.Duration { return b.wait }

// Take waits until n bytes are free and takes them. It reports false when
// they were not free within the budget's wait (n larger than the whole
// budget never is: the caller says so rather than waiting), and ctx's cause
// when ctx ended first.
func (b *Budget) Take(ctx context.Context, n int64) (bool, error) {
	var timeout <-chan time.Time
	for {
		b.mu.Lock()
		if b.used+n <= b.size {
			b.used += n
			b.mu.Unlock()
			return true, nil
		}
		freed := b.freed
		b.mu.Unlock()
		if timeout == nil {
			timer := time.NewTimer(b.wait)
			defer timer.Stop()
			timeout = timer.C
		}
		select {
		case <-freed:
		case <-timeout:
			return false, nil
		case <-ctx.Done():
			return false, context.Cause(ctx)
		}
	}
}

// Give gives back n bytes taken, and wakes every Take waiting for room.
func (b *Budget) Give(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	close(b.freed)
	b.freed = make(chan struct{})
	b.mu.Unlock()
}

// InUse is the bytes taken.
func (b *Budget) InUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
