package report

import (
	"fmt"
	"slices"

	"github.com/acpgate/acpgate/bench/internal/job"
)

// Instrumented and bare key the section's runs by gateway.
const (
	Instrumented = "instrumented"
	Bare         = "bare"
)

// InstrResult is what the instrumentation section measured.
type InstrResult struct {
	// Flood is run by the gateway-stream client on both gateways, back to
	// back, alternating which goes first.
	Flood Shape                   `json:"flood"`
	Runs  map[string][]job.Result `json:"runs"`
	// Exports and ExportBytes are the OTLP requests, and their bytes, the
	// collector stand-in received from the instrumented gateway: evidence
	// that its spans were really exported.
	Exports     int64 `json:"exports"`
	ExportBytes int64 `json:"export_bytes"`
}

// instrumentationVerdicts is the instrumentation's target.
func (r *Report) instrumentationVerdicts() []verdict {
	v := verdict{Figure: "unpaced flood, 64 B chunks, gateway-stream: metrics and tracing (sampling 1.0) on / both off", Target: "≥ 0.9, zero loss"}
	in := r.Instrumentation
	if in == nil {
		return []verdict{v}
	}
	v.Figure = fmt.Sprintf("unpaced flood, %s chunks, gateway-stream: metrics and tracing (sampling 1.0) on / both off", size(in.Flood.Size))
	on, off := in.Runs[Instrumented], in.Runs[Bare]
	if rat := ratios(on, off, job.Result.Rate); len(rat) > 0 {
		lost, ooo, _ := lostOf(slices.Concat(on, off))
		errs := len(on) + len(off) - len(oks(on, job.Result.Rate)) - len(oks(off, job.Result.Rate))
		v.Known = true
		v.Measured = fmt.Sprintf("%s; %d lost, %d out of order, %d failed runs", mmm(rat, fmtRatio), lost, ooo, errs)
		v.Met = Median(rat) >= 0.9 && lost == 0 && ooo == 0 && errs == 0 && in.Exports > 0
	}
	return []verdict{v}
}

func (r *Report) instrumentationMD(w func(string, ...any)) {
	in := r.Instrumentation
	if in == nil {
		return
	}
	sh := in.Flood
	w("## Instrumentation\n\n")
	w("What observability costs the hot path: two gateways started side by side, one with `metrics.listen` set and `tracing` enabled (OTLP over HTTP to a local collector stand-in that accepts and discards every export, every trace sampled), one with both off, the gateway-stream client alternating which goes first in each repetition. A turn is a handful of spans whatever its length (the call, the turn, the agent's start-up and requests); each chunk costs counter increments.\n\n")
	w("### %s chunks × %s, unpaced\n\n", FmtInt(float64(sh.N)), size(sh.Size))
	floodTable(w, "gateway", in.Runs, []labelled{
		{Instrumented, "metrics and tracing on"},
		{Bare, "metrics and tracing off"},
	})
	w("\nRatio, run by run: on / off **%s**. The collector stand-in received %d exports (%s).\n\n",
		mmm(ratios(in.Runs[Instrumented], in.Runs[Bare], job.Result.Rate), fmtRatio), in.Exports, MiB(in.ExportBytes))
}
