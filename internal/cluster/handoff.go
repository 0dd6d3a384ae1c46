package cluster

import (
	"context"
	"errors"
	"time"

	"github.com/acpgate/acpgate/internal/store"
)

// Hand-off: with several replicas, a turn's ending is the one the store
// holds, whoever wrote it. A replica that cannot write a turn's journal
// (the database is unreachable, or its lease was lost and the store fences
// it) does not deliver an ending of its own from memory, which the store
// would not have and which a reaper would contradict: it drops the turn
// from memory first, and every stream of it, here as on any replica, reads
// the store and gets the ending there. That ending is written by the
// replica that reaps the lease (GATEWAY_STOPPED), or, when the lease
// outlives the outage, by this replica itself (HandOff): the same
// terminal, after the last event the store has. Either way one terminal,
// the same to everyone.

// HandOff sees that the store ends turn id, unless a reaper does first;
// the gateway has dropped the turn from memory before its terminal was
// delivered from there.
func (r *Replica) HandOff(id string) {
	r.goEnd(func() { r.endHandedOff(id) })
}

// endHandedOff ends a turn handed off to the store, unless a reaper does
// first, trying every lease_ttl/3 until the store answers or the gateway
// stops (its lease then lapses and a reaper ends the turn).
func (r *Replica) endHandedOff(id string) {
	every := r.o.Config.LeaseTTL / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), every)
		done := r.tryEndHandedOff(ctx, id)
		cancel()
		if done {
			return
		}
	}
}

// tryEndHandedOff writes the GATEWAY_STOPPED terminal of turn id after the
// events the store has, as a reaper would; it reports whether the turn
// has ended (by this write, or by anyone's before it).
func (r *Replica) tryEndHandedOff(ctx context.Context, id string) bool {
	rec, err := r.o.Store.Get(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return true
	case err != nil:
		return false
	case !rec.Running():
		return true
	}
	err = r.o.Store.End(ctx, id, nil, r.o.Terminal(rec), time.Now())
	switch {
	case err == nil:
		r.o.Logger.Warn("a turn whose journal the store refused has ended as a lost replica's would", "turn", id, "agent", rec.Agent, "last_seq", rec.LastSeq)
		return true
	case errors.Is(err, store.ErrEnded), errors.Is(err, store.ErrFenced):
		// Reaped meanwhile, or the lease was lost: the reaper's.
		return true
	case !errors.Is(err, store.ErrUnavailable):
		// Not the outage: say so, since the turn reads as running until
		// a later try, or a reaper, ends it.
		r.o.Logger.Warn("ending a turn whose journal the store refused failed; retrying", "turn", id, "err", err)
	}
	return false
}
