package clientreq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/acpgate/acpgate/internal/acp/jsonrpc"
)

// pending is one session's requests of one kind (permission, elicitation)
// that wait for a client's answer: each is registered under an id the
// gateway mints, found by that id when a client answers, and removed when
// it is answered or given up on, whichever comes first. Q is what the
// request asked, against which an answer is checked; A is the answer.
//
// It is the one place where such a wait is kept, so that every kind ends
// the same ways (see ending) and an id, once answered or given up on,
// answers "no such request" to every later client.
type pending[Q, A any] struct {
	prefix   string // of the ids minted: "perm", "elicit"
	notFound error  // resolve's error for an id not waiting

	mu      sync.Mutex
	seq     int
	waiting map[string]*waiter[Q, A]
}

type waiter[Q, A any] struct {
	question Q
	answer   chan A // buffered: resolve removes the waiter first, so sends at most once
}

func newPending[Q, A any](prefix string, notFound error) *pending[Q, A] {
	return &pending[Q, A]{prefix: prefix, notFound: notFound, waiting: make(map[string]*waiter[Q, A])}
}

// mint returns the id of the session's next request of this kind, whether
// or not it will wait for a client: the ids a client sees count every
// request.
func (p *pending[Q, A]) mint() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq++
	return fmt.Sprintf("%s-%d", p.prefix, p.seq)
}

// resolve answers the request waiting under id with what answer makes of
// its question. An id not waiting is p.notFound; an error of answer is
// returned as it is, and leaves the request waiting for a better answer.
func (p *pending[Q, A]) resolve(id string, answer func(Q) (A, error)) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.waiting[id]
	if !ok {
		return fmt.Errorf("%w: %q", p.notFound, id)
	}
	a, err := answer(w.question)
	if err != nil {
		return err
	}
	delete(p.waiting, id)
	w.answer <- a
	return nil
}

// ending is how a wait for a client ended.
type ending int

const (
	// answered: a client answered (resolve).
	answered ending = iota
	// timedOut: nobody answered within the policy's timeout.
	timedOut
	// cancelled: the turn was cancelled (once session/cancel was sent) or
	// ended, or the request's own context ended for another reason than
	// the agent's.
	cancelled
	// withdrawn: the agent withdrew the request ($/cancel_request).
	withdrawn
)

// wait registers the request id asking q, calls announce (which emits the
// undecided request: registered first, so that a client that sees it can
// answer it), and waits for a client's answer, the timeout, the turn's
// cancellation or end, or ctx. The request is no longer waiting when wait
// returns.
func (p *pending[Q, A]) wait(ctx context.Context, t Turn, id string, q Q, timeout time.Duration, announce func()) (A, ending) {
	w := &waiter[Q, A]{question: q, answer: make(chan A, 1)}
	p.mu.Lock()
	p.waiting[id] = w
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.waiting, id)
		p.mu.Unlock()
	}()
	announce()

	var none A
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case a := <-w.answer:
		return a, answered
	case <-timer.C:
		return none, timedOut
	case <-t.CancelSent():
		return none, cancelled
	case <-t.Ended():
		return none, cancelled
	case <-ctx.Done():
		if withdrawnByAgent(ctx) {
			return none, withdrawn
		}
		return none, cancelled
	}
}

// withdrawnByAgent reports whether the agent withdrew the request being
// served in ctx with $/cancel_request: its pending ask is then void.
func withdrawnByAgent(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), jsonrpc.ErrCancelledByPeer)
}

// awaitCancelSent waits until the agent has been told of the turn's
// cancellation, or ctx ends. ACP's order is session/cancel first, then the
// pending requests answered cancelled: an agent that saw the answers first
// could take them for a refusal and end its turn as completed before it
// learned of the cancel.
func awaitCancelSent(ctx context.Context, t Turn) {
	select {
	case <-t.CancelSent():
	case <-ctx.Done():
	}
}
