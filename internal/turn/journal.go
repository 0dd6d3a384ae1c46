package turn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/metrics"
	"github.com/acpgate/acpgate/internal/store"
	"github.com/acpgate/acpgate/internal/turn/wire"
)

// Bounds of a journal's memory.
const (
	// commitDelay is how long an event may wait to be written to the
	// store: chunks are durable within this of being sent.
	commitDelay = 50 * time.Millisecond
	// recentEvents and recentBytes bound the committed events a journal
	// keeps in memory for watchers that are close behind; older ones are
	// read back from the store.
	recentEvents = 1024
	recentBytes  = 2 << 20
	// maxUncommitted and maxUncommittedBytes bound the events waiting for
	// the store; beyond them the turn waits for the store (a disk slower
	// than the agent slows the agent, as a full pipe does). A commit
	// starts as soon as they are reached, without waiting commitDelay, so
	// they bound memory, not throughput.
	maxUncommitted      = 8192
	maxUncommittedBytes = 4 << 20
)

// Journal is a running turn's events on their way to the store and to
// every stream that follows the turn.
//
// The turn's pump appends events: numbered, stamped and encoded once, so
// every stream and every replay carries the same bytes. Streams read from
// the journal at their own pace, never holding the turn back: the recent
// events are in memory, older ones in the store. Events are written to the
// store behind, in batches, within commitDelay, by the gateway's committer
// with every other running turn's (see Committer); the turn's
// started event and its terminal are written before anyone can read them,
// so a client that saw either can count on the store having it.
//
// A seq, once sent, names the same event for good. An event read before
// the store has it could be lost in a crash, so each write to the store
// also reserves seqs ahead (store.ReserveAhead), and no stream reads an
// event above the reservation: a turn ended after a crash, or after its
// journal failed, has its terminal numbered above it, past every seq a
// client may have seen. The reservation is extended by the writes the
// journal makes anyway, far ahead of what the turn reaches, so streams
// never wait for it.
type Journal struct {
	id     string
	st     store.Store
	c      *Committer // writes the events to st behind the turn
	log    *slog.Logger
	cancel func(cause string) // cancels the turn
	m      *metrics.Agent     // nil without metrics

	mu        sync.Mutex
	recent    []store.Event // the latest events, seqs contiguous (but for a terminal above the reservation, see end), the last is lastSeq
	lastSeq   uint64
	committed uint64 // events up to this seq are in the store
	reserved  uint64 // the store's reservation: no stream reads an event above it
	pending   int    // the bytes of the events after committed
	ended     bool   // the terminal is journaled
	// unrecorded is the terminal, encoded, when the store could not take
	// it: the turn ended at endedAt, but its record says it runs.
	unrecorded []byte
	endedAt    time.Time
	changed    chan struct{} // closed when events are added, then replaced
	wrote      chan struct{} // signalled when a commit finishes
	failed     error         // the store's first failure
	// queued is set while the committer has the journal to write (its
	// events after committed), writing while the committer is writing
	// them; detached once End has taken the journal from the committer.
	queued, writing, detached bool
	// refused, when set, is called before a terminal the store did not
	// take is delivered from memory (see OnRefused).
	refused func()
}

// NewJournal starts the journal of turn id, written to c's store by c;
// cancel cancels the turn when the journal cannot be written. End takes it
// from the committer.
func NewJournal(id string, c *Committer, log *slog.Logger, m *metrics.Agent, cancel func(cause string)) *Journal {
	return &Journal{
		id:     id,
		m:      m,
		st:     c.st,
		c:      c,
		log:    log,
		cancel: cancel,
		// The store's Begin has reserved the started event's seq.
		reserved: store.BeginReserved,
		changed:  make(chan struct{}),
		wrote:    make(chan struct{}, 1),
	}
}

