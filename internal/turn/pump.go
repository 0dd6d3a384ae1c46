package turn

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/metrics"
	"github.com/acpgate/acpgate/internal/store"
	"github.com/acpgate/acpgate/internal/turn/wire"
)

// PumpOptions are what a turn's pump needs besides its queue and journal.
type PumpOptions struct {
	// Coalesce merges the text chunks queued together
	// (PromptRequest.chunk_delivery).
	Coalesce bool
	// MaxBytes is limits.max_turn_bytes: past it the turn is cancelled
	// (Cancel) and its further events are not journaled.
	MaxBytes int64
	// Cancel cancels the turn's prompt with a cause the agent is told.
	Cancel func(cause string)
	// Full is the terminal of a turn that completed after its journal
	// dropped events past MaxBytes: it must not read as complete.
	Full func(detail string) *acpgatev1.PromptEvent
	// Failed is the terminal in place of e when the journal failed with
	// err (see Journal.End).
	Failed func(err error, e *acpgatev1.PromptEvent) *acpgatev1.PromptEvent
	// Metrics counts the events journaled and the time from Began to the
	// first agent message chunk; nil counts nothing.
	Metrics *metrics.Agent
	Began   time.Time
	Log     *slog.Logger
}

// Stats are what a turn streamed: events journaled between its started
// event and its terminal, and their encoded bytes; and the encoded size of
// its terminal. Two integers kept per event: a span per chunk would cost
// the stream more than the stream costs.
type Stats struct{ Events, Bytes, Terminal int64 }

// Pump moves a turn's events from its queue into its journal until the
// terminal, which it journals with Journal.End: merging text chunks unless
// the client asked for each one, and bounding the journal at opts.MaxBytes.
func Pump(ctx context.Context, q *Queue, j *Journal, opts PumpOptions) Stats {
	var (
		m         merger
		spare     []*acpgatev1.PromptEvent
		out       []store.Event // a batch's encodings; the journal copies them
		size      int64
		events    int64
		over      bool
		firstSeen bool
	)
	limit := opts.MaxBytes
	for {
		batch, _ := q.take(context.Background(), spare)
		seq := j.Next()
		out = out[:0]
		for i := 0; i < len(batch); i++ {
			e := batch[i]
			if opts.Coalesce && mergeable(e) {
				e, i = m.merge(batch, i)
			}
			if isTerminal(e) {
				if len(out) > 0 {
					j.Append(out)
				}
				pieces := q.terminalPieces()
				if over && e.GetOutcome() != nil {
					// The agent completed before the cancel reached it, but
					// the journal dropped events past the limit: the turn
					// must not read as complete.
					e, pieces = opts.Full(fmt.Sprintf("the turn's journal reached limits.max_turn_bytes (%d bytes); the events after it were not journaled", limit)), wire.Pieces{}
				}
				end := j.End(e, pieces, seq, opts.Failed)
				return Stats{Events: events, Bytes: size, Terminal: int64(end.Len())}
			}
			if over {
				continue
			}
			ev := wire.Encode(e, seq)
			if size += int64(ev.Len()); size > limit {
				over = true
				cause := fmt.Sprintf("the turn's journal reached limits.max_turn_bytes (%d bytes)", limit)
				opts.Log.WarnContext(ctx, "cancelling a turn whose journal is full", "turn", j.id, "limit", limit)
				opts.Cancel(cause)
				continue
			}
			out = append(out, ev)
			seq++
			events++
			opts.Metrics.Chunk(ev.Len())
			if _, chunk := e.GetEvent().(*acpgatev1.PromptEvent_AgentMessageChunk); chunk && !firstSeen {
				firstSeen = true
				opts.Metrics.FirstChunk(time.Since(opts.Began))
			}
		}
		if len(out) > 0 {
			j.Append(out)
		}
		clear(batch)
		clear(out)
		spare = batch
	}
}

// maxQueuedEvents bounds the events a turn holds for its stream beyond what
// gRPC itself buffers. A full queue makes the turn wait, which stops it
// reading the agent's stdout, whose pipe then fills and slows the agent:
// the backpressure that keeps a slow client from growing the gateway.
const maxQueuedEvents = 256

// maxQueuedBytes bounds the same queue by the events' text, so that 256
// chunks of 64 KiB do not hold 16 MiB: the queue needs only enough to keep
// the pump busy. An event larger than the bound still goes through, alone.
const maxQueuedBytes = 1 << 20

// maxCoalescedBytes bounds the text of one coalesced chunk, far under the
// 4 MiB that gRPC clients accept by default.
const maxCoalescedBytes = 64 << 10

