package store

import (
	"context"
	"sync"
)

// Appending is one running turn's events for AppendAll: what Append would
// be given for it.
type Appending struct {
	TurnID string
	Events []Event
}

// GroupAppender is a Store that journals the events of several running
// turns in one write.
//
// Why: the gateway commits each running turn's events within a window
// (50 ms). One write per turn per window made a hundred LLM-paced turns
// 2,000 writes a second through a store with one writer, each queueing
// for it behind the others; a turn's started event, which its first
// chunks wait for, queued behind them all (hundreds of milliseconds). The
// gateway now gathers every turn's events of a window into one call.
type GroupAppender interface {
	// AppendAll journals each batch as Append would: each turn's events
	// in seq order, following its last journaled one. A turn's failure is
	// its own: errs[i] is batches[i]'s result, nil when its events are
	// journaled, and the other turns' events are journaled all the same.
	AppendAll(ctx context.Context, batches []Appending) (errs []error)
}

// AppendAll journals the batches of several running turns in st: in one
// write when st is a GroupAppender, else by one Append per turn, run
// concurrently (a store whose writes take a round trip, such as
// PostgreSQL, serves them on connections of its own, as it served the
// turns' separate writes). errs[i] is batches[i]'s result.
func AppendAll(ctx context.Context, st Store, batches []Appending) []error {
	if g, ok := st.(GroupAppender); ok {
		return g.AppendAll(ctx, batches)
	}
	errs := make([]error, len(batches))
	if len(batches) == 1 {
		errs[0] = st.Append(ctx, batches[0].TurnID, batches[0].Events)
		return errs
	}
	var wg sync.WaitGroup
	for i, b := range batches {
		wg.Go(func() { errs[i] = st.Append(ctx, b.TurnID, b.Events) })
	}
	wg.Wait()
	return errs
}
