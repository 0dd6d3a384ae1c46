// Package memory is the store.Store that keeps everything in the
// process's memory: nothing survives the process. It is the store of a
// gateway configured with store: memory, and of tests that need a store
// and not a disk.
package memory

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/acpgate/acpgate/internal/store"
)

// Store is a store.Store in the process's memory: nothing survives the
// process.
// Its journals grow with their turns (bounded by the gateway's
// max_turn_bytes per turn) until retention deletes them.
type Store struct {
	mu        sync.Mutex
	turns     map[string]*memTurn
	byRequest map[string][]string // request id → turn ids, by attempt
	sessions  map[string]store.Session
	outbox    map[string]*memNote // turn id → its pending notification
}

type memTurn struct {
	rec    store.Turn
	events []store.Event
}

// New returns an empty store.
func New() *Store {
	return &Store{turns: make(map[string]*memTurn), byRequest: make(map[string][]string), sessions: make(map[string]store.Session), outbox: make(map[string]*memNote)}
}

var _ store.Store = (*Store)(nil)

func (m *Store) Begin(_ context.Context, t store.Turn) (store.Turn, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := m.turns[t.ID]; dup {
		return store.Turn{}, false, fmt.Errorf("memory store: turn %q exists already", t.ID)
	}
	if t.RequestID != "" {
		if ids := m.byRequest[t.RequestID]; len(ids) > 0 {
			latest := m.turns[ids[len(ids)-1]].rec
			if latest.Attempt >= t.Attempt {
				return cloneTurn(latest), false, nil
			}
		}
		m.byRequest[t.RequestID] = append(m.byRequest[t.RequestID], t.ID)
	}
	// Replica is the store's to set, and a store of one gateway acts for
	// no replica.
	t.EndedAt, t.LastSeq, t.Reserved, t.Terminal, t.Replica = time.Time{}, 0, store.BeginReserved, nil, ""
	m.turns[t.ID] = &memTurn{rec: cloneTurn(t)}
	return store.Turn{}, true, nil
}

func (m *Store) Started(_ context.Context, turnID, sessionID string, started store.Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	mt, err := m.running(turnID)
	if err != nil {
		return err
	}
	mt.rec.SessionID = sessionID
	return mt.reserve(mt.append([]store.Event{started}))
}

func (m *Store) Append(_ context.Context, turnID string, events []store.Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	mt, err := m.running(turnID)
	if err != nil {
		return err
	}
	return mt.reserve(mt.append(events))
}

// reserve extends the reservation past the events just journaled, when
// err says they were (see store.Turn.Reserved).
func (mt *memTurn) reserve(err error) error {
	if err == nil {
		mt.rec.Reserved = mt.rec.LastSeq + store.ReserveAhead
	}
	return err
}

func (m *Store) End(_ context.Context, turnID string, rest []store.Event, terminal store.Event, endedAt time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	mt, err := m.running(turnID)
	if err != nil {
		return err
	}
	last := mt.rec.LastSeq
	if len(rest) > 0 {
		last = rest[len(rest)-1].Seq
	}
	if err := store.TerminalFits(terminal.Seq, last, mt.rec.Reserved, len(rest) == 0); err != nil {
		return fmt.Errorf("memory store: turn %q: %w", turnID, err)
	}
	if err := mt.append(rest); err != nil {
		return err
	}
	mt.events = append(mt.events, store.Event{Seq: terminal.Seq, Data: terminal.Bytes()})
	mt.rec.LastSeq = terminal.Seq
	mt.rec.EndedAt = endedAt
	mt.rec.Terminal = terminal.Bytes()
	if mt.rec.NotifyURL != "" {
		m.outbox[turnID] = &memNote{n: store.Notification{TurnID: turnID, URL: mt.rec.NotifyURL, CreatedAt: endedAt}, due: endedAt}
	}
	return nil
}

func (m *Store) running(turnID string) (*memTurn, error) {
	mt, ok := m.turns[turnID]
	if !ok {
		return nil, store.ErrNotFound
	}
	if !mt.rec.Running() {
		return nil, store.ErrEnded
	}
	return mt, nil
}

// append checks the whole batch before journaling any of it: a batch with
// a bad seq in its middle must journal nothing, or the caller, told it
// failed, would resend events the journal already holds.
func (mt *memTurn) append(events []store.Event) error {
	for i, e := range events {
		if prev := mt.rec.LastSeq + uint64(i); e.Seq != prev+1 {
			return fmt.Errorf("memory store: turn %q: event seq %d does not follow %d", mt.rec.ID, e.Seq, prev)
		}
	}
	for _, e := range events {
		mt.events = append(mt.events, store.Event{Seq: e.Seq, Data: e.Bytes()})
	}
	mt.rec.LastSeq += uint64(len(events))
	return nil
}

