package turn

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/metrics"
	"github.com/acpgate/acpgate/internal/store"
	"github.com/acpgate/acpgate/internal/turn/wire"
)

// PumpOptions are what a turn's pump needs besides its queue and journal.
type PumpOptions struct {
	// Coalesce merges the text chunks queued together
	// (PromptRequest.coalesce_chunks).
	Coalesce bool
	// MaxBytes is limits.max_turn_bytes: past it the turn is cancelled
	// (Cancel) and its further events are not journaled.
	MaxBytes int64
	// Cancel cancels the turn's prompt with a cause the agent is told.
	Cancel func(cause string)
	// Full is the terminal of a turn that completed after its journal
	// dropped events past MaxBytes: it must not read as complete.
	Full func(detail string) *acpgatev1.PromptEvent
	// Failed is the terminal in place of e when the journal failed with
	// err (see Journal.End).
	Failed func(err error, e *acpgatev1.PromptEvent) *acpgatev1.PromptEvent
	// Metrics counts the events journaled and the time from Began to the
	// first agent message chunk; nil counts nothing.
	Metrics *metrics.Agent
	Began   time.Time
	Log     *slog.Logger
}

// Stats are what a turn streamed: events journaled between its started
// event and its terminal, and their encoded bytes; and the encoded size of
// its terminal. Two integers kept per event: a span per chunk would cost
// the stream more than the stream costs.
type Stats struct{ Events, Bytes, Terminal int64 }

// Pump moves a turn's events from its queue into its journal until the
// terminal, which it journals with Journal.End: merging text chunks when
// the client asked for that, and bounding the journal at opts.MaxBytes.
func Pump(ctx context.Context, q *Queue, j *Journal, opts PumpOptions) Stats {
	var (
		m         merger
		spare     []*acpgatev1.PromptEvent
		out       []store.Event // a batch's encodings; the journal copies them
		size      int64
		events    int64
		over      bool
		firstSeen bool
	)
	limit := opts.MaxBytes
	for {
		batch, _ := q.take(context.Background(), spare)
		seq := j.Next()
		out = out[:0]
		for i := 0; i < len(batch); i++ {
			e := batch[i]
			if opts.Coalesce && isTextChunk(e.GetAgentMessageChunk()) {
				e, i = m.merge(batch, i)
			}
			if isTerminal(e) {
				if len(out) > 0 {
					j.Append(out)
				}
				if over && e.GetOutcome() != nil {
					// The agent completed before the cancel reached it, but
					// the journal dropped events past the limit: the turn
					// must not read as complete.
					e = opts.Full(fmt.Sprintf("the turn's journal reached limits.max_turn_bytes (%d bytes); the events after it were not journaled", limit))
				}
				end := j.End(e, seq, opts.Failed)
				return Stats{Events: events, Bytes: size, Terminal: int64(end.Len())}
			}
			if over {
				continue
			}
			ev := wire.Encode(e, seq)
			if size += int64(ev.Len()); size > limit {
				over = true
				cause := fmt.Sprintf("the turn's journal reached limits.max_turn_bytes (%d bytes)", limit)
				opts.Log.WarnContext(ctx, "cancelling a turn whose journal is full", "turn", j.id, "limit", limit)
				opts.Cancel(cause)
				continue
			}
			out = append(out, ev)
			seq++
			events++
			opts.Metrics.Chunk(ev.Len())
			if _, chunk := e.GetEvent().(*acpgatev1.PromptEvent_AgentMessageChunk); chunk && !firstSeen {
				firstSeen = true
				opts.Metrics.FirstChunk(time.Since(opts.Began))
			}
		}
		if len(out) > 0 {
			j.Append(out)
		}
		clear(batch)
		clear(out)
		spare = batch
	}
}
