package turn

import (
	"context"
	"sync"
	"time"

	"github.com/acpgate/acpgate/internal/store"
)

// Committer writes the running turns' journals to the store behind them:
// once a window (commitDelay) after a journal has events the store lacks,
// the events of every journal with some, in one write (store.AppendAll).
//
// Why one for the gateway rather than one per turn: each turn had a
// goroutine and a timer of its own and made its own write every window. A
// hundred turns paced like an LLM (100 chunks a second each) were 2,000
// writes and as many timer wake-ups a second, queued for the store's one
// writer; a starting turn's started event, which its first chunks wait
// for, queued behind them and took hundreds of milliseconds. Now they are
// 20 writes a second, whatever the number of turns.
//
// A journal is queued when it gets events after the last commit
// (Journal.Append), written at the end of the window, and queued again if
// more came meanwhile. A journal at its bound of uncommitted events ends
// the window at once (hurry). The loop runs only while journals are
// queued: an idle gateway has no committer goroutine.
type Committer struct {
	st store.Store

	mu      sync.Mutex
	queued  []*Journal // to write at the end of the window
	running bool       // the loop runs

	urgent chan struct{} // signalled when a journal reaches its bound
}

// NewCommitter returns a committer of journals to st: one a gateway, shared
// by the journals of all its turns (see NewJournal).
func NewCommitter(st store.Store) *Committer {
	return &Committer{st: st, urgent: make(chan struct{}, 1)}
}

// add queues j, which has events the store lacks (Journal.queued was
// not set), starting the loop when it is not running.
func (c *Committer) add(j *Journal) {
	c.mu.Lock()
	c.queued = append(c.queued, j)
	start := !c.running
	c.running = true
	c.mu.Unlock()
	if start {
		go c.loop()
	}
}

// hurry ends the window at once: a queued journal is at its bound.
func (c *Committer) hurry() { signal(c.urgent) }

// loop writes the queued journals, a window after the first is queued,
// until a window ends with none queued.
func (c *Committer) loop() {
	window := time.NewTimer(commitDelay)
	defer window.Stop()
	for {
		select {
		case <-window.C:
		case <-c.urgent:
		}
		c.mu.Lock()
		js := c.queued
		c.queued = nil
		if len(js) == 0 {
			c.running = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		c.write(js)
		window.Reset(commitDelay)
	}
}

// write writes the events the store lacks of each of js in one call, and
// queues again those that got more meanwhile.
func (c *Committer) write(js []*Journal) {
	batches := make([]store.Appending, 0, len(js))
	taken := js[:0]
	for _, j := range js {
		if pending := j.take(); len(pending) > 0 {
			batches = append(batches, store.Appending{TurnID: j.id, Events: pending})
			taken = append(taken, j)
		}
	}
	if len(batches) == 0 {
		return
	}
	began := time.Now()
	errs := store.AppendAll(context.Background(), c.st, batches)
	var again []*Journal
	for i, j := range taken {
		if j.written(batches[i].Events, errs[i], began) {
			again = append(again, j)
		}
	}
	if len(again) > 0 {
		c.mu.Lock()
		c.queued = append(c.queued, again...)
		c.mu.Unlock()
	}
}
