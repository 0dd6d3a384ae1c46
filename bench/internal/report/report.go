// Package report is the benchmark's report: the results of every section
// of a run (Report, which `acpbench run -json` writes and `acpbench report
// -json` reads back), the verdicts on the targets, and their rendering as
// Markdown, docs/benchmarks.md. It reads only what a run measured, so that
// a report renders again from its JSON without running anything; the
// driver and its sections fill it in. The sections' client labels, in the
// order their tables list them, are here too (ThroughputClients and the
// like): the driver runs the clients in that order.
package report

import (
	"time"

	"github.com/acpgate/acpgate/bench/internal/job"
)

// Report is everything a run measured.
type Report struct {
	Smoke    bool          `json:"smoke"`
	Machine  Machine       `json:"machine"`
	Duration time.Duration `json:"duration"`
	Failures []string      `json:"failures"`
	// Baseline is the revision whose acpgate the throughput section also
	// measured (-baseline), "" when none.
	Baseline string `json:"baseline,omitempty"`

	Throughput   []ShapeResult `json:"throughput"`
	Paced        []PacedResult `json:"paced"`
	Breaks       []BreakResult `json:"breaks"`
	TTFC         *TTFCResult   `json:"ttfc"`
	Warm         *WarmResult   `json:"warm"`
	Gemini       *GeminiResult `json:"gemini"`
	Concurrency  *ConcResult   `json:"concurrency"`
	Turns        *TurnsResult  `json:"turns"`
	Answer       *AnswerResult `json:"answer"`
	Idle         *IdleResult   `json:"idle"`
	Backpressure *BPResult     `json:"backpressure"`
	// BackpressureOmit is the same slow client with omit_outcome_text.
	BackpressureOmit *BPResult       `json:"backpressure_omit"`
	Store            *StoreResult    `json:"store"`
	Instrumentation  *InstrResult    `json:"instrumentation"`
	Cluster          *ClusterResult  `json:"cluster"`
	Profiles         []ProfileResult `json:"profiles"`
	Interference     Interference    `json:"interference"`
}

// ProfileResult is one flood run through a profiling acpgate serve, and
// `go tool pprof -top` of its profiles.
type ProfileResult struct {
	Shape  Shape        `json:"shape"`
	Runs   []job.Result `json:"runs"`
	CPU    string       `json:"cpu"`
	CPUCum string       `json:"cpu_cum"`
	Allocs string       `json:"allocs"`
}

// Machine is what the run ran on, and on which commit.
type Machine struct {
	CPU    string `json:"cpu"`
	Cores  int    `json:"cores"`
	Memory int64  `json:"memory"`
	Kernel string `json:"kernel"`
	Go     string `json:"go"`
	Commit string `json:"commit"`
	Date   string `json:"date"`
}

// ShapeResult is one unpaced flood's runs, by client label, and the
// gateway's memory after them.
type ShapeResult struct {
	Shape      Shape                   `json:"shape"`
	Runs       map[string][]job.Result `json:"runs"`
	GatewayHWM int64                   `json:"gateway_hwm"`
	GatewayRSS int64                   `json:"gateway_rss"`
}

// PacedResult is one paced rate's runs, by client label.
type PacedResult struct {
	Rate int                     `json:"rate"`
	N    int                     `json:"n"`
	Size int                     `json:"size"`
	Runs map[string][]job.Result `json:"runs"`
}

// BreakResult is the SDK peer's runs at one paced rate, to find where it
// breaks.
type BreakResult struct {
	Rate int          `json:"rate"`
	N    int          `json:"n"`
	Runs []job.Result `json:"runs"`
}

// Survived is how many runs the peer completed.
func (b BreakResult) Survived() int {
	n := 0
	for _, r := range b.Runs {
		if !r.Broke && !r.Failed() {
			n++
		}
	}
	return n
}

// TTFCResult is the time-to-first-chunk runs, by client.
type TTFCResult struct {
	Runs map[string][]job.Result `json:"runs"`
}

