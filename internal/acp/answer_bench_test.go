package acp

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/acp/answer"
	"github.com/acpgate/acpgate/internal/acp/translate"
	"github.com/acpgate/acpgate/internal/store"
	"github.com/acpgate/acpgate/internal/turn/wire"
	"github.com/acpgate/acpgate/outcome"
)

// BenchmarkATurnKeepingAChunk is the hot path of a turn whose outcome
// keeps the text: one agent_message_chunk applied to the turn, which
// reserves the text from a gateway's answer budget. The turn is replaced,
// with a budget of its own, every 4 MiB, so the benchmark's memory stays
// bounded.
func BenchmarkATurnKeepingAChunk(b *testing.B) {
	for _, size := range []int{64, 64 << 10} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			u := translate.Update{
				Event:    &acpgatev1.PromptEvent{},
				Chunk:    translate.Chunk{MessageID: "m1", Text: strings.Repeat("x", size), IsText: true},
				HasChunk: true,
			}
			t := newBenchTurn(answer.NewBudget(answer.DefaultMaxBytes))
			b.SetBytes(int64(size))
			b.ReportAllocs()
			i, every := 0, max(1, 4<<20/size)
			for b.Loop() {
				t.apply(u)
				if i++; i%every == 0 {
					t = newBenchTurn(answer.NewBudget(answer.DefaultMaxBytes))
				}
			}
		})
	}
}

func newBenchTurn(budget *answer.Budget) *turn {
	return &turn{emit: func(*acpgatev1.PromptEvent) {}, acc: answer.Budgeted(budget, outcome.Interpreter{}.KeepBytes())}
}

// answerChunks is an answer of n fresh chunks of size bytes, one message,
// as the decoder hands them over: each chunk its own string.
func answerChunks(n, size int) []translate.Chunk {
	chunks := make([]translate.Chunk, n)
	for i := range chunks {
		chunks[i] = translate.Chunk{MessageID: "m1", Text: strings.Repeat(string(rune('a'+i%26)), size), IsText: true}
	}
	return chunks
}

// BenchmarkA128MiBAnswerThroughTheOutcome runs a 128 MiB answer (2,048
// chunks of 64 KiB, one message) through the accumulator, the outcome and
// the encoding of its terminal event, as a default turn does. It reports
// how much memory that takes, over the answer's size:
//   - live: peak-live/answer, the most the steps hold at once with garbage
//     collected at every step (the live heap before a step plus what the
//     step allocates, at the worst step);
//   - rss: hwm-growth/answer, the growth of the process's peak RSS with the
//     default garbage collector. Only the first run of a fresh process
//     tells: go test -run NONE -bench 'A128MiB.*/rss' -benchtime 1x ./acp
func BenchmarkA128MiBAnswerThroughTheOutcome(b *testing.B) {
	const n, size = 2048, 64 << 10
	answer := float64(n * size)
	b.Run("rss", func(b *testing.B) {
		for b.Loop() {
			hwm0 := highWaterMark()
			ev := answerThroughTheOutcome(b, answerChunks(n, size), func() {})
			if hwm := highWaterMark(); hwm0 > 0 && hwm > 0 {
				b.ReportMetric(float64(hwm-hwm0)/answer, "hwm-growth/answer")
			}
			runtime.KeepAlive(ev)
		}
	})
	b.Run("live", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var p peakMeter
			chunks := answerChunks(n, size)
			p.start()
			ev := answerThroughTheOutcome(b, chunks, p.step)
			b.ReportMetric(float64(p.peak)/answer, "peak-live/answer")
			runtime.KeepAlive(ev)
		}
	})
}

// answerThroughTheOutcome is a default turn's handling of an answer, from
// its chunks to its terminal event's encoding; step is called between steps.
func answerThroughTheOutcome(b *testing.B, chunks []translate.Chunk, step func()) store.Event {
	t := newBenchTurn(answer.NewBudget(answer.DefaultMaxBytes))
	size := 0
	for i := range chunks {
		t.apply(translate.Update{Event: &acpgatev1.PromptEvent{}, Chunk: chunks[i], HasChunk: true})
		size += len(chunks[i].Text)
		chunks[i] = translate.Chunk{} // the event that carried it has been sent
	}
	step()
	text, final := t.finish()
	step()
	r := outcome.Interpreter{}.Interpret(outcome.Turn{
		Ending:       outcome.Answered,
		Response:     outcome.Response{Result: []byte(`{"stopReason":"end_turn"}`)},
		Text:         text,
		FinalMessage: final,
	})
	text, final = outcome.Text{}, outcome.Text{}
	step()
	// Encoded as the turn's pump encodes its terminal: from the pieces.
	ev := wire.EncodeTerminal(&acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_Outcome{Outcome: r.Outcome}}, 1, wire.Pieces{Text: r.TextPieces, Final: r.FinalPieces})
	if ev.Len() < size {
		b.Fatalf("the terminal is %d bytes, less than the %d-byte answer", ev.Len(), size)
	}
	step()
	return ev
}

// peakMeter measures a sequence of steps' peak live heap: at each step's
// end it takes the live heap before the step plus the bytes the step
// allocated, then collects garbage.
type peakMeter struct {
	live, total, peak uint64
}

func (p *peakMeter) start() {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	p.live, p.total, p.peak = m.HeapAlloc, m.TotalAlloc, 0
}

func (p *peakMeter) step() {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	p.peak = max(p.peak, p.live+m.TotalAlloc-p.total)
	runtime.GC()
	runtime.ReadMemStats(&m)
	p.live, p.total = m.HeapAlloc, m.TotalAlloc
}

// highWaterMark is the process's peak RSS (VmHWM) in bytes; 0 when unknown.
func highWaterMark() int64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
