// Package store keeps acpgate's durable turns: each turn's record and the
// journal of the events its stream carried, so that a turn outlives the
// stream that started it and, with a persistent store, the gateway process;
// and the records of open sessions, so that a session can be re-opened
// after the gateway restarts.
//
// The gateway numbers and encodes events itself; a store keeps them as
// opaque bytes in seq order, which is what makes a replay byte-identical to
// what a live stream carried. Three implementations, each a package of its
// own: memory (nothing survives the process), sqlite (one file, the
// default) and postgres (a database several gateway replicas share; see
// Cluster). This package holds no backend: the interface, its types and
// errors, and what every backend shares (TerminalFits, SortNotifications,
// the SQL backends' column encodings). The interface is small so that the
// shared database fits behind it without changing callers; storetest
// holds the one test suite every implementation passes.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Turn is a turn's record.
type Turn struct {
	// ID is the turn's id, unique across every gateway run.
	ID string
	// RequestID is the client's idempotency key; "" when it gave none.
	RequestID string
	// Attempt counts the turns of one RequestID: 1, then 2 for the
	// resubmission after a retryable ending, and so on. 1 without one.
	Attempt uint32
	// Agent is the configured agent name.
	Agent string
	// SessionID is the session the turn ran in; "" until it is known.
	SessionID string
	// Target is what RequestID is bound to, as the gateway words it
	// ("agent:NAME" or "session:ID").
	Target string
	// PromptHash identifies the prompt content RequestID is bound to.
	PromptHash []byte
	// Owner names the caller that started the turn; "" for an
	// unauthenticated one.
	Owner string
	// StartedAt is when the turn started.
	StartedAt time.Time
	// EndedAt is when it ended; zero while it runs.
	EndedAt time.Time
	// LastSeq is the seq of the last journaled event.
	LastSeq uint64
	// Reserved is the highest seq the gateway may have sent while the
	// turn ran: each Started and Append reserves ReserveAhead seqs past
	// its last event, in the same write, and the gateway sends no event
	// above the reservation. A turn ended without its gateway (it was
	// killed, or its replica lost) is numbered above it (StoppedSeq), so
	// that no seq a client saw names another event afterwards.
	Reserved uint64
	// Terminal is the terminal event, encoded; nil while the turn runs.
	Terminal []byte
	// NotifyURL is where the turn's ending is announced (see Outbox): the
	// turn's End writes a Notification for it in the same step, so that
	// the announcement is kept exactly when the ending is. "" for none.
	NotifyURL string
	// Replica is the replica that runs the turn, in a store shared by
	// several (see Cluster); "" otherwise. Set by the store at Begin:
	// what a caller gives is not kept, so a store acting for no replica
	// (memory, sqlite, postgres before Join) always records "".
	Replica string
}

// Running reports whether the turn has not ended.
func (t Turn) Running() bool { return t.EndedAt.IsZero() }

// BeginReserved is the reservation of a turn Begin records: its started
// event, seq 1, which a stream reads as soon as the store has taken or
// refused it (a turn whose start the store refused still starts with it).
const BeginReserved = 1

// ReserveAhead is how many seqs past its last event each Started and
// Append reserves (see Turn.Reserved). The gateway keeps at most a few
// thousand events waiting for the store, so a reservation this far ahead
// is extended long before a running turn reaches it, and sending never
// waits for it; after a crash the turn's seqs skip at most this many.
const ReserveAhead = 1 << 16

// StoppedSeq is the seq of the terminal of a turn ended without its
// gateway: above every seq the gateway may have sent. That includes the
// seq just above the reservation, which a gateway whose journal failed
// gives its own terminal (see FailedSeq) and may have sent when the store
// took nothing more, so that a turn ended twice that way still has no seq
// that names two events.
func (t Turn) StoppedSeq() uint64 { return FailedSeq(max(t.LastSeq, t.Reserved)) + 1 }

// FailedSeq is the seq of the terminal the gateway gives a turn whose
// journal failed, reserved being its reservation: above every seq it may
// have sent.
func FailedSeq(reserved uint64) uint64 { return reserved + 1 }

// TerminalFits checks a terminal's seq against the last journaled event,
// last, and the turn's reservation: it follows last, or, alone (alone:
// no events come with it), is numbered above the reservation. It is End's
// rule, which every backend checks before it writes anything.
func TerminalFits(seq, last, reserved uint64, alone bool) error {
	if seq == last+1 || (alone && seq > last && seq > reserved) {
		return nil
	}
	return fmt.Errorf("the terminal's seq %d neither follows %d nor, alone, is above the reserved %d", seq, last, reserved)
}

