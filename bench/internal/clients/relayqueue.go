package clients

import (
	"strings"
	"sync"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// relayQueue hands a relay turn's events from the goroutine that reads
// the agent to the one that sends them on the stream, so that reading
// goes on while a message is being sent, as in acpgate. Coalescing, a
// chunk read while the chunk before it still waits to be sent joins it:
// a sender that keeps up sends one message a chunk, one that falls behind
// sends what arrived meanwhile as one, and no chunk waits for one that has
// not arrived yet.
type relayQueue struct {
	coalesce bool
	ready    chan struct{} // a token when there is something to take

	mu     sync.Mutex
	events []*acpgatev1.PromptEvent
	tail   *strings.Builder // the text of the last event, a chunk still open to joining; nil: none
	closed bool
	err    error
}

func newRelayQueue(coalesce bool) *relayQueue {
	return &relayQueue{coalesce: coalesce, ready: make(chan struct{}, 1)}
}

// chunk queues a text chunk.
func (q *relayQueue) chunk(text string) {
	q.mu.Lock()
	if q.coalesce && q.tail != nil {
		q.tail.WriteString(text)
		q.mu.Unlock()
		return
	}
	q.sealTail()
	q.events = append(q.events, &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_AgentMessageChunk{AgentMessageChunk: &acpgatev1.MessageChunk{}}})
	q.tail = new(strings.Builder)
	q.tail.WriteString(text)
	q.mu.Unlock()
	q.wake()
}

// push queues an event other than a chunk.
func (q *relayQueue) push(ev *acpgatev1.PromptEvent) {
	q.mu.Lock()
	q.sealTail()
	q.events = append(q.events, ev)
	q.mu.Unlock()
	q.wake()
}

// close says the reader is done, err being why it stopped early (nil: the
// turn's events are all queued).
func (q *relayQueue) close(err error) {
	q.mu.Lock()
	q.closed, q.err = true, err
	q.mu.Unlock()
	q.wake()
}

// take waits for events and returns those queued; more is false once the
// reader is done and everything it queued has been taken, err then being
// its error.
func (q *relayQueue) take() (events []*acpgatev1.PromptEvent, more bool, err error) {
	for {
		q.mu.Lock()
		q.sealTail()
		events, q.events = q.events, nil
		closed := q.closed
		err = q.err
		q.mu.Unlock()
		if len(events) > 0 {
			return events, true, nil
		}
		if closed {
			return nil, false, err
		}
		<-q.ready
	}
}

// sealTail puts the open chunk's text into its event, without a copy;
// q.mu is held.
func (q *relayQueue) sealTail() {
	if q.tail == nil {
		return
	}
	q.events[len(q.events)-1].GetAgentMessageChunk().Text = q.tail.String()
	q.tail = nil
}

func (q *relayQueue) wake() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}