// Queue carries one turn's events from the goroutine that runs the
// turn to the turn's pump, which journals them (see Journal, Pump).
//
// Nothing the turn needs in order to end ever waits on a client: clients
// read the journal at their own pace. When the turn itself sent on the
// client's stream, a client that stopped reading (without cancelling)
// blocked the agent's reader inside a send, holding the turn: the agent's
// answer to session/cancel was never read, CloseSession and turn_timeout
// waited on it, and shutdown waited until the client went away. The turn
// still waits for queue space while the pump is behind (a store slower than
// the agent slows the agent), but only while it runs normally: once its
// cancellation is requested (abandon), an event that does not fit is
// dropped instead. Its seq is never assigned, so the journal stays
// gapless, and the terminal, which always fits, carries the partial output.
type Queue struct {
	mu        sync.Mutex
	events    []*acpgatev1.PromptEvent
	bytes     int         // queuedSize of events
	abandoned bool        // the turn is being cancelled: never wait for room
	pieces    wire.Pieces // the terminal's text in pieces (Finish)

	ready    chan struct{} // signalled when events are queued
	room     chan struct{} // signalled when events are taken
	stop     chan struct{} // closed once abandoned
	stopOnce sync.Once
}

// NewQueue is an empty queue.
func NewQueue() *Queue {
	return &Queue{
		ready: make(chan struct{}, 1),
		room:  make(chan struct{}, 1),
		stop:  make(chan struct{}),
	}
}

// queuedSize is what an event counts against maxQueuedBytes: a chunk's
// text (the bulk of a flood, measured for free), else its encoded size.
func queuedSize(e *acpgatev1.PromptEvent) int {
	if c := e.GetAgentMessageChunk(); c != nil {
		return len(c.GetText())
	}
	return proto.Size(e)
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Push queues one event of the running turn (acp.PromptOptions.Emit).
func (q *Queue) Push(e *acpgatev1.PromptEvent) {
	for {
		q.mu.Lock()
		size := queuedSize(e)
		switch {
		case len(q.events) == 0 || len(q.events) < maxQueuedEvents && q.bytes+size <= maxQueuedBytes:
			q.events = append(q.events, e)
			q.bytes += size
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

// Finish queues the turn's terminal, which is never dropped and never
// waits; p is its outcome's text and final message when they are in
// pieces (see wire.Pieces).
func (q *Queue) Finish(e *acpgatev1.PromptEvent, p wire.Pieces) {
	q.mu.Lock()
	q.events = append(q.events, e)
	q.pieces = p
	q.mu.Unlock()
	signal(q.ready)
}

// terminalPieces is what Finish was given as its terminal's pieces.
func (q *Queue) terminalPieces() wire.Pieces {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.pieces
}

// Abandon is called once the turn's cancellation is requested
// (acp.PromptOptions.OnCancel).
func (q *Queue) Abandon() {
	q.mu.Lock()
	q.abandoned = true
	q.mu.Unlock()
	q.stopOnce.Do(func() { close(q.stop) })
}

// take waits for queued events and takes them all, swapping in spare as
// the queue's next buffer. It returns false when ctx ends first.
func (q *Queue) take(ctx context.Context, spare []*acpgatev1.PromptEvent) ([]*acpgatev1.PromptEvent, bool) {
	for {
		q.mu.Lock()
		if len(q.events) > 0 {
			batch := q.events
			q.events, q.bytes = spare[:0], 0
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

// merger joins consecutive text chunks of one message
// (PromptRequest.chunk_delivery): only chunks already queued together, so
// nothing is held back waiting for more, and at most maxCoalescedBytes of
// text in one chunk.
type merger struct {
	parts []string
}

// merge joins the text chunk at batch[i] with the text chunks of the same
// message that follow it, and returns the merged event and the index of
// the last one used.
func (m *merger) merge(batch []*acpgatev1.PromptEvent, i int) (*acpgatev1.PromptEvent, int) {
	first := batch[i].GetAgentMessageChunk()
	m.parts = append(m.parts[:0], first.GetText())
	size := len(first.GetText())
	j := i + 1
	for ; j < len(batch); j++ {
		c := batch[j].GetAgentMessageChunk()
		if !mergeable(batch[j]) || c.GetMessageId() != first.GetMessageId() || size+len(c.GetText()) > maxCoalescedBytes {
			break
		}
		m.parts = append(m.parts, c.GetText())
		size += len(c.GetText())
	}
	if j == i+1 {
		return batch[i], i
	}
	text := strings.Join(m.parts, "")
	clear(m.parts)
	return &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_AgentMessageChunk{AgentMessageChunk: &acpgatev1.MessageChunk{
		MessageId: first.GetMessageId(),
		Text:      text,
	}}}, j - 1
}

// mergeable reports whether e is an agent message text chunk that may be
// merged with its neighbours: one without the agent's `_meta`, which belongs
// to that chunk alone and would be lost in a merged one.
func mergeable(e *acpgatev1.PromptEvent) bool {
	return isTextChunk(e.GetAgentMessageChunk()) && e.GetMeta() == nil
}

// isTextChunk reports whether c is a text chunk: a chunk whose block is not
// text has it in content, and a text chunk has no content (see
// acp.messageChunk).
func isTextChunk(c *acpgatev1.MessageChunk) bool {
	return c != nil && c.Content == nil
}

func isTerminal(e *acpgatev1.PromptEvent) bool {
	switch e.GetEvent().(type) {
	case *acpgatev1.PromptEvent_Outcome, *acpgatev1.PromptEvent_Error:
		return true
	}
	return false
}
