package report

import (
	"fmt"
	"math"
	"slices"

	"github.com/acpgate/acpgate/bench/internal/job"
)

// oks returns f of every run that completed.
func oks(rs []job.Result, f func(job.Result) float64) []float64 {
	var v []float64
	for _, r := range rs {
		if r.OK() {
			v = append(v, f(r))
		}
	}
	return v
}

// ratios pairs run i of a with run i of b (measured back to back) and
// returns f(a)/f(b) wherever both completed.
func ratios(a, b []job.Result, f func(job.Result) float64) []float64 {
	var v []float64
	for i := range min(len(a), len(b)) {
		if a[i].OK() && b[i].OK() && f(b[i]) > 0 {
			v = append(v, f(a[i])/f(b[i]))
		}
	}
	return v
}

// Median is the median of v; NaN when v is empty.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// mmm formats "median (min – max)", or the single value.
func mmm(v []float64, f func(float64) string) string {
	if len(v) == 0 {
		return "—"
	}
	m := f(Median(v))
	lo, hi := f(slices.Min(v)), f(slices.Max(v))
	if len(v) == 1 || lo == hi {
		return m
	}
	return fmt.Sprintf("%s (%s – %s)", m, lo, hi)
}

func lostOf(rs []job.Result) (lost, ooo, chunks int64) {
	for _, r := range rs {
		lost += r.Lost
		ooo += r.OutOfOrder
		chunks += r.Chunks
	}
	return
}

func p99(r job.Result) float64 {
	if r.Lat == nil {
		return math.NaN()
	}
	return float64(r.Lat.P99)
}

// scheduledP99 is p99 counted from the agent's schedule (job.Result.Scheduled).
func scheduledP99(r job.Result) float64 {
	if r.Scheduled == nil {
		return math.NaN()
	}
	return float64(r.Scheduled.P99)
}

func p50(r job.Result) float64 {
	if r.Lat == nil {
		return math.NaN()
	}
	return float64(r.Lat.P50)
}

func pmax(r job.Result) float64 {
	if r.Lat == nil {
		return math.NaN()
	}
	return float64(r.Lat.Max)
}

// cpuPerChunk is the CPU microseconds a result spent per chunk: the client
// process's, plus the gateway's for gateway runs.
func cpuPerChunk(r job.Result) float64 {
	if r.Chunks == 0 {
		return math.NaN()
	}
	return float64(r.CPU+r.GatewayCPU) / 1e3 / float64(r.Chunks)
}

func gatewayCPUPerChunk(r job.Result) float64 {
	if r.Chunks == 0 {
		return math.NaN()
	}
	return float64(r.GatewayCPU) / 1e3 / float64(r.Chunks)
}

// p99Diffs pairs run i of a and b and returns the differences of their p99.
func p99Diffs(a, b []job.Result) []float64 {
	var d []float64
	for i := range min(len(a), len(b)) {
		if a[i].OK() && b[i].OK() {
			d = append(d, p99(a[i])-p99(b[i]))
		}
	}
	return d
}

// Quantiles summarises times in ns (nil when there are none).
func Quantiles(v []float64) *job.Latency {
	ns := make([]int64, len(v))
	for i, x := range v {
		ns[i] = int64(x)
	}
	return job.Summarize(ns)
}

// quantile is the p-quantile of v, the same way summarize takes it.
func quantile(v []float64, p float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}
