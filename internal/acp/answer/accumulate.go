package answer

import (
	"slices"
	"strings"

	"github.com/acpgate/acpgate/internal/acp/translate"
	"github.com/acpgate/acpgate/outcome"
)

// Accumulator reassembles the agent's streamed answer into messages.
//
// ACP streams an answer as agent_message_chunk updates and says nothing
// about where one message ends, except through messageId when the agent
// sends one. The rules:
//   - chunks with the same messageId form one message; a changed messageId
//     (including to or from none) starts a new one;
//   - without messageId, a message runs until the agent turns to tools
//     (tool_call, tool_call_update, a permission request) or the turn ends;
//   - thoughts, plans, usage and other informational updates do not split a
//     message, since they are commentary on the same answer;
//   - only text content counts as text; a message with no text is not a
//     message, so no empty entry is ever joined into the result.
//
// Long chunks are kept as their own strings and short ones copied into
// runs of at most runBytes, and the text is joined once, when the turn
// ends, if at all (see Finish): appending to one growing buffer would copy
// the answer again at every doubling, which for a long answer was the
// largest single cost of a turn.
//
// With a limit, only the chunks that start within the first limit bytes of
// the joined text are kept; the rest are counted. That is for a client that
// assembles the answer itself (the outcome then omits the text): the
// gateway holds a bounded beginning of the answer — all a failure's partial
// output needs — instead of all of it.
//
// Without a limit, the kept text is reserved from a budget shared by the
// gateway's turns, in steps of reserveStep. When a reservation fails,
// or when Bound is called (nobody will read the whole text), the
// accumulator takes the limit keep from then on, drops the chunks it would
// not have kept under that limit from the start, and returns its
// reservation: it ends exactly as an accumulator limited from the start.
//
// It is not safe for concurrent use: a turn holds it under its own lock.
// The zero value keeps the whole text, unbounded.
type Accumulator struct {
	limit   int       // keep chunks starting before this offset; 0: keep all
	done    []message // completed messages with text
	current message
	id      string
	open    bool
	size    int // the joined text's length so far, separators included

	keep       int     // the limit bound takes
	budget     *Budget // reserved from while there is no limit
	reserved   int64   // held from budget
	overBudget bool    // a reservation failed, so the limit was taken
}

// Limited returns an accumulator that keeps only the chunks that start
// within the first limit bytes of the joined text, for a turn whose
// outcome will not carry the text.
func Limited(limit int) Accumulator { return Accumulator{limit: limit} }

// Budgeted returns an accumulator that keeps the whole text while budget
// (nil: unbounded) has room for it, and then becomes Limited(keep), as
// though it had been from the start.
func Budgeted(budget *Budget, keep int) Accumulator {
	return Accumulator{budget: budget, keep: keep}
}

// OverBudget reports whether a reservation failed, so the text was not
// kept whole for want of room in the budget.
func (a *Accumulator) OverBudget() bool { return a.overBudget }

// message is one message's text: its long chunks as they came, and its
// short chunks in runs (see add).
type message struct {
	parts  []part
	run    []byte   // the open run of short chunks, not yet a part
	starts []uint32 // where each chunk of the open run starts in it
	size   int
	cut    bool // a chunk of it was counted, not kept
}

// part is a piece of a message's kept text: one long chunk (starts nil),
// or a run of short chunks copied together, with where each one starts,
// so that a bound imposed midway can still drop them one by one.
type part struct {
	text   string
	starts []uint32
}

// runBytes bounds a run of short chunks.
//
// A short chunk kept as its own string cost the collector as much as a
// long one: a 64 B answer at 100,000 chunks/s kept 300,000 strings in
// three seconds (83 B of live heap each), and every collection marked all
// of them while the answer grew, so the default turn's collections took
// 5 – 30 ms where a turn that kept nothing took 1 – 2 ms, and the agent's
// reader waited behind them. Copied into runs, the kept text is a few
// buffers with no pointers in them, which the collector does not scan,
// and the copy is a few bytes a chunk. A run is at most 64 KiB, so the
// buffer it grows in wastes little.
const runBytes = 64 << 10

