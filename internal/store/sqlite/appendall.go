package sqlite

import (
	"context"
	"database/sql"

	"github.com/acpgate/acpgate/internal/store"
)

// AppendAll journals the events of several running turns: each turn's
// files written, then every record's guarded UPDATE (see journal) in one
// transaction (see batchWriter), so that the write connection is held for
// the updates alone. A hundred turns paced like an LLM are then twenty
// transactions a second rather than two thousand, and the one writer they
// share is free for the turns starting and ending in between. A turn's
// failure is its own, as with Append.
func (s *Store) AppendAll(ctx context.Context, batches []store.Appending) []error {
	errs := make([]error, len(batches))
	r := &s.running
	// One at a time: each holds several journals' mutexes, which two
	// taking them in different orders would deadlock on.
	r.group.Lock()
	defer r.group.Unlock()
	js := make([]*runningJournal, len(batches))
	us := make([]recordUpdate, len(batches))
	var writes []func(*sql.Tx) error
	var written []int // the batches of writes
	for i, b := range batches {
		if len(b.Events) == 0 {
			continue // Append's question, asked below
		}
		if js[i], errs[i] = r.get(ctx, s, b.TurnID); errs[i] != nil {
			continue
		}
		if us[i], errs[i] = s.writeJournal(js[i], journalWrite{events: b.Events}); errs[i] != nil {
			r.done(b.TurnID, js[i], false)
			continue
		}
		writes = append(writes, s.updateWrite(ctx, js[i], b.TurnID, us[i]))
		written = append(written, i)
	}
	for k, err := range s.writes.doAll(ctx, true, writes) {
		i := written[k]
		b := batches[i]
		before, after, err := s.recordUpdated(ctx, js[i], b.TurnID, us[i], err)
		r.done(b.TurnID, js[i], err == nil)
		if errs[i] = err; err == nil {
			s.files.settle(b.TurnID, before, after, false)
		}
	}
	for i, b := range batches {
		switch {
		case len(b.Events) == 0:
			errs[i] = s.Append(ctx, b.TurnID, nil)
		case errs[i] != nil:
			errs[i] = s.opError("journal events of turn "+b.TurnID, errs[i])
		}
	}
	return errs
}
