package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/acpgate/acpgate/internal/store"
)

// The SQLite store's journals: Started, Append and End commit a batch of
// events to the turn's files (see journalFiles) and its record in one
// guarded UPDATE (see Store.journal); Events reads them back.

func (s *Store) Started(ctx context.Context, turnID, sessionID string, started store.Event) error {
	return s.journal(ctx, "journal the start of turn "+turnID, turnID, journalWrite{events: []store.Event{started}, sessionID: &sessionID})
}

func (s *Store) Append(ctx context.Context, turnID string, events []store.Event) error {
	if len(events) == 0 {
		// Nothing to journal, but the caller still learns of a turn
		// that ended or never was (without reading its terminal, which
		// may be in the files).
		var ended bool
		err := s.readStmts.queryRow(ctx, nil, sqlEnded, turnID).Scan(&ended)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return store.ErrNotFound
		case err != nil:
			return s.opError("journal events of turn "+turnID, err)
		case ended:
			return store.ErrEnded
		}
		return nil
	}
	return s.journal(ctx, "journal events of turn "+turnID, turnID, journalWrite{events: events})
}

func (s *Store) End(ctx context.Context, turnID string, rest []store.Event, terminal store.Event, endedAt time.Time) error {
	return s.journal(ctx, "end turn "+turnID, turnID, journalWrite{events: rest, terminal: &terminal, endedAt: endedAt.UnixNano()})
}

// journalWrite is one commit of a turn's journal.
type journalWrite struct {
	events    []store.Event // the events to its files, following the last journaled one
	terminal  *store.Event  // the terminal, when the commit ends the turn
	endedAt   int64         // unix nanoseconds, with terminal
	sessionID *string       // the turn's session, with its started event
}

// journal commits w to a turn's journal: its events to the turn's files,
// then one guarded UPDATE of its record, which sets last_seq,
// journal_bytes and the reservation (see store.Turn.Reserved), or the ending,
// and changes the record only while it is running and says what the
// store last committed (see sqlJournalCommit).
func (s *Store) journal(ctx context.Context, op, turnID string, w journalWrite) error {
	r := &s.running
	j, err := r.get(ctx, s, turnID)
	if err != nil {
		return s.opError(op, err)
	}
	ends := w.terminal != nil
	before, after, err := s.commitJournal(ctx, j, turnID, w)
	r.done(turnID, j, err == nil && !ends)
	if err != nil {
		return s.opError(op, err)
	}
	s.files.settle(turnID, before, after, ends)
	return nil
}

// commitJournal is journal's write and update, which advance j; j.mu is
// held. before and after are the data file's committed size before and
// after it.
func (s *Store) commitJournal(ctx context.Context, j *runningJournal, turnID string, w journalWrite) (before, after uint64, err error) {
	u, err := s.writeJournal(j, w)
	if err != nil {
		return 0, 0, err
	}
	return s.updateRecord(ctx, j, turnID, u)
}

// recordUpdate is a journal write's update of the turn's record, to make
// once its files are written, and the extent it gives the journal.
type recordUpdate struct {
	stmt                 string
	set                  []any // the columns the statement sets after last_seq and journal_bytes
	last, size, reserved uint64
}

// writeJournal writes w's events to j's files and returns the update of
// the record that commits them; j.mu is held.
//
// The terminal is kept once: in the record when it is small (Get and List
// read it there), else as the journal files' last event, the record's
// terminal then NULL. One numbered above the reservation (see store.Store.End)
// is kept in the record with the seqs it skips (skipped), so that the
// files stay numbered by position.
func (s *Store) writeJournal(j *runningJournal, w journalWrite) (u recordUpdate, err error) {
	prev := j.lastSeq
	for _, e := range w.events {
		if e.Seq != prev+1 {
			return u, fmt.Errorf("event seq %d does not follow %d", e.Seq, prev)
		}
		prev++
	}
	filed, last, reserved := batch{w.events}, prev, prev+store.ReserveAhead
	update, set := sqlJournalCommit, []any{int64(reserved)}
	switch t := w.terminal; {
	case t != nil:
		if err := store.TerminalFits(t.Seq, prev, j.reserved, len(w.events) == 0); err != nil {
			return u, err
		}
		last, reserved = t.Seq, j.reserved
		if skipped := t.Seq - prev - 1; skipped == 0 && t.Len() > inlineTerminal {
			filed = batch{w.events, {*t}}
			update, set = sqlJournalEndInFiles, []any{w.endedAt}
		} else {
			update, set = sqlJournalEndInRecord, []any{w.endedAt, store.NonNilBytes(t.Flat()), int64(skipped)}
		}
	case w.sessionID != nil:
		update, set = sqlJournalStart, append(set, *w.sessionID)
	}
	newSize := j.size
	if filed.len() > 0 {
		if newSize, err = s.files.writeTo(j.w, j.lastSeq, j.size, filed); err != nil {
			return u, err
		}
	}
	return recordUpdate{stmt: update, set: set, last: last, size: newSize, reserved: reserved}, nil
}