// add keeps a chunk's text: a long chunk as its own string, a short one
// copied onto the open run.
func (m *message) add(text string) {
	if len(text) >= ownPiece {
		m.seal()
		m.parts = append(m.parts, part{text: text})
		return
	}
	if len(m.run)+len(text) > runBytes {
		m.seal()
	}
	m.starts = append(m.starts, uint32(len(m.run)))
	m.run = append(m.run, text...)
}

// seal makes the open run, if any, a part, and keeps its buffer for the
// next one.
func (m *message) seal() {
	if len(m.run) == 0 {
		return
	}
	m.parts = append(m.parts, part{text: string(m.run), starts: slices.Clone(m.starts)})
	m.run, m.starts = m.run[:0], m.starts[:0]
}

// Add adds a message chunk of the answer.
func (a *Accumulator) Add(c translate.Chunk) {
	if a.open && c.MessageID != a.id {
		a.Split()
	}
	if !a.open {
		a.open, a.id = true, c.MessageID
	}
	if !c.IsText || c.Text == "" {
		return
	}
	if a.current.size == 0 && len(a.done) > 0 {
		a.size += len(messageSeparator)
	}
	if a.budget != nil && a.limit == 0 && int64(a.size+len(c.Text)) > a.reserved {
		a.reserve(a.size + len(c.Text))
	}
	if a.limit == 0 || a.size < a.limit {
		a.current.add(c.Text)
	} else {
		a.current.cut = true
	}
	a.current.size += len(c.Text)
	a.size += len(c.Text)
}

// reserve grows the reservation to cover size bytes of kept text, rounded
// up to a step; when the budget has no room, the accumulator takes its
// limit instead.
func (a *Accumulator) reserve(size int) {
	need := (int64(size) - a.reserved + reserveStep - 1) / reserveStep * reserveStep
	if a.budget.reserve(need) {
		a.reserved += need
		return
	}
	a.overBudget = true
	a.Bound()
}

// Bound makes the accumulator keep only the beginning its limit keep lets
// it keep, as though it had had that limit from the start, and returns its
// reservation. An accumulator that has a limit already keeps it.
func (a *Accumulator) Bound() {
	a.releaseReservation()
	if a.limit != 0 {
		return
	}
	a.limit = max(a.keep, 1)
	offset := 0
	for i := range a.done {
		if i > 0 {
			offset += len(messageSeparator)
		}
		offset = a.done[i].trim(offset, a.limit)
	}
	if a.current.size > 0 {
		if len(a.done) > 0 {
			offset += len(messageSeparator)
		}
		a.current.trim(offset, a.limit)
	}
}

// releaseReservation returns what the accumulator holds from its budget.
func (a *Accumulator) releaseReservation() {
	a.budget.release(a.reserved)
	a.reserved = 0
}

// trim drops the message's chunks that start at or past limit in the
// joined text, the message starting at start, and returns where it ends.
func (m *message) trim(start, limit int) (end int) {
	m.seal()
	offset := start
	for i, p := range m.parts {
		if offset >= limit {
			m.drop(i)
			break
		}
		if offset+len(p.text) > limit {
			// A run that goes past the limit keeps the chunks that
			// start before it, copied so that the rest can be freed
			// (a long chunk, starts nil, is one that does).
			if k := chunksBefore(p.starts, limit-offset); k < len(p.starts) {
				m.parts[i] = part{text: strings.Clone(p.text[:p.starts[k]]), starts: p.starts[:k]}
				m.drop(i + 1)
				break
			}
		}
		offset += len(p.text)
	}
	return start + m.size
}

// drop drops the parts from i on.
func (m *message) drop(i int) {
	clear(m.parts[i:]) // unreferenced, so that the chunks can be freed
	m.parts, m.cut = m.parts[:i], true
}

// chunksBefore is how many of a run's chunks, starting at starts, start
// before offset, an offset inside the part (so it fits a uint32).
func chunksBefore(starts []uint32, offset int) int {
	k, _ := slices.BinarySearch(starts, uint32(offset))
	return k
}

