package server

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
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

// follow sends a turn's events with seq greater than after to stream, from
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
func (g *Gateway) follow(ctx context.Context, turnID string, after uint64, stream grpc.ServerStream) error {
	heartbeat := time.NewTimer(g.cfg.HeartbeatInterval)
	defer heartbeat.Stop()
	var page []store.Event // the events being sent (see holdPage)
	for {
		batch, more, release, done, err := g.nextEvents(ctx, turnID, after)
		if err != nil {
			return err
		}
		page = holdPage(page, batch)
		err = g.sendAndWait(ctx, stream, page, more, done, &after, heartbeat)
		clear(page)
		release()
		if err != nil || done(after) {
			return err
		}
	}
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
func (g *Gateway) readPage(ctx context.Context, turnID string, after uint64) (events []store.Event, give func(), err error) {
	took := followBytes
	if err := g.takeBudget(ctx, took, after); err != nil {
		return nil, nil, err
	}
	events, err = g.store.Events(ctx, turnID, after, followBatch, followBytes)
	if err != nil {
		g.readers.give(took)
		return nil, nil, rpcerr.JournalRead(turnID, err)
	}
	if size := eventsLen(events); size < took {
		g.readers.give(took - size)
		took = size
	}
	return events, func() { g.readers.give(took) }, nil
}

// takeBudget takes n bytes of the read budget for a stream that has sent
// up to seq after.
func (g *Gateway) takeBudget(ctx context.Context, n int, after uint64) error {
	ok, err := g.readers.take(ctx, n)
	if err != nil {
		return err
	}
	if !ok {
		return rpcerr.OverQuota(rpcerr.RetryDelay, "the gateway's %d MiB for streams reading journals has been taken by other streams for %s; call WatchTurn again with after_seq %d",
			g.readers.Size()>>20, g.readers.Wait(), after)
	}
	return nil
}

// sendAndWait sends batch, then, unless it ended the turn or there may be
// more at once, waits for more, a heartbeat, or the end of the call.
func (g *Gateway) sendAndWait(ctx context.Context, stream grpc.ServerStream, batch []store.Event, more <-chan struct{}, done func(uint64) bool, after *uint64, heartbeat *time.Timer) error {
	for _, e := range batch {
		if err := stream.SendMsg(wire.Encoded(e)); err != nil {
			return err
		}
		*after = e.Seq
	}
	if len(batch) > 0 {
		heartbeat.Reset(g.cfg.HeartbeatInterval)
	}
	if done(*after) || len(batch) > 0 {
		return nil
	}
	select {
	case <-more:
	case <-heartbeat.C:
		hb := &acpgatev1.PromptEvent{Time: timestamppb.Now(), Event: &acpgatev1.PromptEvent_Heartbeat{Heartbeat: &acpgatev1.Heartbeat{LastSeq: *after}}}
		if err := stream.SendMsg(hb); err != nil {
			return err
		}
		heartbeat.Reset(g.cfg.HeartbeatInterval)
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	return nil
}

// nextEvents reads the events of turnID after seq after. more is closed
// when there may be more; release ends the wait for it; done(seq) reports
// whether seq is the terminal's.
func (g *Gateway) nextEvents(ctx context.Context, turnID string, after uint64) (batch []store.Event, more <-chan struct{}, release func(), done func(uint64) bool, err error) {
	if t, events, more, inMemory, last, ended := g.readRunning(turnID, after); t != nil {
		if ended && after >= last {
			// The terminal is never skipped.
			after = last - 1
			if t, events, more, inMemory, last, ended = g.readRunning(turnID, after); t == nil {
				// Handed off meanwhile: read the store.
				return g.nextEvents(ctx, turnID, after)
			}
		}
		release = func() {}
		if !inMemory {
			if events, release, err = g.readPage(ctx, turnID, after); err != nil {
				return nil, nil, nil, nil, err
			}
		}
		return events, more, release, func(seq uint64) bool { return ended && seq >= last }, nil
	}
	// Not a turn of this gateway's: being set up, attached to before its
	// journal was registered, or, with several replicas, another
	// replica's. A store another process writes to says when it changed
	// (subscribed before reading, so nothing falls between); any other is
	// read again shortly.
	if n, ok := g.store.(store.Notifier); ok {
		more, release = n.Changed(ctx, turnID)
	} else {
		more, release = pollAfter(storePoll), func() {}
	}
	// Extent, not Get: Get reads the terminal, the answer twice for a
	// completed turn, and this runs before every page.
	lastSeq, ended, err := g.store.Extent(ctx, turnID)
	if errors.Is(err, store.ErrNotFound) {
		release()
		return nil, nil, nil, nil, status.Errorf(codes.NotFound, "no turn %q (unknown, or past its retention)", turnID)
	}
	if err != nil {
		release()
		return nil, nil, nil, nil, status.Errorf(rpcerr.StoreCode(err), "reading turn %q: %v", turnID, err)
	}
	if ended && after >= lastSeq {
		// The terminal is never skipped.
		after = lastSeq - 1
	}
	events, give, err := g.readPage(ctx, turnID, after)
	if err != nil {
		release()
		return nil, nil, nil, nil, err
	}
	if !ended {
		// Not release itself in the closure: release is the result this
		// return assigns, and the closure would call itself.
		stopWaiting := release
		return events, more, func() { stopWaiting(); give() }, func(uint64) bool { return false }, nil
	}
	release()
	return events, nil, give, func(seq uint64) bool { return seq >= lastSeq }, nil
}

// turnProto is a turn's record as the API shows it.
func (g *Gateway) turnProto(rec store.Turn) (*acpgatev1.Turn, error) {
	rec = g.recorded(rec)
	t := &acpgatev1.Turn{
		TurnId:    rec.ID,
		RequestId: requestIDOf(rec.RequestID),
		Attempt:   rec.Attempt,
		Agent:     rec.Agent,
		SessionId: rec.SessionID,
		State:     acpgatev1.TurnState_TURN_STATE_RUNNING,
		StartedAt: timestamppb.New(rec.StartedAt),
		LastSeq:   rec.LastSeq,
		Replica:   rec.Replica,
	}
	if live := g.turns.get(rec.ID); live != nil {
		_, _, _, last, _ := live.j.read(^uint64(0), 0)
		t.LastSeq = max(t.LastSeq, last)
	}
	if !rec.Running() {
		t.State = acpgatev1.TurnState_TURN_STATE_ENDED
		t.EndedAt = timestamppb.New(rec.EndedAt)
		t.Terminal = &acpgatev1.PromptEvent{}
		if err := proto.Unmarshal(rec.Terminal, t.Terminal); err != nil {
			return nil, status.Errorf(codes.Internal, "turn %q's terminal does not decode: %v", rec.ID, err)
		}
	}
	return t, nil
}

// pollAfter is a channel closed after d.
func pollAfter(d time.Duration) <-chan struct{} {
	c := make(chan struct{})
	time.AfterFunc(d, func() { close(c) })
	return c
}