// Append journals events that follow lastSeq. It waits while too many
// events wait for the store.
func (j *Journal) Append(events []store.Event) {
	j.mu.Lock()
	for (j.lastSeq-j.committed >= maxUncommitted || j.pending >= maxUncommittedBytes) && j.failed == nil {
		j.mu.Unlock()
		// The journal is queued: its events after committed are.
		j.c.hurry()
		<-j.wrote
		j.mu.Lock()
	}
	j.recent = append(j.recent, events...)
	j.lastSeq = events[len(events)-1].Seq
	for _, e := range events {
		j.pending += e.Len()
	}
	j.broadcast()
	queue := !j.queued
	j.queued = true
	j.mu.Unlock()
	if queue {
		j.c.add(j)
	}
}

// Start journals the turn's started event, seq 1, and the session it runs
// in, before any stream can read it. When the store refuses it, the turn
// is cancelled and stays readable from memory, as when a batch fails: the
// started event is still the first a stream reads.
func (j *Journal) Start(ctx context.Context, sessionID string, started store.Event) error {
	began := time.Now()
	err := j.st.Started(ctx, j.id, sessionID, started)
	j.noteWrite(began, started.Len())
	j.mu.Lock()
	j.recent = append(j.recent, started)
	j.lastSeq = started.Seq
	if err == nil {
		j.committed, j.reserved = started.Seq, started.Seq+store.ReserveAhead
	} else {
		j.failed = fmt.Errorf("journaling the turn's start: %w", err)
		err = j.failed
	}
	j.broadcast()
	j.mu.Unlock()
	if err != nil {
		j.cancel("the gateway could not write the turn's journal")
	}
	return err
}

// OnRefused sets f to be called before a terminal the store did not take
// is delivered from memory: with several replicas, the store's ending is
// the one everyone gets, so the gateway hands the turn off instead. Call
// it before the turn runs.
func (j *Journal) OnRefused(f func()) { j.refused = f }

// ID is the turn's id.
func (j *Journal) ID() string { return j.id }

// LastVisible is the last seq a stream may read now (see visible).
func (j *Journal) LastVisible() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.visible()
}

// noteWrite records a write of size bytes of events to the store that
// began at began.
func (j *Journal) noteWrite(began time.Time, size int) {
	if j.m != nil {
		j.m.JournalWrite(time.Since(began), size)
	}
}

// eventsLen is the length of the events' encodings.
func eventsLen(events []store.Event) int {
	size := 0
	for _, e := range events {
		size += e.Len()
	}
	return size
}

// broadcast wakes the streams waiting for events; j.mu is held.
func (j *Journal) broadcast() {
	close(j.changed)
	j.changed = make(chan struct{})
}

// Failure is the store's first failure, or nil.
func (j *Journal) Failure() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.failed
}

// Next returns the seq the next event gets.
func (j *Journal) Next() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.lastSeq + 1
}

// take returns the events the store does not have yet, for the committer
// to write, and marks them being written; none when the journal has
// failed, has nothing to write, or End has taken it from the committer,
// which then no longer has it queued.
func (j *Journal) take() []store.Event {
	j.mu.Lock()
	defer j.mu.Unlock()
	// Not uncommitted() first: once a failed journal has ended, its
	// recent events and lastSeq no longer follow committed.
	if j.failed != nil || j.detached {
		j.queued = false
		return nil
	}
	pending := j.uncommitted()
	if len(pending) == 0 {
		j.queued = false
		return nil
	}
	j.writing = true
	return pending
}

// written ends the committer's write of pending (from take), begun at
// began, with the store's answer err. It reports whether the journal has
// more events to write, and so stays queued.
func (j *Journal) written(pending []store.Event, err error, began time.Time) (more bool) {
	j.noteWrite(began, eventsLen(pending))
	j.mu.Lock()
	j.writing = false
	if err != nil {
		j.failed = fmt.Errorf("journaling events %d to %d: %w", pending[0].Seq, pending[len(pending)-1].Seq, err)
		err = j.failed
	} else {
		j.committed = pending[len(pending)-1].Seq
		j.reserved = j.committed + store.ReserveAhead
		for _, e := range pending {
			j.pending -= e.Len()
		}
		j.trim()
	}
	more = err == nil && !j.detached && j.lastSeq > j.committed
	j.queued = more
	j.mu.Unlock()
	signal(j.wrote)
	if err != nil {
		j.log.Error("the turn's journal could not be written; cancelling the turn", "turn", j.id, "err", err)
		j.cancel("the gateway could not write the turn's journal")
	}
	return more
}

