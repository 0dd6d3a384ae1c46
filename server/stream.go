package server

import (
	"context"
	"strings"
	"sync"

	"google.golang.org/protobuf/types/known/timestamppb"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// maxQueuedEvents bounds the events a turn holds for its stream beyond what
// gRPC itself buffers. A full queue makes the turn wait, which stops it
// reading the agent's stdout, whose pipe then fills and slows the agent:
// the backpressure that keeps a slow client from growing the gateway.
const maxQueuedEvents = 256

// maxCoalescedBytes bounds the text of one coalesced chunk, far under the
// 4 MiB that gRPC clients accept by default.
const maxCoalescedBytes = 64 << 10

// eventQueue carries one turn's events from the goroutine that runs the
// turn to the goroutine that writes the client's stream.
//
// The two are separate so that nothing the turn needs in order to end ever
// waits on the client. When the turn itself sent on the stream, a client
// that stopped reading (without cancelling) blocked the agent's reader
// inside a send, holding the turn: the agent's answer to session/cancel was
// never read, CloseSession and turn_timeout waited on it, and shutdown
// waited until the client went away. Now the turn waits for queue space
// only while it is running normally. Once its cancellation is requested
// (abandon) or the stream is gone, an event that does not fit is dropped
// instead: its seq is never assigned, so the stream stays gapless, and the
// terminal, which always fits, carries the partial output.
type eventQueue struct {
	mu        sync.Mutex
	events    []*acpgatev1.PromptEvent
	abandoned bool // the turn is being cancelled: never wait for room
	gone      bool // the stream has ended: keep nothing

	ready    chan struct{} // signalled when events are queued
	room     chan struct{} // signalled when events are taken
	stop     chan struct{} // closed once abandoned or gone
	stopOnce sync.Once
}

func newEventQueue() *eventQueue {
	return &eventQueue{
		ready: make(chan struct{}, 1),
		room:  make(chan struct{}, 1),
		stop:  make(chan struct{}),
	}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// push queues one event of the running turn (acp.PromptOptions.Emit).
func (q *eventQueue) push(e *acpgatev1.PromptEvent) {
	for {
		q.mu.Lock()
		switch {
		case q.gone:
			q.mu.Unlock()
			return
		case len(q.events) < maxQueuedEvents:
			q.events = append(q.events, e)
			first := len(q.events) == 1
			q.mu.Unlock()
			if first {
				signal(q.ready)
			}
			return
		case q.abandoned:
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		select {
		case <-q.room:
		case <-q.stop:
		}
	}
}

// finish queues the turn's terminal, which is never dropped while the
// stream lives and never waits.
func (q *eventQueue) finish(e *acpgatev1.PromptEvent) {
	q.mu.Lock()
	if !q.gone {
		q.events = append(q.events, e)
	}
	q.mu.Unlock()
	signal(q.ready)
}

// abandon is called once the turn's cancellation is requested
// (acp.PromptOptions.OnCancel).
func (q *eventQueue) abandon() {
	q.mu.Lock()
	q.abandoned = true
	q.mu.Unlock()
	q.stopOnce.Do(func() { close(q.stop) })
}

// hangUp is called when the stream has ended: the turn keeps running
// towards its ending but nothing is kept for the stream any more.
func (q *eventQueue) hangUp() {
	q.mu.Lock()
	q.gone, q.events = true, nil
	q.mu.Unlock()
	q.stopOnce.Do(func() { close(q.stop) })
}

// take waits for queued events and takes them all, swapping in spare as
// the queue's next buffer. It returns false when ctx ends first.
func (q *eventQueue) take(ctx context.Context, spare []*acpgatev1.PromptEvent) ([]*acpgatev1.PromptEvent, bool) {
	for {
		q.mu.Lock()
		if len(q.events) > 0 {
			batch := q.events
			q.events = spare[:0]
			q.mu.Unlock()
			signal(q.room)
			return batch, true
		}
		q.mu.Unlock()
		select {
		case <-q.ready:
		case <-ctx.Done():
			return nil, false
		}
	}
}

// streamWriter writes a turn's events to the client's stream, on the
// stream's own goroutine, numbering them as they are sent.
//
// With coalesce (PromptRequest.coalesce_chunks), consecutive text chunks of
// one message that are queued together are sent as one chunk of up to
// maxCoalescedBytes: merging only what has already arrived, never waiting
// for more.
type streamWriter struct {
	stream   acpgatev1.AgentGateway_PromptServer
	coalesce bool
	seq      uint64
	parts    []string
}

// run sends the queue's events until the terminal has been sent (nil), the
// client went away or a send failed (its error). Either way the queue is
// left hung up, so the turn never waits for this stream again.
func (w *streamWriter) run(q *eventQueue) error {
	defer q.hangUp()
	ctx := w.stream.Context()
	var spare []*acpgatev1.PromptEvent
	for {
		batch, ok := q.take(ctx, spare)
		if !ok {
			return context.Cause(ctx)
		}
		for i := 0; i < len(batch); i++ {
			e := batch[i]
			if w.coalesce && isTextChunk(e.GetAgentMessageChunk()) {
				e, i = w.merge(batch, i)
			}
			if err := w.send(e); err != nil {
				return err
			}
			if isTerminal(e) {
				return nil
			}
		}
		clear(batch)
		spare = batch
	}
}

// merge joins the text chunk at batch[i] with the text chunks of the same
// message that follow it, and returns the merged event and the index of
// the last one used.
func (w *streamWriter) merge(batch []*acpgatev1.PromptEvent, i int) (*acpgatev1.PromptEvent, int) {
	first := batch[i].GetAgentMessageChunk()
	w.parts = append(w.parts[:0], first.GetText())
	size := len(first.GetText())
	j := i + 1
	for ; j < len(batch); j++ {
		c := batch[j].GetAgentMessageChunk()
		if !isTextChunk(c) || c.GetMessageId() != first.GetMessageId() || size+len(c.GetText()) > maxCoalescedBytes {
			break
		}
		w.parts = append(w.parts, c.GetText())
		size += len(c.GetText())
	}
	if j == i+1 {
		return batch[i], i
	}
	text := strings.Join(w.parts, "")
	clear(w.parts)
	return &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_AgentMessageChunk{AgentMessageChunk: &acpgatev1.MessageChunk{
		MessageId: first.GetMessageId(),
		Text:      text,
		Content:   &acpgatev1.ContentBlock{Block: &acpgatev1.ContentBlock_Text{Text: text}},
	}}}, j - 1
}

func (w *streamWriter) send(e *acpgatev1.PromptEvent) error {
	w.seq++
	e.Seq = w.seq
	e.Time = timestamppb.Now()
	return w.stream.Send(e)
}

func isTextChunk(c *acpgatev1.MessageChunk) bool {
	_, ok := c.GetContent().GetBlock().(*acpgatev1.ContentBlock_Text)
	return ok
}

func isTerminal(e *acpgatev1.PromptEvent) bool {
	switch e.GetEvent().(type) {
	case *acpgatev1.PromptEvent_Outcome, *acpgatev1.PromptEvent_Error:
		return true
	}
	return false
}
