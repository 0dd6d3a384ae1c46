package store

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
)

// Memory is a Store in the process's memory: nothing survives the process.
// Its journals grow with their turns (bounded by the gateway's
// max_turn_bytes per turn) until retention deletes them.
type Memory struct {
	mu        sync.Mutex
	turns     map[string]*memTurn
	byRequest map[string][]string // request id → turn ids, by attempt
	sessions  map[string]Session
	outbox    map[string]*memNote // turn id → its pending notification
}

type memTurn struct {
	rec    Turn
	events []Event
}

// NewMemory returns an empty Memory store.
func NewMemory() *Memory {
	return &Memory{turns: make(map[string]*memTurn), byRequest: make(map[string][]string), sessions: make(map[string]Session), outbox: make(map[string]*memNote)}
}

var _ Store = (*Memory)(nil)

func (m *Memory) Begin(_ context.Context, t Turn) (Turn, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := m.turns[t.ID]; dup {
		return Turn{}, false, fmt.Errorf("memory store: turn %q exists already", t.ID)
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
	t.EndedAt, t.LastSeq, t.Reserved, t.Terminal, t.Replica = time.Time{}, 0, BeginReserved, nil, ""
	m.turns[t.ID] = &memTurn{rec: cloneTurn(t)}
	return Turn{}, true, nil
}

func (m *Memory) Started(_ context.Context, turnID, sessionID string, started Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	mt, err := m.running(turnID)
	if err != nil {
		return err
	}
	mt.rec.SessionID = sessionID
	return mt.reserve(mt.append([]Event{started}))
}

func (m *Memory) Append(_ context.Context, turnID string, events []Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	mt, err := m.running(turnID)
	if err != nil {
		return err
	}
	return mt.reserve(mt.append(events))
}

// reserve extends the reservation past the events just journaled, when
// err says they were (see Turn.Reserved).
func (mt *memTurn) reserve(err error) error {
	if err == nil {
		mt.rec.Reserved = mt.rec.LastSeq + ReserveAhead
	}
	return err
}

func (m *Memory) End(_ context.Context, turnID string, rest []Event, terminal Event, endedAt time.Time) error {
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
	if err := TerminalFits(terminal.Seq, last, mt.rec.Reserved, len(rest) == 0); err != nil {
		return fmt.Errorf("memory store: turn %q: %w", turnID, err)
	}
	if err := mt.append(rest); err != nil {
		return err
	}
	mt.events = append(mt.events, Event{Seq: terminal.Seq, Data: terminal.Bytes()})
	mt.rec.LastSeq = terminal.Seq
	mt.rec.EndedAt = endedAt
	mt.rec.Terminal = terminal.Bytes()
	if mt.rec.NotifyURL != "" {
		m.outbox[turnID] = &memNote{n: Notification{TurnID: turnID, URL: mt.rec.NotifyURL, CreatedAt: endedAt}, due: endedAt}
	}
	return nil
}

func (m *Memory) running(turnID string) (*memTurn, error) {
	mt, ok := m.turns[turnID]
	if !ok {
		return nil, ErrNotFound
	}
	if !mt.rec.Running() {
		return nil, ErrEnded
	}
	return mt, nil
}

// append checks the whole batch before journaling any of it: a batch with
// a bad seq in its middle must journal nothing, or the caller, told it
// failed, would resend events the journal already holds.
func (mt *memTurn) append(events []Event) error {
	for i, e := range events {
		if prev := mt.rec.LastSeq + uint64(i); e.Seq != prev+1 {
			return fmt.Errorf("memory store: turn %q: event seq %d does not follow %d", mt.rec.ID, e.Seq, prev)
		}
	}
	for _, e := range events {
		mt.events = append(mt.events, Event{Seq: e.Seq, Data: e.Bytes()})
	}
	mt.rec.LastSeq += uint64(len(events))
	return nil
}

func (m *Memory) Get(_ context.Context, turnID string) (Turn, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mt, ok := m.turns[turnID]
	if !ok {
		return Turn{}, ErrNotFound
	}
	return cloneTurn(mt.rec), nil
}

func (m *Memory) Owner(_ context.Context, turnID string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mt, ok := m.turns[turnID]
	if !ok {
		return "", ErrNotFound
	}
	return mt.rec.Owner, nil
}

func (m *Memory) Extent(_ context.Context, turnID string) (uint64, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mt, ok := m.turns[turnID]
	if !ok {
		return 0, false, ErrNotFound
	}
	return mt.rec.LastSeq, !mt.rec.Running(), nil
}

func (m *Memory) Latest(_ context.Context, requestID string) (Turn, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := m.byRequest[requestID]
	if requestID == "" || len(ids) == 0 {
		return Turn{}, ErrNotFound
	}
	return cloneTurn(m.turns[ids[len(ids)-1]].rec), nil
}

func (m *Memory) List(_ context.Context, f Filter, limit int, from *Position) ([]Turn, error) {
	m.mu.Lock()
	var all []Turn
	for _, mt := range m.turns {
		if (f.SessionID == "" || mt.rec.SessionID == f.SessionID) && (f.Agent == "" || mt.rec.Agent == f.Agent) && (f.Owner == nil || mt.rec.Owner == *f.Owner) {
			all = append(all, mt.rec)
		}
	}
	m.mu.Unlock()
	slices.SortFunc(all, func(a, b Turn) int { return -ComparePositions(PositionOf(a), PositionOf(b)) })
	var out []Turn
	for _, t := range all {
		if from != nil && ComparePositions(PositionOf(t), *from) >= 0 {
			continue
		}
		if len(out) == limit {
			break
		}
		out = append(out, cloneTurn(t))
	}
	return out, nil
}

func (m *Memory) Events(_ context.Context, turnID string, afterSeq uint64, limit, maxBytes int) ([]Event, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mt, ok := m.turns[turnID]
	if !ok {
		return nil, ErrNotFound
	}
	// Seqs run 1, 2, 3…, but a terminal may skip some (see End).
	from, _ := slices.BinarySearchFunc(mt.events, afterSeq+1, func(e Event, seq uint64) int { return cmp.Compare(e.Seq, seq) })
	end := min(len(mt.events), from+max(limit, 0))
	out := make([]Event, 0, end-from)
	size := 0
	for _, e := range mt.events[from:end] {
		if size += len(e.Data); len(out) > 0 && maxBytes > 0 && size > maxBytes {
			break
		}
		// The data too: a caller that reuses a returned buffer must not
		// rewrite the journal.
		out = append(out, Event{Seq: e.Seq, Data: bytes.Clone(e.Data)})
	}
	return out, nil
}

func (m *Memory) Running(context.Context) ([]Turn, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Turn
	for _, mt := range m.turns {
		if mt.rec.Running() {
			out = append(out, cloneTurn(mt.rec))
		}
	}
	return out, nil
}

func (m *Memory) DeleteEnded(_ context.Context, before time.Time) (int, error) {
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

func (m *Memory) PutSession(_ context.Context, s Session) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s.Replica = "" // as a turn's: the store's to set, and none here
	m.sessions[s.ID] = cloneSession(s)
	return nil
}

func (m *Memory) DeleteSession(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.sessions, id)
	return nil
}

func (m *Memory) Session(_ context.Context, id string) (Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[id]
	if !ok {
		return Session{}, ErrNotFound
	}
	return cloneSession(s), nil
}

func (m *Memory) Sessions(context.Context) ([]Session, error) {
	m.mu.Lock()
	out := make([]Session, 0, len(m.sessions))
	for _, s := range m.sessions {
		out = append(out, cloneSession(s))
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b Session) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

func (m *Memory) Close() error { return nil }

// cloneSession copies s's map, so that neither the caller nor the store
// can change the other's record.
func cloneSession(s Session) Session {
	if len(s.ConfigOptions) == 0 {
		s.ConfigOptions = nil
	}
	s.ConfigOptions = maps.Clone(s.ConfigOptions)
	return s
}

func cloneTurn(t Turn) Turn {
	t.PromptHash = bytes.Clone(t.PromptHash)
	t.Terminal = bytes.Clone(t.Terminal)
	return t
}