// uncommitted is the events the store does not have yet, the tail of
// recent (trim keeps them); j.mu is held. They are read outside j.mu by
// the one goroutine writing them to the store: an event's bytes are not
// written after it is encoded, and recent changes only under j.mu (a
// trim makes a new slice).
func (j *Journal) uncommitted() []store.Event {
	n := int(j.lastSeq - j.committed)
	if n <= 0 {
		return nil
	}
	return j.recent[len(j.recent)-n:]
}

// trim drops committed events once the recent ones pass their bounds,
// keeping half of what the bounds allow; j.mu is held.
//
// Why half: a trim copies the kept events into a new slice, since streams
// may still read the old one outside j.mu. Trimming to the bounds
// themselves made that copy on every commit of a long turn, up to
// recentEvents events (80 KB) each time, and at 20 commits a second its
// garbage brought collection cycles often enough to show in the latency of
// a paced turn. Trimming to half makes one copy every recentEvents/2
// events at most.
func (j *Journal) trim() {
	if len(j.recent) <= recentEvents && eventsLen(j.recent) <= recentBytes {
		return
	}
	keep, size := 0, 0
	for i := len(j.recent) - 1; i >= 0; i-- {
		if j.recent[i].Seq <= j.committed && (keep >= recentEvents/2 || size > recentBytes/2) {
			break
		}
		keep++
		size += j.recent[i].Len()
	}
	// Room for the events until the next trim, so that appending them
	// does not grow the slice again.
	kept := make([]store.Event, keep, keep+recentEvents/2+1)
	copy(kept, j.recent[len(j.recent)-keep:])
	j.recent = kept
}

// End journals the terminal e, numbered seq, with p its outcome's text and
// final message when they are in pieces: the events the store does not
// have yet and then it are written in one step, before any stream can read
// it. It returns the terminal as journaled.
//
// When the store has failed, or fails now, the terminal is failed(err, e)
// instead (or failed(err, nil), without e's partial answer, when the store
// refuses that), numbered above the reservation and recorded alone: the
// events the store lacks are lost, and a seq a client may have seen must
// not name another event (see journal). The streams get what the record
// holds. When the store refuses even that, the terminal is kept in memory
// (unrecorded): streams still end with it, and the turn reads as ended
// (see the gateway's recorded).
//
// The journal is taken from the committer first (a write of its events
// under way is waited for), not given one last batch: a short turn (a
// burst of chunks well inside commitDelay) has all its events still
// unwritten here, and a batch and then the terminal would be two writes,
// one after the other, between the agent's last word and the client's
// terminal.
func (j *Journal) End(e *acpgatev1.PromptEvent, p wire.Pieces, seq uint64, failed func(error, *acpgatev1.PromptEvent) *acpgatev1.PromptEvent) store.Event {
	j.mu.Lock()
	j.detached = true
	for j.writing {
		j.mu.Unlock()
		<-j.wrote
		j.mu.Lock()
	}
	err, rest := j.failed, j.uncommitted()
	j.mu.Unlock()
	var terminal store.Event
	var unrecorded []byte
	if err == nil {
		terminal = wire.EncodeTerminal(e, seq, p)
		began := time.Now()
		if err = j.st.End(context.Background(), j.id, rest, terminal, began); err != nil {
			err = fmt.Errorf("journaling the turn's last events and terminal: %w", err)
			j.log.Error("the turn's last events and terminal could not be journaled; ending it without them", "turn", j.id, "err", err)
		}
		j.noteWrite(began, eventsLen(rest)+terminal.Len())
	}
	if err != nil {
		j.mu.Lock()
		if j.failed == nil {
			j.failed = err
		}
		// Only events up to the reservation were read; the others go.
		for len(j.recent) > 0 && j.recent[len(j.recent)-1].Seq > j.reserved {
			j.recent = j.recent[:len(j.recent)-1]
		}
		seq = store.FailedSeq(j.reserved)
		j.mu.Unlock()
		// With what the agent had answered, and else without it: a
		// partial answer of megabytes may be what the store cannot take.
		for _, from := range []*acpgatev1.PromptEvent{e, nil} {
			terminal = wire.Encode(failed(err, from), seq)
			began := time.Now()
			recErr := j.st.End(context.Background(), j.id, nil, terminal, began)
			j.noteWrite(began, terminal.Len())
			if recErr == nil {
				unrecorded = nil
				break
			}
			j.log.Error("the turn's terminal could not be recorded; the turn's request_id may run again", "turn", j.id, "err", recErr)
			unrecorded = terminal.Bytes()
		}
	}
	if unrecorded != nil && j.refused != nil {
		// Not even the failure's terminal is in the store: with several
		// replicas, the store's ending is the one everyone gets (handOff).
		j.refused()
	}
	j.mu.Lock()
	j.unrecorded, j.endedAt = unrecorded, time.Now()
	j.recent = append(j.recent, terminal)
	j.lastSeq = terminal.Seq
	if j.failed == nil {
		j.committed, j.pending = terminal.Seq, 0
	}
	j.ended = true
	j.broadcast()
	j.mu.Unlock()
	return terminal
}