// Split ends the current message, if any: the agent turned to tools.
func (a *Accumulator) Split() {
	if !a.open {
		return
	}
	a.open = false
	a.current.seal()
	run, starts := a.current.run, a.current.starts
	a.current.run, a.current.starts = nil, nil
	if a.current.size > 0 {
		a.done = append(a.done, a.current)
	}
	a.current = message{run: run, starts: starts}
}

// messageSeparator joins a turn's messages in PromptOutcome.text.
const messageSeparator = "\n\n"

// PiecesFrom is the length from which a whole text is handed over in
// pieces (outcome.Text.Pieces), the chunks' own strings, rather than
// joined: joining copies the answer while its chunks are still held, so
// for a moment the gateway holds it twice (outcome.Text says why that
// matters). Below it the copy is cheap, and one string keeps a short
// outcome's encoding in one buffer.
const PiecesFrom = 1 << 20

// Finish ends the turn's last message and returns the turn's text and its
// final message, whole or (past the limit) as their kept beginnings and
// lengths, and returns the reservation. A whole text of PiecesFrom bytes
// or more comes in pieces; a shorter one, or a kept beginning, is built
// with one copy. Either way the final message is the text's own tail,
// not a second copy.
func (a *Accumulator) Finish() (text, final outcome.Text) {
	a.Split()
	if len(a.done) == 0 {
		a.releaseReservation()
		return outcome.Text{}, outcome.Text{}
	}
	kept := 0
	a.eachKept(func(s string) { kept += len(s) })
	if kept == a.size && kept >= PiecesFrom {
		text, final := a.pieces()
		a.done = nil
		a.releaseReservation()
		return outcome.WholePieces(text), outcome.WholePieces(final)
	}
	var b strings.Builder
	b.Grow(kept)
	a.eachKept(func(s string) { b.WriteString(s) })
	last := a.done[len(a.done)-1]
	a.done = nil
	a.releaseReservation()
	text = outcome.Text{Kept: b.String(), Bytes: a.size}
	final = outcome.Text{Bytes: last.size}
	if text.Whole() {
		final.Kept = text.Kept[len(text.Kept)-last.size:]
	}
	return text, final
}

// ownPiece is the length from which a chunk is a piece of the text on its
// own; shorter chunks in a row are joined into one piece. Each piece is a
// buffer the outcome's encoding hands to the store and to gRPC: a 64 B
// flood as its 200,000 chunks made the terminal 400,000 buffers (text and
// final message), and cost that flood a sixth of its chunks/s. A run of
// short chunks joined is a copy of only those chunks.
const ownPiece = 4 << 10

// pieces is the whole text and its final message (the last message) as
// pieces: the chunks of ownPiece bytes or more, and the runs of shorter
// chunks in between, each joined, with the messages' separators in the
// runs. The final message starts a piece of its own, so that its pieces
// are the text's last.
func (a *Accumulator) pieces() (text, final []string) {
	var run []string
	flush := func() {
		if len(run) > 0 {
			text = append(text, strings.Join(run, ""))
			run = run[:0]
		}
	}
	add := func(p string) {
		if len(p) < ownPiece {
			run = append(run, p)
			return
		}
		flush()
		text = append(text, p)
	}
	from := 0
	for i, m := range a.done {
		if i > 0 {
			add(messageSeparator)
		}
		if i == len(a.done)-1 {
			flush()
			from = len(text)
		}
		for _, p := range m.parts {
			add(p.text)
		}
	}
	flush()
	return text, text[from:]
}

// eachKept calls f with the kept beginning of the joined text, piece by
// piece: the completed messages' kept chunks with separators between
// messages, up to the first message a chunk of which was only counted.
func (a *Accumulator) eachKept(f func(string)) {
	for i, m := range a.done {
		if i > 0 {
			f(messageSeparator)
		}
		for _, p := range m.parts {
			f(p.text)
		}
		if m.cut {
			return
		}
	}
}