// updateRecord makes u, the update of j's record after writeJournal, and
// advances j; j.mu is held.
func (s *Store) updateRecord(ctx context.Context, j *runningJournal, turnID string, u recordUpdate) (before, after uint64, err error) {
	err = s.writes.doStatement(ctx, s.updateWrite(ctx, j, turnID, u))
	return s.recordUpdated(ctx, j, turnID, u, err)
}

// updateWrite is u, the update of j's record, as a write for the
// batchWriter: errNotUpdated when the guard let nothing change. j.mu is
// held until the write is made.
func (s *Store) updateWrite(ctx context.Context, j *runningJournal, turnID string, u recordUpdate) func(*sql.Tx) error {
	args := append([]any{int64(u.last), int64(u.size)}, u.set...)
	args = append(args, turnID, int64(j.lastSeq))
	return func(tx *sql.Tx) error {
		res, err := s.writeStmts.exec(ctx, tx, u.stmt, args...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n != 1 {
			return errNotUpdated
		}
		return nil
	}
}

// recordUpdated advances j by u once its write has ended with err, or
// tells why the record was not updated; j.mu is held. before and after
// are the data file's committed size before and after it.
func (s *Store) recordUpdated(ctx context.Context, j *runningJournal, turnID string, u recordUpdate, err error) (before, after uint64, _ error) {
	if errors.Is(err, errNotUpdated) {
		return 0, 0, s.running.why(ctx, s, turnID, j.lastSeq)
	}
	if err != nil {
		return 0, 0, err
	}
	before = j.size
	j.lastSeq, j.size, j.reserved = u.last, u.size, u.reserved
	return before, u.size, nil
}

func (s *Store) Events(ctx context.Context, turnID string, afterSeq uint64, limit, maxBytes int) ([]store.Event, error) {
	op := "read the journal of turn " + turnID
	var lastSeq, size, skipped int64
	var ended, terminalInFiles bool
	err := s.readStmts.queryRow(ctx, nil, sqlEventsRecord, turnID).Scan(&lastSeq, &ended, &size, &terminalInFiles, &skipped)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, s.opError(op, err)
	}
	last := uint64(lastSeq)
	if limit <= 0 || afterSeq >= last {
		return nil, nil
	}
	// The files hold every event but an ended turn's terminal, unless it
	// was too large for the record; a terminal in the record may skip
	// seqs after them.
	inFiles := last
	if ended && !terminalInFiles {
		inFiles -= 1 + uint64(skipped)
	}
	var out []store.Event
	if afterSeq < inFiles {
		n := min(uint64(limit), inFiles-afterSeq)
		if out, err = s.files.read(turnID, afterSeq, n, uint64(size), maxBytes); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				// Deleted since the record was read.
				if _, gone := s.Get(ctx, turnID); gone != nil {
					return nil, gone
				}
			}
			return nil, s.opError(op, err)
		}
	}
	if ended && !terminalInFiles && len(out) < limit && afterSeq+uint64(len(out)) >= inFiles {
		terminal := store.Event{Seq: last}
		err := s.readStmts.queryRow(ctx, nil, sqlTerminal, turnID).Scan(&terminal.Data)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, store.ErrNotFound
		}
		if err != nil {
			return nil, s.opError(op, err)
		}
		if len(out) == 0 || maxBytes <= 0 || dataSize(out)+len(terminal.Data) <= maxBytes {
			out = append(out, terminal)
		}
	}
	return out, nil
}

// dataSize is the bytes of events' data.
func dataSize(events []store.Event) int {
	size := 0
	for _, e := range events {
		size += len(e.Data)
	}
	return size
}