// ConcResult is many turns at once through each client.
type ConcResult struct {
	Streams    int                     `json:"streams"`
	N          int                     `json:"n"`
	Size       int                     `json:"size"`
	Runs       map[string][]job.Result `json:"runs"`
	GatewayHWM int64                   `json:"gateway_hwm"`
}

// IdleResult is the gateway's memory with many idle sessions open.
type IdleResult struct {
	Target     int           `json:"target"`
	Opened     int           `json:"opened"`
	Listed     int           `json:"listed"`
	Errors     int           `json:"errors"`
	FirstError string        `json:"first_error,omitempty"`
	Before     int64         `json:"before"`
	After      int64         `json:"after"`
	Closed     int64         `json:"closed"`
	Agents     int           `json:"agents"`
	AgentsRSS  int64         `json:"agents_rss"`
	CreateTime time.Duration `json:"create_time"`
	CloseTime  time.Duration `json:"close_time"`
}

// PerSession is the gateway's RSS growth per session opened.
func (r IdleResult) PerSession() int64 {
	if r.Opened == 0 {
		return 0
	}
	return (r.After - r.Before) / int64(r.Opened)
}

// BPSample is one reading of the gateway's RSS, with the chunks the client
// had read by then.
type BPSample struct {
	At   time.Duration `json:"at"`
	Unix int64         `json:"unix"` // when, in Unix ns
	RSS  int64         `json:"rss"`
	Read int64         `json:"read"`
}

// BPResult is one turn read by a slow client, with the gateway's RSS
// sampled along it.
type BPResult struct {
	N          int           `json:"n"`
	Size       int           `json:"size"`
	ReadRate   int           `json:"read_rate"`
	Base       int64         `json:"base"`
	HWM        int64         `json:"hwm"`
	Samples    []BPSample    `json:"samples"`
	Result     job.Result    `json:"result"`
	MaxAhead   int           `json:"max_ahead"`
	AgentSpan  time.Duration `json:"agent_span"`
	LastSent   int64         `json:"last_sent"` // the agent's last chunk, Unix ns
	ClientSpan time.Duration `json:"client_span"`
}

// heldBack reports whether the agent stayed within a pipe's worth of the
// client (64 KiB of pipe, a few frames in acpgate and gRPC's windows): the
// client's pace held it back.
func (b BPResult) heldBack() bool { return int64(b.MaxAhead)*int64(b.Size) <= 16<<20 }

// streaming are the samples taken while the agent was still sending (before
// its last chunk), that is before acpgate could start building the outcome.
func (b BPResult) streaming() []BPSample {
	var out []BPSample
	for _, s := range b.Samples {
		if s.Unix < b.LastSent {
			out = append(out, s)
		}
	}
	return out
}

// MaxRSS is the largest RSS sampled while the chunks streamed.
func (b BPResult) MaxRSS() int64 {
	var m int64
	for _, s := range b.streaming() {
		m = max(m, s.RSS)
	}
	return m
}

// maxExcess is the largest RSS, while the chunks streamed, over the base
// and the text the client had read by then (text the gateway keeps for the
// outcome).
func (b BPResult) maxExcess() int64 {
	var m int64
	for _, s := range b.streaming() {
		m = max(m, s.RSS-b.Base-s.Read*int64(b.Size))
	}
	return m
}

// Interference counts what other processes on the machine did to the
// measurements.
type Interference struct {
	Jobs      int           `json:"jobs"`      // measurements kept
	Repeated  int           `json:"repeated"`  // measurements run again because of foreign load
	Waited    time.Duration `json:"waited"`    // total time spent waiting for a quiet machine
	NotQuiet  int           `json:"not_quiet"` // measurements started without a quiet machine
	Foreign   []float64     `json:"foreign"`   // per kept measurement: foreign CPU, in cores
	Disturbed int           `json:"disturbed"` // kept measurements still above the threshold
	Threshold float64       `json:"threshold"` // cores
}

// Shape is an unpaced flood: N chunks of Size bytes, run Runs times.
type Shape struct {
	Name    string `json:"name"`
	N       int    `json:"n"`
	Size    int    `json:"size"`
	Runs    int    `json:"runs"`
	Purpose string `json:"purpose"`
}
