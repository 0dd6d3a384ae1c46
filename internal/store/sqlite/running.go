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
// The mutex also keeps one journal write at a time, from reading the
// extent to updating the record: two writes to one turn at once would
// both write at the same offset.
type runningJournals struct {
	mu    sync.Mutex
	turns map[string]*runningJournal
}

// runningJournal is a running turn's open files and committed extent.
type runningJournal struct {
	w        *journalWriter
	lastSeq  uint64 // the record's last_seq
	size     uint64 // the record's journal_bytes
	reserved uint64 // the record's reserved_seq
	kept     bool   // in runningJournals.turns
}

// get returns turnID's journal: the one kept from its last commit, or one
// made from its record, with its files opened. mu is held.
func (r *runningJournals) get(ctx context.Context, s *Store, turnID string) (*runningJournal, error) {
	if j, ok := r.turns[turnID]; ok {
		return j, nil
	}
	lastSeq, size, reserved, err := s.journalRecord(ctx, turnID)
	if err != nil {
		return nil, err
	}
	w, err := s.files.open(turnID, lastSeq == 0)
	if err != nil {
		return nil, err
	}
	j := &runningJournal{w: w, lastSeq: uint64(lastSeq), size: uint64(size), reserved: uint64(reserved)}
	if r.turns == nil {
		r.turns = make(map[string]*runningJournal)
	}
	if len(r.turns) < maxRunningJournals {
		r.turns[turnID] = j
		j.kept = true
	}
	return j, nil
}

// done ends a commit of turnID's journal: one that failed or ended the
// turn, or that the bound left unkept, closes the files (a failed one is
// made again from the record next time); mu is held.
func (r *runningJournals) done(turnID string, j *runningJournal, keep bool) {
	if keep && j.kept {
		return
	}
	if j.kept {
		delete(r.turns, turnID)
	}
	j.w.close()
}

// why tells why a guarded update changed no record: the turn is gone or
// ended, or its record no longer says what the store committed, which
// only another writer of the database could have done. mu is held.
func (r *runningJournals) why(ctx context.Context, s *Store, turnID string, lastSeq uint64) error {
	seq, _, _, err := s.journalRecord(ctx, turnID)
	if err != nil {
		return err
	}
	return fmt.Errorf("its record says %d events are journaled where this gateway committed %d: is another process writing the database?", seq, lastSeq)
}

// journalRecord reads what a running turn's record says is committed:
// ErrNotFound or ErrEnded when it is not running.
func (s *Store) journalRecord(ctx context.Context, turnID string) (lastSeq, size, reserved int64, err error) {
	var endedAt sql.NullInt64
	err = s.writeStmts.queryRow(ctx, nil, sqlJournalRecord, turnID).Scan(&lastSeq, &endedAt, &size, &reserved)
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

// close closes every kept journal's files.
func (r *runningJournals) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, j := range r.turns {
		j.w.close()
		delete(r.turns, id)
	}
}
