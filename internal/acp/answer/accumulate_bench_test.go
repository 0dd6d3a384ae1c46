package answer

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/acpgate/acpgate/internal/acp/translate"
)

// BenchmarkKeepingAnAnswerOfFreshShortChunks keeps a 300,000-chunk answer
// (3 s at 100,000 chunks/s) as a default turn does: every chunk a fresh
// string, as the decoder hands it over, added to an unbounded
// accumulator, then the whole text finished. ns/op is a chunk's share,
// with the garbage collections the kept text costs while it grows; kept-B
// is the live heap per chunk once all are added (the text itself is
// size B).
func BenchmarkKeepingAnAnswerOfFreshShortChunks(b *testing.B) {
	const n = 300_000
	for _, size := range []int{40, 64} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			template := strings.Repeat("x", size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			var (
				acc  Accumulator
				base uint64 // the live heap when acc was fresh
				kept float64
			)
			for i := 0; b.Loop(); i++ {
				if i%n == 0 {
					b.StopTimer()
					if i > 0 {
						kept = float64(liveHeap()) - float64(base)
						b.StartTimer()
						text, _ := acc.Finish() // timed: a turn's end
						runtime.KeepAlive(text)
						b.StopTimer()
					}
					acc = Accumulator{}
					base = liveHeap()
					b.StartTimer()
				}
				acc.Add(translate.Chunk{MessageID: "m1", Text: strings.Clone(template), IsText: true})
			}
			if kept > 0 {
				b.ReportMetric(kept/n, "kept-B")
			}
		})
	}
}

// liveHeap is the live heap, garbage collected.
func liveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
