package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/acpgate/acpgate/internal/store"
)

// manyTurns is how many turns run at once in the benchmarks of many
// turns: the most the gateway's turns section measures.
const manyTurns = 100

// llmBatch is what a turn paced like an LLM (100 chunks a second) has for
// the store at each commit: 50 ms of its chunks.
const llmBatch = 5

// BenchmarkCommitOfManyPacedTurns commits one window (50 ms) of manyTurns
// turns paced like an LLM: each turn's llmBatch chunks. "a write per
// turn" is what the gateway did before its committer, each turn's Append
// at once from a goroutine of its own; "one write" is store.AppendAll.
// Turns are ended and new ones begun (untimed) every 600 windows (30 s).
func BenchmarkCommitOfManyPacedTurns(b *testing.B) {
	ctx := context.Background()
	ways := []struct {
		name   string
		commit func(st store.Store, batches []store.Appending) error
	}{
		{"a write per turn", func(st store.Store, batches []store.Appending) error {
			errs := make([]error, len(batches))
			var wg sync.WaitGroup
			for i, a := range batches {
				wg.Go(func() { errs[i] = st.Append(ctx, a.TurnID, a.Events) })
			}
			wg.Wait()
			return firstError(errs)
		}},
		{"one write", func(st store.Store, batches []store.Appending) error {
			return firstError(store.AppendAll(ctx, st, batches))
		}},
	}
	for _, impl := range benchStores[:2] {
		b.Run(impl.name, func(b *testing.B) {
			for _, way := range ways {
				b.Run(way.name, func(b *testing.B) {
					st := impl.open(b)
					defer st.Close()
					batches := make([]store.Appending, manyTurns)
					seqs := make([]uint64, manyTurns)
					round := 0
					begin := func() {
						for i := range batches {
							batches[i] = store.Appending{TurnID: benchID(round*manyTurns + i), Events: benchChunks(llmBatch)}
							seqs[i] = benchTurn(b, st, batches[i].TurnID)
						}
					}
					begin()
					n := 0
					for b.Loop() {
						if n++; n%600 == 0 {
							b.StopTimer()
							for i, a := range batches {
								if err := st.End(ctx, a.TurnID, nil, store.Event{Seq: seqs[i] + 1}, benchEndedAt); err != nil {
									b.Fatal(err)
								}
							}
							dropEnded(b, st)
							round++
							begin()
							b.StartTimer()
						}
						for i := range batches {
							seqs[i] = number(batches[i].Events, seqs[i])
						}
						if err := way.commit(st, batches); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}

// BenchmarkStartOfManyTurns begins and starts manyTurns/2 turns at once,
// each from a goroutine of its own, as that many one-shot turns whose
// agents answer together do: the last one's started event is what its
// first chunks wait for.
func BenchmarkStartOfManyTurns(b *testing.B) {
	ctx := context.Background()
	for _, impl := range benchStores[:2] {
		b.Run(impl.name, func(b *testing.B) {
			st := impl.open(b)
			defer st.Close()
			terminal := store.Event{Seq: 2, Data: []byte("ended")}
			round := 0
			for b.Loop() {
				round++
				var wg sync.WaitGroup
				for i := range manyTurns / 2 {
					wg.Go(func() { benchTurn(b, st, fmt.Sprintf("%s-%d", benchID(round), i)) })
				}
				wg.Wait()
				b.StopTimer()
				for i := range manyTurns / 2 {
					if err := st.End(ctx, fmt.Sprintf("%s-%d", benchID(round), i), nil, terminal, benchEndedAt); err != nil {
						b.Fatal(err)
					}
				}
				if round%4 == 0 {
					dropEnded(b, st)
				}
				b.StartTimer()
			}
		})
	}
}

func firstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