// Event is one journaled event: its seq and its encoding.
type Event struct {
	Seq  uint64
	Data []byte
	// More continues Data: the encoding is Data followed by each of More.
	// The gateway hands a completed turn's terminal over in pieces, some
	// of them the answer's own memory, because the terminal repeats the
	// answer (twice for a one-message turn) and one contiguous encoding of
	// a 156 MiB answer is 312 MiB more. A store keeps the concatenation,
	// never the pieces (which it must not write to). The events it returns
	// may be in pieces too (a store that keeps an Echo once returns it as
	// a piece of what it read, not a copy), and the pieces are the
	// caller's.
	More [][]byte
	// Echo, when its Len is not zero, says that part of the encoding
	// repeats an earlier part. A store may keep those bytes once; what it
	// returns is always the whole encoding.
	Echo Echo
}

// Echo is a repeated part of an event's encoding: the Len bytes at offset
// At are those at offset From, which end at or before At.
//
// A text chunk's event carries its text twice (`text`, and again in
// `content`), and a completed turn's outcome its answer twice (`text`, and
// `final_message`, its tail): journaled as they are, a flood of 64 KiB
// chunks wrote 132 KB to disk per chunk, and writing was half of the
// gateway's CPU. The gateway knows where the copies are, since it put
// them there; a store that keeps bytes rather than messages is told.
type Echo struct {
	From, At, Len int
}

// Valid reports whether e describes a repeat inside an encoding of n
// bytes.
func (e Echo) Valid(n int) bool {
	return e.Len > 0 && e.From >= 0 && e.From+e.Len <= e.At && e.At+e.Len <= n
}

// Len is the length of the event's encoding.
func (e Event) Len() int {
	n := len(e.Data)
	for _, p := range e.More {
		n += len(p)
	}
	return n
}

// Pieces is the event's encoding as Data and More, without empty pieces.
func (e Event) Pieces() [][]byte {
	return e.AppendPieces(make([][]byte, 0, 1+len(e.More)))
}

// AppendPieces appends the event's non-empty pieces to bufs: Pieces
// without a slice of its own, for a writer that gathers many events'.
func (e Event) AppendPieces(bufs [][]byte) [][]byte {
	if len(e.Data) > 0 {
		bufs = append(bufs, e.Data)
	}
	for _, p := range e.More {
		if len(p) > 0 {
			bufs = append(bufs, p)
		}
	}
	return bufs
}

// Flat is the event's encoding in one piece: Data itself when More is
// empty, else a copy of the pieces joined.
func (e Event) Flat() []byte {
	if len(e.More) == 0 {
		return e.Data
	}
	return e.Bytes()
}

// Bytes is the event's encoding in one piece, which the caller may keep:
// a copy, even of an event in one piece.
func (e Event) Bytes() []byte {
	out := make([]byte, 0, e.Len())
	out = append(out, e.Data...)
	for _, p := range e.More {
		out = append(out, p...)
	}
	return out
}

// Filter selects turns for List; empty fields select everything.
type Filter struct {
	SessionID string
	Agent     string
	// Owner, when not nil, selects the turns of that owner only.
	Owner *string
}

// Position is where a page of List starts: after the turn that started at
// StartedAt with id ID, in List's order.
type Position struct {
	StartedAt time.Time
	ID        string
}

// Errors a Store reports.
var (
	// ErrNotFound: no such turn (or it is past its retention).
	ErrNotFound = errors.New("no such turn")
	// ErrEnded: the turn has ended; its journal takes no more events.
	ErrEnded = errors.New("the turn has ended")
)

