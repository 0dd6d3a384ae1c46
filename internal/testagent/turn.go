package main

import (
	"encoding/json"
	"sync"
	"time"
)

// step runs one directive of a turn. It reports true when it ended the turn
// (answered the prompt, or deliberately never will).
type step func(t *turn) (ended bool)

// turn is one running session/prompt.
type turn struct {
	a         *agent
	sessionID string
	id        json.RawMessage // the prompt request's id
	openedBy  string          // how this process opened the session
	history   []string        // the session's earlier prompts (--sessions-dir)

	mu           sync.Mutex
	ignoreCancel bool
	withdraw     time.Duration // withdraw_after: unanswered requests are withdrawn after this
	cancelOnce   sync.Once
	cancelled    chan struct{} // closed by an effective session/cancel
}

// call makes a request of the agent's own, withdrawing it as the turn's
// withdraw_after says.
func (t *turn) call(method string, params any) *message {
	t.mu.Lock()
	after := t.withdraw
	t.mu.Unlock()
	return t.a.call(method, params, after)
}

// cancel handles session/cancel for this turn.
func (t *turn) cancel() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ignoreCancel {
		return
	}
	t.cancelOnce.Do(func() { close(t.cancelled) })
}

func (t *turn) isCancelled() bool {
	select {
	case <-t.cancelled:
		return true
	default:
		return false
	}
}

func (t *turn) run(steps []step) {
	defer func() {
		t.a.mu.Lock()
		delete(t.a.turns, t)
		t.a.mu.Unlock()
	}()
	for _, s := range steps {
		if t.isCancelled() {
			t.a.reply(t.id, obj{"stopReason": "cancelled"})
			return
		}
		if s(t) {
			return
		}
	}
	reason := "end_turn"
	if t.isCancelled() {
		reason = "cancelled"
	}
	t.a.reply(t.id, obj{"stopReason": reason})
}

func (t *turn) update(u obj) { t.a.sessionUpdate(t.sessionID, u) }

func (t *turn) say(text string) { t.update(textChunk("agent_message_chunk", text, "")) }

// wait sleeps for d (forever if d < 0) unless the turn is cancelled first.
func (t *turn) wait(d time.Duration) {
	if d < 0 {
		<-t.cancelled
		return
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-t.cancelled:
	}
}
