package turn

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/acpgate/acpgate/internal/rpcerr"
	"github.com/acpgate/acpgate/internal/store"
)

// Cursor is a stream's place in one turn: open it at a seq, take batches
// with Next, advance it with Sent, Close it. A batch is valid until the
// next call to Next or Close, which give back what it held (its share of
// the read budget, a subscription to the store's changes).
type Cursor struct {
	r       *Reader
	turnID  string
	after   uint64
	release func() // gives back what the last batch holds; nil when nothing
}

// Batch is a cursor's next events.
type Batch struct {
	// Events follow the cursor's seq (none when there is nothing yet).
	Events []store.Event
	// More is closed when there may be more; nil once the turn has ended.
	More <-chan struct{}
	// ends reports whether a seq is the terminal's.
	ends func(seq uint64) bool
}

// Ends reports whether seq is the turn's terminal's, so that a stream that
// has sent it is done.
func (b Batch) Ends(seq uint64) bool { return b.ends(seq) }

// Open opens a cursor on turnID after seq after.
func (r *Reader) Open(turnID string, after uint64) *Cursor {
	return &Cursor{r: r, turnID: turnID, after: after}
}

// After is the last seq sent.
func (c *Cursor) After() uint64 { return c.after }

// Sent advances the cursor past seq, once its event is sent.
func (c *Cursor) Sent(seq uint64) { c.after = seq }

// Close gives back what the last batch holds.
func (c *Cursor) Close() {
	if c.release != nil {
		c.release()
		c.release = nil
	}
}

// Next reads the events after the cursor's seq, giving back what the last
// batch held first.
func (c *Cursor) Next(ctx context.Context) (Batch, error) {
	c.Close()
	b, release, err := c.next(ctx, c.after)
	c.release = release
	return b, err
}

func (c *Cursor) next(ctx context.Context, after uint64) (Batch, func(), error) {
	turns, st := c.r.opts.Turns, c.r.opts.Store
	if m, ok := turns.read(c.turnID, after); ok {
		if m.ended && after >= m.last {
			// The terminal is never skipped.
			after = m.last - 1
			if m, ok = turns.read(c.turnID, after); !ok {
				// Handed off meanwhile: read the store.
				return c.next(ctx, after)
			}
		}
		release := func() {}
		events := m.events
		if !m.inMemory {
			var err error
			if events, release, err = c.r.readPage(ctx, c.turnID, after); err != nil {
				return Batch{}, nil, err
			}
		}
		ended, last := m.ended, m.last
		return Batch{Events: events, More: m.more, ends: func(seq uint64) bool { return ended && seq >= last }}, release, nil
	}
	// Not a turn of this gateway's: being set up, attached to before its
	// journal was registered, or, with several replicas, another
	// replica's. A store another process writes to says when it changed
	// (subscribed before reading, so nothing falls between); any other is
	// read again shortly.
	var more <-chan struct{}
	var stopWaiting func()
	if n, ok := st.(store.Notifier); ok {
		more, stopWaiting = n.Changed(ctx, c.turnID)
	} else {
		more, stopWaiting = pollAfter(storePoll), func() {}
	}
	// Extent, not Get: Get reads the terminal, the answer twice for a
	// completed turn, and this runs before every page.
	lastSeq, ended, err := st.Extent(ctx, c.turnID)
	if errors.Is(err, store.ErrNotFound) {
		stopWaiting()
		return Batch{}, nil, status.Errorf(codes.NotFound, "no turn %q (unknown, or past its retention)", c.turnID)
	}
	if err != nil {
		stopWaiting()
		return Batch{}, nil, status.Errorf(rpcerr.StoreCode(err), "reading turn %q: %v", c.turnID, err)
	}
	if ended && after >= lastSeq {
		// The terminal is never skipped.
		after = lastSeq - 1
	}
	events, give, err := c.r.readPage(ctx, c.turnID, after)
	if err != nil {
		stopWaiting()
		return Batch{}, nil, err
	}
	if !ended {
		return Batch{Events: events, More: more, ends: func(uint64) bool { return false }}, func() { stopWaiting(); give() }, nil
	}
	stopWaiting()
	return Batch{Events: events, ends: func(seq uint64) bool { return seq >= lastSeq }}, give, nil
}
