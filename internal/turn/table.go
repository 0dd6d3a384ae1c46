package turn

import (
	"context"
	"sync"

	"github.com/acpgate/acpgate/internal/store"
)

// Running is a turn running in this gateway.
type Running struct {
	Rec     store.Turn
	Journal *Journal
	Cancel  context.CancelFunc // cancels the turn's context: the turn is cancelled
}

// Table is the turns running in this gateway, by id. The zero Table is
// empty and ready.
type Table struct {
	mu    sync.Mutex
	turns map[string]*Running
}

// Add adds r.
func (t *Table) Add(r *Running) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.turns == nil {
		t.turns = make(map[string]*Running)
	}
	t.turns[r.Rec.ID] = r
}

// Remove removes turn id.
func (t *Table) Remove(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.turns, id)
}

// Get is turn id, nil when it does not run here.
func (t *Table) Get(id string) *Running {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.turns[id]
}

// All is every turn running here.
func (t *Table) All() []*Running {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*Running, 0, len(t.turns))
	for _, r := range t.turns {
		out = append(out, r)
	}
	return out
}

// Recorded is rec as its streams know it: a turn of this gateway whose
// terminal the store could not take (see Journal.End) has ended, with the
// terminal its streams got, whatever its record says. So a request_id
// whose turn ended that way may run again when the ending says so.
func (t *Table) Recorded(rec store.Turn) store.Turn {
	if !rec.Running() || rec.ID == "" {
		return rec
	}
	if live := t.Get(rec.ID); live != nil {
		if ok, terminal, endedAt := live.Journal.Recorded(); !ok {
			rec.Terminal, rec.EndedAt = terminal, endedAt
		}
	}
	return rec
}

// memoryRead is what a read of a running turn's journal found (see
// Journal.read).
type memoryRead struct {
	events   []store.Event
	more     <-chan struct{}
	inMemory bool
	last     uint64
	ended    bool
}

// read reads turn id from memory while it runs here. ok is false when the
// turn is not here, or left during the read: a turn handed off is removed
// before its terminal is delivered from memory (Journal.OnRefused), so a
// read that may have seen that terminal is discarded, and the store is
// read instead.
func (t *Table) read(id string, after uint64) (r memoryRead, ok bool) {
	running := t.Get(id)
	if running == nil {
		return memoryRead{}, false
	}
	r.events, r.more, r.inMemory, r.last, r.ended = running.Journal.read(after, followBatch)
	if t.Get(id) != running {
		return memoryRead{}, false
	}
	return r, true
}