// Recorded reports whether the store holds the turn's ending (or it
// runs), and, when it does not, the terminal the streams got and when.
func (j *Journal) Recorded() (ok bool, terminal []byte, endedAt time.Time) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.unrecorded == nil, j.unrecorded, j.endedAt
}

// RecordLate writes the terminal the store refused when the turn ended
// (see end), and reports whether the record is now settled: the store took
// it, or the turn is no longer the store's to end (ended by another, or
// gone), so that nothing is left to retry. Its one caller at a time is
// the gateway's janitor, or Close once the janitor has stopped.
func (j *Journal) RecordLate(ctx context.Context) bool {
	j.mu.Lock()
	data, seq, endedAt := j.unrecorded, j.lastSeq, j.endedAt
	j.mu.Unlock()
	if data == nil {
		return false
	}
	err := j.st.End(ctx, j.id, nil, store.Event{Seq: seq, Data: data}, endedAt)
	if err != nil && !errors.Is(err, store.ErrEnded) && !errors.Is(err, store.ErrNotFound) {
		return false
	}
	j.mu.Lock()
	j.unrecorded = nil
	j.mu.Unlock()
	if err == nil {
		j.log.Info("the turn's terminal, which the store had refused, is recorded", "turn", j.id, "seq", seq)
	}
	return true
}

// visible is the last seq a stream may read: the terminal once the turn
// has ended, else the last event up to the reservation; j.mu is held.
func (j *Journal) visible() uint64 {
	if j.ended {
		return j.lastSeq
	}
	return min(j.lastSeq, j.reserved)
}

// read returns up to max events after seq from memory, and a channel
// closed when more arrive. inMemory is false when events after seq have
// already left memory: read them from the store. last is the last seq a
// stream may read now, and ended reports that it is the terminal's.
func (j *Journal) read(after uint64, max int) (events []store.Event, more <-chan struct{}, inMemory bool, last uint64, ended bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	last = j.visible()
	if after >= last {
		return nil, j.changed, true, last, j.ended
	}
	if len(j.recent) == 0 || after+1 < j.recent[0].Seq {
		return nil, j.changed, false, last, j.ended
	}
	// recent's seqs follow one another, but for a terminal numbered
	// above the reservation (see end).
	i := min(int(after+1-j.recent[0].Seq), len(j.recent)-1)
	n := min(max, len(j.recent)-i, int(last-j.recent[i].Seq+1))
	return j.recent[i : i+n : i+n], j.changed, true, last, j.ended
}
