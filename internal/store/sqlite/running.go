package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"github.com/acpgate/acpgate/internal/store"
)

// maxRunningJournals bounds the running turns whose journal files the
// SQLite store holds open, two descriptors each. A turn beyond it has
// its files opened and closed on every commit, as every turn's once were:
// slower, never wrong.
const maxRunningJournals = 256

// runningJournals are the journals the SQLite store is writing: for each
// running turn it has committed to, the files held open and what its
// record says is committed.
//
// Why: committing a small batch (50 ms of a turn paced at 1,000 chunks a
// second) took a transaction of four statements (begin, read the record,
// update it, commit) and opened and closed both files. Each commit's CPU,
// twenty times a second, showed in the latency of the turn's chunks. The
// store is the only writer of its records (one gateway a directory, see
// Store), so what it last committed is what the record says, and a
// commit is the files' write and one guarded UPDATE.
//
// Each turn's journal has a mutex of its own, held by one write at a
// time, from reading the extent to updating the record: two writes to
// one turn at once would both write at the same offset. One mutex for
// every turn made each turn's write wait for all the others', files
// included: fifty turns starting at once on a busy machine waited in
// line for each other's files to be created, and their first chunks with
// them, for hundreds of milliseconds. Now only their records' updates
// take turns, on the one write connection.
type runningJournals struct {
	mu     sync.Mutex // guards turns and kept
	turns  map[string]*runningJournal
	kept   int        // the journals in turns whose files stay open
	closed bool       // the store is closed: no journal is made ahead
	group  sync.Mutex // held by Store.AppendAll
}

// runningJournal is a running turn's open files and committed extent.
type runningJournal struct {
	mu       sync.Mutex // held by the write under way, and guarding the rest
	w        *journalWriter
	lastSeq  uint64 // the record's last_seq
	size     uint64 // the record's journal_bytes
	reserved uint64 // the record's reserved_seq
	kept     bool   // its files stay open between writes (maxRunningJournals)
	gone     bool   // no longer in runningJournals.turns: get it again
}

// get returns turnID's journal with its mu held: the one kept from its
// last commit, or one made from its record, with its files opened. The
// write ends with done.
func (r *runningJournals) get(ctx context.Context, s *Store, turnID string) (*runningJournal, error) {
	for {
		r.mu.Lock()
		j, ok := r.turns[turnID]
		if !ok {
			// A journal whose files are not kept is in turns too while
			// it is written, so that writes to its turn take turns.
			j = &runningJournal{kept: r.kept < maxRunningJournals}
			if r.turns == nil {
				r.turns = make(map[string]*runningJournal)
			}
			r.turns[turnID] = j
			if j.kept {
				r.kept++
			}
		}
		r.mu.Unlock()
		j.mu.Lock()
		if j.gone {
			j.mu.Unlock()
			continue
		}
		if j.w != nil {
			return j, nil
		}
		lastSeq, size, reserved, err := s.journalRecord(ctx, turnID)
		if err == nil {
			j.w, err = s.files.open(turnID, lastSeq == 0)
		}
		if err != nil {
			r.done(turnID, j, false)
			return nil, err
		}
		j.lastSeq, j.size, j.reserved = uint64(lastSeq), uint64(size), uint64(reserved)
		return j, nil
	}
}

// begun makes the journal of a turn Begin has just recorded, ahead of its
// first write, on a goroutine of its own: its record's extent is known
// (nothing journaled, the started event's seq reserved) and its files are
// created meanwhile, while the gateway starts the turn's agent. The
// turn's started event, which its first chunks wait for, is then a write
// of its files and of its record: reading the record and creating two
// files took tens of milliseconds on a busy machine with fifty turns
// starting at once. A write that comes first waits for the files (get
// holds the journal's mu); one that finds no journal, the bound reached or
// the files not made, makes it from the record as before.
func (r *runningJournals) begun(s *Store, turnID string) {
	r.mu.Lock()
	if _, ok := r.turns[turnID]; ok || r.closed || r.kept >= maxRunningJournals {
		r.mu.Unlock()
		return
	}
	j := &runningJournal{kept: true, reserved: store.BeginReserved}
	if r.turns == nil {
		r.turns = make(map[string]*runningJournal)
	}
	r.turns[turnID] = j
	r.kept++
	j.mu.Lock()
	r.mu.Unlock()
	go func() {
		w, err := s.files.open(turnID, true)
		if err != nil {
			r.done(turnID, j, false)
			return
		}
		j.w = w
		j.mu.Unlock()
	}()
}

// done ends a write of turnID's journal j (from get), releasing its mu: a
// write that failed or ended the turn, or whose files the bound left
// unkept, closes the files and forgets the journal (a failed one is made
// again from the record next time).
func (r *runningJournals) done(turnID string, j *runningJournal, keep bool) {
	if !keep || !j.kept {
		r.mu.Lock()
		if r.turns[turnID] == j { // else close has taken it
			delete(r.turns, turnID)
			if j.kept {
				r.kept--
			}
		}
		r.mu.Unlock()
		j.gone = true
		if j.w != nil {
			j.w.close()
		}
	}
	j.mu.Unlock()
}

// why tells why a guarded update changed no record: the turn is gone or
// ended, or its record no longer says what the store committed, which
// only another writer of the database could have done. The journal's mu
// is held.
func (r *runningJournals) why(ctx context.Context, s *Store, turnID string, lastSeq uint64) error {
	seq, _, _, err := s.journalRecord(ctx, turnID)
	if err != nil {
		return err
	}
	return fmt.Errorf("its record says %d events are journaled where this gateway committed %d: is another process writing the database?", seq, lastSeq)
}

// journalRecord reads what a running turn's record says is committed:
// ErrNotFound or ErrEnded when it is not running.
//
// It reads on a read connection: this store is the record's one writer,
// and its last write to the turn has committed, so a read sees it. On the
// one write connection, the reads of fifty turns starting at once queued
// with every write, their first chunks waiting behind them.
func (s *Store) journalRecord(ctx context.Context, turnID string) (lastSeq, size, reserved int64, err error) {
	var endedAt sql.NullInt64
	err = s.readStmts.queryRow(ctx, nil, sqlJournalRecord, turnID).Scan(&lastSeq, &endedAt, &size, &reserved)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, 0, 0, store.ErrNotFound
	case err != nil:
		return 0, 0, 0, err
	case endedAt.Valid:
		return 0, 0, 0, store.ErrEnded
	}
	return lastSeq, size, reserved, nil
}

// close closes every kept journal's files, each once the write under way
// (or the files being made by begun) is done.
func (r *runningJournals) close() {
	r.mu.Lock()
	turns := r.turns
	r.turns, r.kept, r.closed = nil, 0, true
	r.mu.Unlock()
	for _, j := range turns {
		j.mu.Lock()
		if j.w != nil && !j.gone {
			j.w.close()
		}
		j.gone = true
		j.mu.Unlock()
	}
}
