package main

import (
	"time"

	"github.com/acpgate/acpgate/bench/internal/report"
)

// plan is what a run measures: the full benchmark or the smoke.
type plan struct {
	runs int

	floods []report.Shape // unpaced

	pacedRates   []int
	pacedSeconds float64
	pacedSize    int
	// llm is the LLM-like stream: a slow pace of small chunks, measured
	// after the paced rates and, many at once, by the turns section.
	llm pace
	// turnsN are the numbers of simultaneous LLM-like one-shot turns the
	// turns section measures, turnsRuns the rounds over them.
	turnsN    []int
	turnsRuns int
	// answer is the flood whose peak gateway RSS the answer section reads
	// with the default client (which gets the whole text in the outcome).
	answer report.Shape

	breakRates   []int // paced rates to find where the peer breaks
	breakRuns    int
	breakSeconds float64

	ttfcRuns int

	warmRuns    int           // one-shot turns warm, cold and on an open session
	warmSustain time.Duration // how long the sustained one-shot rate runs

	geminiRuns int // Gemini CLI's one-shot turns warm, cold and on an open session

	concStreams, concN, concRuns int

	idleSessions int

	bpN, bpSize, bpReadRate int

	storeFlood        report.Shape // gateway-stream on sqlite and on memory, then replayed
	storePacedRate    int
	stallN, stallSize int // the flood a watcher never reads

	instrFlood report.Shape // gateway-stream with metrics and tracing on and off

	clusterTurns int // turns on a session per path (owner, forwarded) for the time to first chunk

	profile []report.Shape // floods run through a profiling acpgate serve
}

// pace is a paced turn's shape: n chunks of size bytes at rate chunks/s.
type pace struct{ rate, n, size int }

// burstRuns is how many times more often than a flood the short burst is
// measured. A burst turn lasts a few milliseconds, so one scheduling delay
// or page-cache miss moves it by half; over 5 runs its ratio to the floor
// ranged 0.29 – 0.87 in one report and its median moved by a third from
// one report to the next on the same code. 25 runs cost under a minute.
const burstRuns = 5

func fullPlan(runs int) plan {
	return plan{
		runs: runs,
		floods: []report.Shape{
			{Name: "64 B flood", N: 200_000, Size: 64, Runs: runs, Purpose: "many small chunks: per-chunk overhead"},
			{Name: "64 KiB flood", N: 2_000, Size: 64 << 10, Runs: runs, Purpose: "few large chunks: bytes moved (128 MiB of text)"},
			{Name: "1,000-chunk burst", N: 1_000, Size: 64, Runs: burstRuns * runs, Purpose: "a burst the SDK peer survives (its queue holds 1,024)"},
		},
		pacedRates:   []int{1_000, 20_000, 50_000, 100_000},
		pacedSeconds: 3,
		pacedSize:    64,
		llm:          pace{rate: 100, n: 300, size: 40},
		turnsN:       []int{1, 10, 25, 50, 100},
		turnsRuns:    3,
		answer:       report.Shape{Name: "64 KiB flood", N: 2_000, Size: 64 << 10, Runs: 1},
		breakRates:   []int{25_000, 30_000, 35_000, 40_000, 45_000, 60_000, 80_000},
		breakRuns:    3,
		breakSeconds: 2,
		ttfcRuns:     20,
		warmRuns:     20, warmSustain: 20 * time.Second,
		geminiRuns:  20,
		concStreams: 200, concN: 1_000, concRuns: 3,
		idleSessions: 1_000,
		bpN:          2_500, bpSize: 64 << 10, bpReadRate: 100,
		storeFlood:     report.Shape{Name: "64 B flood", N: 200_000, Size: 64, Runs: runs, Purpose: "the store's cost per chunk"},
		storePacedRate: 20_000,
		stallN:         16_384, stallSize: 64 << 10, // 1 GiB
		instrFlood: report.Shape{Name: "64 B flood", N: 200_000, Size: 64, Runs: runs, Purpose: "the instrumentation's cost per chunk"},
		profile: []report.Shape{
			{Name: "64 B flood", N: 200_000, Size: 64, Runs: 2},
			{Name: "64 KiB flood", N: 2_000, Size: 64 << 10, Runs: 2},
		},
		clusterTurns: 500,
	}
}

func smokePlan() plan {
	return plan{
		runs: 1,
		floods: []report.Shape{
			{Name: "64 B flood", N: 2_000, Size: 64, Runs: 1, Purpose: "many small chunks: per-chunk overhead"},
			{Name: "64 KiB flood", N: 20, Size: 64 << 10, Runs: 1, Purpose: "few large chunks: bytes moved"},
			{Name: "1,000-chunk burst", N: 100, Size: 64, Runs: 1, Purpose: "a burst the SDK peer survives"},
		},
		pacedRates:   []int{1_000, 20_000},
		pacedSeconds: 0.2,
		pacedSize:    64,
		llm:          pace{rate: 100, n: 20, size: 40},
		turnsN:       []int{1, 3},
		turnsRuns:    1,
		answer:       report.Shape{Name: "64 KiB flood", N: 20, Size: 64 << 10, Runs: 1},
		breakRates:   []int{30_000},
		breakRuns:    1,
		breakSeconds: 0.2,
		ttfcRuns:     2,
		warmRuns:     2, warmSustain: 3 * time.Second,
		geminiRuns:  2,
		concStreams: 10, concN: 100, concRuns: 1,
		idleSessions: 20,
		bpN:          30, bpSize: 64 << 10, bpReadRate: 100,
		storeFlood:     report.Shape{Name: "64 B flood", N: 2_000, Size: 64, Runs: 1, Purpose: "the store's cost per chunk"},
		storePacedRate: 20_000,
		stallN:         256, stallSize: 64 << 10,
		instrFlood: report.Shape{Name: "64 B flood", N: 2_000, Size: 64, Runs: 1, Purpose: "the instrumentation's cost per chunk"},
		profile: []report.Shape{
			{Name: "64 B flood", N: 2_000, Size: 64, Runs: 1},
		},
		clusterTurns: 10,
	}
}
