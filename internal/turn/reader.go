package turn

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/rpcerr"
	"github.com/acpgate/acpgate/internal/store"
	"github.com/acpgate/acpgate/internal/turn/wire"
)

// followBatch and followBytes bound the page a stream reads at once, from
// memory or from the store: a page is held until the stream has sent it,
// so a stream whose client stopped reading holds one page beyond what
// gRPC buffers for it, at most followBytes or one event. Pages of 1 MiB
// made each stalled stream of a flood of 64 KiB chunks hold 16 of them, a
// megabyte a stream, for as long as its client liked.
const (
	followBatch = 256
	followBytes = 64 << 10
)

// storePoll is how often a stream re-reads a turn that runs with no
// journal in this gateway (it is being set up).
const storePoll = 100 * time.Millisecond

// ReaderOptions are what streams of turns read from.
type ReaderOptions struct {
	// Turns are the turns running here, read from memory.
	Turns *Table
	// Store holds every turn's record and journal.
	Store store.Store
	// Budget bounds the bytes of pages read from the store and not yet
	// sent, gateway-wide.
	Budget *ReadBudget
	// Heartbeat is how long a stream that has sent nothing waits before
	// it sends a heartbeat.
	Heartbeat time.Duration
}

// Reader reads turns for their streams: the Prompt that started a turn
// and every WatchTurn are readers alike.
type Reader struct{ opts ReaderOptions }

// NewReader is a Reader over opts.
func NewReader(opts ReaderOptions) *Reader { return &Reader{opts: opts} }

// Follow sends a turn's events with seq greater than after to stream, from
// the turn's journal while it runs in this gateway (memory, or the store
// for what has left memory) and from the store once it has ended, until
// the terminal has been sent. A stream that has sent nothing for the
// heartbeat interval sends a heartbeat. It returns nil once the terminal
// is sent, or why the stream ended before.
//
// Every stream is its own cursor: a slow one falls behind without holding
// the turn back, and reads the store when it is behind what memory keeps.
//
// Every stream ends with the terminal, whatever after says: events at or
// below after are skipped, the terminal never is, so a client that resumes
// from a seq past what the store kept (its gateway crashed, or its journal
// failed, after it saw the seq) still learns how the turn ended.
func (r *Reader) Follow(ctx context.Context, turnID string, after uint64, stream grpc.ServerStream) error {
	heartbeat := time.NewTimer(r.opts.Heartbeat)
	defer heartbeat.Stop()
	c := r.Open(turnID, after)
	defer c.Close()
	var page []store.Event // the events being sent (see holdPage)
	for {
		b, err := c.Next(ctx)
		if err != nil {
			return err
		}
		page = holdPage(page, b.Events)
		err = r.sendAndWait(ctx, stream, page, b, c, heartbeat)
		clear(page)
		if err != nil || b.Ends(c.After()) {
			return err
		}
	}
}

// sendAndWait sends page, advancing c past it, then, unless it ended the
// turn or there may be more at once, waits for more, a heartbeat, or the
// end of the call.
func (r *Reader) sendAndWait(ctx context.Context, stream grpc.ServerStream, page []store.Event, b Batch, c *Cursor, heartbeat *time.Timer) error {
	for _, e := range page {
		if err := stream.SendMsg(wire.Encoded(e)); err != nil {
			return err
		}
		c.Sent(e.Seq)
	}
	if len(page) > 0 {
		heartbeat.Reset(r.opts.Heartbeat)
	}
	if b.Ends(c.After()) || len(page) > 0 {
		return nil
	}
	select {
	case <-b.More:
	case <-heartbeat.C:
		hb := &acpgatev1.PromptEvent{Time: timestamppb.Now(), Event: &acpgatev1.PromptEvent_Heartbeat{Heartbeat: &acpgatev1.Heartbeat{LastSeq: c.After()}}}
		if err := stream.SendMsg(hb); err != nil {
			return err
		}
		heartbeat.Reset(r.opts.Heartbeat)
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	return nil
}

// holdPage copies into page, reusing it, the first events of batch that
// fit in followBytes, at least one. The copy is the stream's own: a batch
// from memory is a window of the journal's recent events, and holding the
// window would keep the whole array it is in (every event the journal
// held when it was taken) for as long as the stream's client does not
// read.
func holdPage(page, batch []store.Event) []store.Event {
	n, size := 0, 0
	for n < len(batch) && (n == 0 || size+batch[n].Len() <= followBytes) {
		size += batch[n].Len()
		n++
	}
	return append(page[:0], batch[:n]...)
}

// readPage reads a page of turnID's events after seq after from the store,
// taking its bytes from the gateway's read budget first; give gives them
// back once the page is sent. When the budget has no room within its
// wait, the stream is refused (RESOURCE_EXHAUSTED, with a RetryInfo) and
// its client resumes later from the last seq it got.
//
// A page counts at most followBytes: one event larger than that (a
// completed turn's terminal carries its answer, up to
// limits.max_answer_bytes) is read alone and counts as a full page, so
// that it is never refused for want of room the streams of other turns
// hold.
func (r *Reader) readPage(ctx context.Context, turnID string, after uint64) (events []store.Event, give func(), err error) {
	took := followBytes
	if err := r.takeBudget(ctx, took, after); err != nil {
		return nil, nil, err
	}
	events, err = r.opts.Store.Events(ctx, turnID, after, followBatch, followBytes)
	if err != nil {
		r.opts.Budget.give(took)
		return nil, nil, rpcerr.JournalRead(turnID, err)
	}
	if size := eventsLen(events); size < took {
		r.opts.Budget.give(took - size)
		took = size
	}
	return events, func() { r.opts.Budget.give(took) }, nil
}

// takeBudget takes n bytes of the read budget for a stream that has sent
// up to seq after.
func (r *Reader) takeBudget(ctx context.Context, n int, after uint64) error {
	b := r.opts.Budget
	ok, err := b.take(ctx, n)
	if err != nil {
		return err
	}
	if !ok {
		return rpcerr.OverQuota(rpcerr.RetryDelay, "the gateway's %d MiB for streams reading journals has been taken by other streams for %s; call WatchTurn again with after_seq %d",
			b.Size()>>20, b.Wait(), after)
	}
	return nil
}

// pollAfter is a channel closed after d.
func pollAfter(d time.Duration) <-chan struct{} {
	c := make(chan struct{})
	time.AfterFunc(d, func() { close(c) })
	return c
}

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