func (m *Store) Get(_ context.Context, turnID string) (store.Turn, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mt, ok := m.turns[turnID]
	if !ok {
		return store.Turn{}, store.ErrNotFound
	}
	return cloneTurn(mt.rec), nil
}

func (m *Store) Owner(_ context.Context, turnID string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mt, ok := m.turns[turnID]
	if !ok {
		return "", store.ErrNotFound
	}
	return mt.rec.Owner, nil
}

func (m *Store) Extent(_ context.Context, turnID string) (uint64, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mt, ok := m.turns[turnID]
	if !ok {
		return 0, false, store.ErrNotFound
	}
	return mt.rec.LastSeq, !mt.rec.Running(), nil
}

func (m *Store) Latest(_ context.Context, requestID string) (store.Turn, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := m.byRequest[requestID]
	if requestID == "" || len(ids) == 0 {
		return store.Turn{}, store.ErrNotFound
	}
	return cloneTurn(m.turns[ids[len(ids)-1]].rec), nil
}

func (m *Store) List(_ context.Context, f store.Filter, limit int, from *store.Position) ([]store.Turn, error) {
	m.mu.Lock()
	var all []store.Turn
	for _, mt := range m.turns {
		if (f.SessionID == "" || mt.rec.SessionID == f.SessionID) && (f.Agent == "" || mt.rec.Agent == f.Agent) && (f.Owner == nil || mt.rec.Owner == *f.Owner) {
			all = append(all, mt.rec)
		}
	}
	m.mu.Unlock()
	slices.SortFunc(all, func(a, b store.Turn) int { return -store.ComparePositions(store.PositionOf(a), store.PositionOf(b)) })
	var out []store.Turn
	for _, t := range all {
		if from != nil && store.ComparePositions(store.PositionOf(t), *from) >= 0 {
			continue
		}
		if len(out) == limit {
			break
		}
		out = append(out, cloneTurn(t))
	}
	return out, nil
}

func (m *Store) Events(_ context.Context, turnID string, afterSeq uint64, limit, maxBytes int) ([]store.Event, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mt, ok := m.turns[turnID]
	if !ok {
		return nil, store.ErrNotFound
	}
	// Seqs run 1, 2, 3…, but a terminal may skip some (see End).
	from, _ := slices.BinarySearchFunc(mt.events, afterSeq+1, func(e store.Event, seq uint64) int { return cmp.Compare(e.Seq, seq) })
	end := min(len(mt.events), from+max(limit, 0))
	out := make([]store.Event, 0, end-from)
	size := 0
	for _, e := range mt.events[from:end] {
		if size += len(e.Data); len(out) > 0 && maxBytes > 0 && size > maxBytes {
			break
		}
		// The data too: a caller that reuses a returned buffer must not
		// rewrite the journal.
		out = append(out, store.Event{Seq: e.Seq, Data: bytes.Clone(e.Data)})
	}
	return out, nil
}

func (m *Store) Running(context.Context) ([]store.Turn, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []store.Turn
	for _, mt := range m.turns {
		if mt.rec.Running() {
			out = append(out, cloneTurn(mt.rec))
		}
	}
	return out, nil
}

func (m *Store) DeleteEnded(_ context.Context, before time.Time) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for id, mt := range m.turns {
		if mt.rec.Running() || !mt.rec.EndedAt.Before(before) {
			continue
		}
		delete(m.turns, id)
		if r := mt.rec.RequestID; r != "" {
			m.byRequest[r] = slices.DeleteFunc(m.byRequest[r], func(x string) bool { return x == id })
			if len(m.byRequest[r]) == 0 {
				delete(m.byRequest, r)
			}
		}
		n++
	}
	return n, nil
}

func (m *Store) PutSession(_ context.Context, s store.Session) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s.Replica = "" // as a turn's: the store's to set, and none here
	m.sessions[s.ID] = cloneSession(s)
	return nil
}

func (m *Store) DeleteSession(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.sessions, id)
	return nil
}

func (m *Store) Session(_ context.Context, id string) (store.Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[id]
	if !ok {
		return store.Session{}, store.ErrNotFound
	}
	return cloneSession(s), nil
}

func (m *Store) Sessions(context.Context) ([]store.Session, error) {
	m.mu.Lock()
	out := make([]store.Session, 0, len(m.sessions))
	for _, s := range m.sessions {
		out = append(out, cloneSession(s))
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b store.Session) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

func (m *Store) Close() error { return nil }

// cloneSession copies s's map, so that neither the caller nor the store
// can change the other's record.
func cloneSession(s store.Session) store.Session {
	if len(s.ConfigOptions) == 0 {
		s.ConfigOptions = nil
	}
	s.ConfigOptions = maps.Clone(s.ConfigOptions)
	return s
}

func cloneTurn(t store.Turn) store.Turn {
	t.PromptHash = bytes.Clone(t.PromptHash)
	t.Terminal = bytes.Clone(t.Terminal)
	return t
}