// Store keeps turns and their journals. Its methods are safe for
// concurrent use. Errors other than the ones above carry the store's own
// context (its path, the operation).
type Store interface {
	// Begin records t as a new running turn, unless t.RequestID is set
	// and a turn with that RequestID and an attempt of t.Attempt or later
	// exists: then it records nothing and returns the latest attempt of
	// that RequestID with created false. The check and the insert are one
	// atomic step, so two concurrent submissions of one key start one
	// turn.
	Begin(ctx context.Context, t Turn) (existing Turn, created bool, err error)
	// Started journals the turn's first event (seq 1, `started`) and sets
	// its SessionID.
	Started(ctx context.Context, turnID, sessionID string, started Event) error
	// Append journals events of a running turn, in seq order, each seq
	// following the last journaled one.
	Append(ctx context.Context, turnID string, events []Event) error
	// End journals rest, events of the turn not journaled yet (often
	// none), then the terminal event, and marks the turn ended at endedAt.
	// The terminal follows the last event; or, when rest is empty, it may
	// be numbered above the turn's reservation, skipping the seqs between
	// (the ending of a turn whose gateway may have sent events the store
	// does not have: it stopped, or its journal failed). End is one step,
	// so that a turn's last events and its ending are kept
	// together or not at all, and a short turn's ending waits for one
	// write, not two (a burst of 1,000 chunks fits in the time between
	// batches, so all of it is still unwritten when the turn ends).
	End(ctx context.Context, turnID string, rest []Event, terminal Event, endedAt time.Time) error
	// Get returns a turn's record.
	Get(ctx context.Context, turnID string) (Turn, error)
	// Extent returns how far a turn's journal goes: the seq of its last
	// event and whether that is the terminal (the turn has ended). It is
	// what a stream following a turn asks before each page, and unlike
	// Get it does not read the terminal, which for a completed turn
	// repeats the whole answer (twice): a slow reader of a 156 MiB answer
	// that asked Get read 312 MiB per page.
	Extent(ctx context.Context, turnID string) (lastSeq uint64, ended bool, err error)
	// Owner returns who started a turn (Turn.Owner). Like Extent it does
	// not read the terminal: WatchTurn, which checks its caller with it,
	// read a completed turn's whole answer (three copies of it) per call
	// when it asked Get, and 64 watchers joining a turn with a 32 MiB
	// answer took the gateway past 400 MiB.
	Owner(ctx context.Context, turnID string) (string, error)
	// Latest returns the latest attempt of the turns with requestID, or
	// ErrNotFound.
	Latest(ctx context.Context, requestID string) (Turn, error)
	// List returns up to limit turns matching f, newest first (by
	// StartedAt, then by ID), starting after from when it is not nil.
	List(ctx context.Context, f Filter, limit int, from *Position) ([]Turn, error)
	// Events returns up to limit journaled events of a turn with seq
	// greater than afterSeq, in order. When maxBytes is positive, the
	// events after the first stop before their data would pass maxBytes
	// in total: a reader of large events holds a bounded page, and still
	// gets one event, however large.
	Events(ctx context.Context, turnID string, afterSeq uint64, limit, maxBytes int) ([]Event, error)
	// Running returns every turn that has not ended.
	Running(ctx context.Context) ([]Turn, error)
	// DeleteEnded deletes the turns that ended before t, journals and all,
	// and returns how many.
	DeleteEnded(ctx context.Context, before time.Time) (int, error)
	// Sessions keeps the records of open sessions, so that they survive
	// the gateway with a persistent store.
	Sessions
	// Outbox keeps the announcements of turns' endings not yet delivered.
	Outbox
	// Close releases the store.
	Close() error
}

// Session is an open session's record, kept so that the session can be
// re-opened (ACP session/resume or session/load) after the gateway that
// opened it has stopped. Only sessions in a configured workspace are
// recorded: a temporary directory does not outlive its gateway.
type Session struct {
	// ID is the id clients address the session by (Session.id).
	ID string
	// Agent is the configured agent name.
	Agent string
	// ACPSessionID is the id the agent minted, which session/resume and
	// session/load take.
	ACPSessionID string
	// Cwd is the session's working directory relative to the agent's
	// workspace ("." for the workspace itself), so that a workspace moved
	// between runs still resolves.
	Cwd string
	// Owner names the principal that created the session; "" for an
	// unauthenticated one.
	Owner string
	// CreatedAt is when the session was first opened.
	CreatedAt time.Time
	// Mode is the session mode set on it, re-applied after re-opening; ""
	// when none was set.
	Mode string
	// ConfigOptions are the session configuration options set on it (by
	// option id), re-applied after re-opening; empty when none were set.
	ConfigOptions map[string]string
	// SuspendedAt is when the session was suspended (its agent went away
	// while it was idle, or the gateway found it recorded at start);
	// zero while it is open. A suspended session's retention counts from
	// it, so that a record nobody re-opens is ended in time rather than
	// kept forever.
	SuspendedAt time.Time
	// Replica is the replica whose agent process serves the session, in
	// a store shared by several (see Cluster): set by the store at
	// PutSession, "" once released. What a caller gives is not kept: a
	// store of one gateway (acting for no replica) always records "".
	Replica string
}

// Sessions keeps the records of open sessions. Its methods are safe for
// concurrent use.
type Sessions interface {
	// PutSession records s, replacing the record with its ID if any.
	PutSession(ctx context.Context, s Session) error
	// DeleteSession deletes the record of session id; deleting one that
	// does not exist is not an error.
	DeleteSession(ctx context.Context, id string) error
	// Sessions returns every recorded session, oldest first (by
	// CreatedAt, then by ID).
	Sessions(ctx context.Context) ([]Session, error)
	// Session returns the record of session id, or ErrNotFound: one
	// lookup, for the replica that must find a session's owner on every
	// call about it.
	Session(ctx context.Context, id string) (Session, error)
}
