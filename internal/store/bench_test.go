package store_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/acpgate/acpgate/internal/store"
	"github.com/acpgate/acpgate/internal/store/memory"
	"github.com/acpgate/acpgate/internal/store/postgres"
	"github.com/acpgate/acpgate/internal/store/sqlite"
	"github.com/acpgate/acpgate/internal/store/storetest"
	"github.com/acpgate/acpgate/internal/testpg"
)

// The gateway writes a turn's events behind its stream in batches; these
// sizes are a busy turn's: 256 events a batch, 100 bytes an event.
const (
	benchBatch     = 256
	benchEventSize = 100
)

// benchStores are the backends side by side, on the interface's calls:
// the benchmarks sit here, beside the interface, rather than in each
// backend's package, so that one run compares them.
var benchStores = []struct {
	name string
	open func(b *testing.B) store.Store
}{
	{"memory", func(*testing.B) store.Store { return memory.New() }},
	{"sqlite", func(b *testing.B) store.Store { return openBenchSQLite(b) }},
	// A server on this machine (testpg: fsync off, a unix socket's
	// neighbour over TCP), so the figures are the store's and the
	// protocol's costs, not a network's or a disk's.
	{"postgres", func(b *testing.B) store.Store { return openBenchPostgres(b) }},
}

func openBenchPostgres(b *testing.B) *postgres.Store {
	p, err := postgres.Open(context.Background(), postgres.Options{DSN: testpg.Start(b)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	return p
}

func openBenchSQLite(b *testing.B) *sqlite.Store {
	s, err := sqlite.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// benchID is the nth turn's id, as long as the gateway's (random, 31
// characters): the id is part of every journaled event's key.
func benchID(n int) string { return fmt.Sprintf("turn-%026d", n) }

// benchTurn begins and starts a turn and returns its last seq.
func benchTurn(b *testing.B, st store.Store, id string) uint64 {
	ctx := context.Background()
	if _, _, err := st.Begin(ctx, storetest.NewTurn(id, "", 1, 0)); err != nil {
		b.Fatal(err)
	}
	if err := st.Started(ctx, id, "s1", store.Event{Seq: 1, Data: []byte("started")}); err != nil {
		b.Fatal(err)
	}
	return 1
}

// benchEvents returns a batch of n events from seq on; the caller renumbers.
func benchEvents(n int) []store.Event {
	batch := make([]store.Event, n)
	for i := range batch {
		batch[i].Data = bytes.Repeat([]byte{'e'}, benchEventSize)
	}
	return batch
}

// benchChunks returns n events shaped as the gateway's 64-byte text
// chunks: the text twice in the encoding, the second an Echo of the
// first. The caller renumbers.
func benchChunks(n int) []store.Event {
	text := bytes.Repeat([]byte{'t'}, 64)
	data := slices.Concat(bytes.Repeat([]byte{'h'}, 20), text, []byte{0x12, 0x40}, text)
	batch := make([]store.Event, n)
	for i := range batch {
		batch[i].Data = data
		batch[i].Echo = store.Echo{From: 20, At: 86, Len: 64}
	}
	return batch
}

// benchJournal begins turn id with a journal of n events.
func benchJournal(b *testing.B, st store.Store, id string, n int) {
	seq := benchTurn(b, st, id)
	batch := benchEvents(benchBatch)
	for seq < uint64(n) {
		batch = batch[:min(benchBatch, n-int(seq))]
		seq = number(batch, seq)
		if err := st.Append(context.Background(), id, batch); err != nil {
			b.Fatal(err)
		}
	}
}

func number(batch []store.Event, after uint64) uint64 {
	for i := range batch {
		batch[i].Seq = after + 1 + uint64(i)
	}
	return after + uint64(len(batch))
}

// benchEndedAt is when the benchmarks' turns end: dropEnded drops them.
var benchEndedAt = time.Unix(0, 1)

// dropEnded deletes the turns the benchmark has ended, so that the store
// stays the size the benchmark says.
func dropEnded(b *testing.B, st store.Store) {
	if _, err := st.DeleteEnded(context.Background(), benchEndedAt.Add(1)); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkAppend journals batches to a turn, moving to a new turn (and
// dropping the old one) every 1,000 batches so that the memory store's
// footprint, and the database's, stay what one busy turn's would be.
func BenchmarkAppend(b *testing.B) {
	for _, impl := range benchStores {
		b.Run(impl.name, func(b *testing.B) {
			n := benchAppends(b, impl.open(b), benchEvents(benchBatch), 1000)
			b.ReportMetric(float64(n*benchBatch)/b.Elapsed().Seconds(), "events/s")
			b.SetBytes(benchBatch * benchEventSize)
		})
	}
}

// pacedBatch is what a turn paced at 1,000 chunks a second has for the
// store at each commit: 50 ms of its chunks.
const pacedBatch = 50

// BenchmarkCommitOfAPacedTurn journals batches of pacedBatch 64-byte
// chunks to a turn, as the gateway commits a turn that streams at 1,000
// chunks a second, moving to a new turn every 600 batches (30 s): the
// commit's fixed cost, not its bytes, is what each one costs. A commit's
// CPU, twenty times a second, is taken from the latency of the chunks
// that arrive during it.
func BenchmarkCommitOfAPacedTurn(b *testing.B) {
	for _, impl := range benchStores {
		b.Run(impl.name, func(b *testing.B) {
			benchAppends(b, impl.open(b), benchChunks(pacedBatch), 600)
		})
	}
}

// benchAppends is the loop of the append benchmarks: batch appended to a
// turn again and again, the turn ended and dropped (untimed) every perTurn
// batches and a new one begun. It closes st and returns how many batches
// it appended.
func benchAppends(b *testing.B, st store.Store, batch []store.Event, perTurn int) int {
	ctx := context.Background()
	defer st.Close()
	turn := 0
	id := benchID(0)
	seq := benchTurn(b, st, id)
	n := 0
	for b.Loop() {
		if n++; n%perTurn == 0 {
			b.StopTimer()
			if err := st.End(ctx, id, nil, store.Event{Seq: seq + 1}, benchEndedAt); err != nil {
				b.Fatal(err)
			}
			dropEnded(b, st)
			turn++
			id = benchID(turn)
			seq = benchTurn(b, st, id)
			b.StartTimer()
		}
		seq = number(batch, seq)
		if err := st.Append(ctx, id, batch); err != nil {
			b.Fatal(err)
		}
	}
	return n
}

// BenchmarkStartOfATurn begins a turn and journals its started event:
// what the store adds between a call and its first event. Turns are
// dropped every 100 so that the store stays a small one.
func BenchmarkStartOfATurn(b *testing.B) {
	ctx := context.Background()
	for _, impl := range benchStores {
		b.Run(impl.name, func(b *testing.B) {
			st := impl.open(b)
			defer st.Close()
			terminal := store.Event{Seq: 2, Data: []byte("ended")}
			n := 0
			for b.Loop() {
				n++
				benchTurn(b, st, benchID(n))
				b.StopTimer()
				if err := st.End(ctx, benchID(n), nil, terminal, benchEndedAt); err != nil {
					b.Fatal(err)
				}
				if n%100 == 0 {
					dropEnded(b, st)
				}
				b.StartTimer()
			}
		})
	}
}

// BenchmarkEndOfABurst ends a turn whose 1,000 text chunks (see
// benchChunks) are all unwritten, as a short burst's are when it ends (it
// fits between two batches): the
// last step between the agent's last word and the client's terminal. "one
// step" is End given the events; "append, then end" the two writes it
// replaces, side by side. Turns are dropped every 100 so that the store
// stays a small one.
func BenchmarkEndOfABurst(b *testing.B) {
	ctx := context.Background()
	ways := []struct {
		name string
		end  func(st store.Store, id string, rest []store.Event, terminal store.Event) error
	}{
		{"one step", func(st store.Store, id string, rest []store.Event, terminal store.Event) error {
			return st.End(ctx, id, rest, terminal, benchEndedAt)
		}},
		{"append, then end", func(st store.Store, id string, rest []store.Event, terminal store.Event) error {
			if err := st.Append(ctx, id, rest); err != nil {
				return err
			}
			return st.End(ctx, id, nil, terminal, benchEndedAt)
		}},
	}
	for _, impl := range benchStores {
		b.Run(impl.name, func(b *testing.B) {
			st := impl.open(b)
			defer st.Close()
			n := 0
			for _, way := range ways {
				b.Run(way.name, func(b *testing.B) {
					rest := benchChunks(1000)
					terminal := store.Event{Data: bytes.Repeat([]byte{'t'}, 200)}
					for b.Loop() {
						b.StopTimer()
						if n++; n%100 == 0 {
							dropEnded(b, st)
						}
						id := benchID(n)
						terminal.Seq = number(rest, benchTurn(b, st, id)) + 1
						b.StartTimer()
						if err := way.end(st, id, rest, terminal); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}

// BenchmarkEvents replays a 200,000-event journal in pages of 1,000, as a
// client reattaching to a long turn would.
func BenchmarkEvents(b *testing.B) {
	const journal, page = 200_000, 1000
	ctx := context.Background()
	for _, impl := range benchStores {
		b.Run(impl.name, func(b *testing.B) {
			st := impl.open(b)
			defer st.Close()
			id := benchID(1)
			benchJournal(b, st, id, journal)
			replays := 0
			for b.Loop() {
				var after uint64
				for {
					events, err := st.Events(ctx, id, after, page, 0)
					if err != nil {
						b.Fatal(err)
					}
					if len(events) == 0 {
						break
					}
					after = events[len(events)-1].Seq
				}
				if after != journal {
					b.Fatalf("replayed to seq %d, want %d", after, journal)
				}
				replays++
			}
			b.ReportMetric(float64(replays*journal)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkEventsWhileAppending replays a 50,000-event journal while
// another turn journals batches as fast as it can: the case the SQLite
// store's separate read pool is for, since a replay then need not queue
// behind the writer's connection. Measured on 2 cores: with the read pool,
// ~850k events/s replayed while ~210k/s were appended; with every query on
// the one write connection, ~510k/s and ~130k/s.
func BenchmarkEventsWhileAppending(b *testing.B) {
	const journal, page = 50_000, 1000
	ctx := context.Background()
	st := openBenchSQLite(b)
	defer st.Close()
	id := benchID(1)
	benchJournal(b, st, id, journal)
	stop := make(chan struct{})
	done := make(chan int)
	writer := benchID(2)
	writerSeq := benchTurn(b, st, writer)
	go func() {
		seq, batch, appended := writerSeq, benchEvents(benchBatch), 0
		for {
			select {
			case <-stop:
				done <- appended
				return
			default:
			}
			seq = number(batch, seq)
			if err := st.Append(ctx, writer, batch); err != nil {
				b.Error(err)
			}
			appended += len(batch)
		}
	}()
	replays := 0
	for b.Loop() {
		for after := uint64(0); after < journal; {
			events, err := st.Events(ctx, id, after, page, 0)
			if err != nil {
				b.Fatal(err)
			}
			after = events[len(events)-1].Seq
		}
		replays++
	}
	close(stop)
	appended := <-done
	b.ReportMetric(float64(replays*journal)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(appended)/b.Elapsed().Seconds(), "appended/s")
}
