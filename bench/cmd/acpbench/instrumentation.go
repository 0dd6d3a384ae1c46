package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/acpgate/acpgate/bench/internal/job"
)

// The instrumentation's section: what Prometheus metrics and OpenTelemetry
// tracing (every span sampled, exported over OTLP) cost the hot path, the
// unpaced small-chunk flood of a streaming client, against a gateway with
// both off. Per-chunk work is meant to be counter increments only, never a
// span per chunk: the bound is ≥ 0.9× the bare gateway's rate.

// instrumented and bare key the section's runs by gateway.
const (
	instrumented = "instrumented"
	bare         = "bare"
)

// instrResult is what the instrumentation section measured.
type instrResult struct {
	// Flood is run by the gateway-stream client on both gateways, back to
	// back, alternating which goes first.
	Flood shape                   `json:"flood"`
	Runs  map[string][]job.Result `json:"runs"`
	// Exports and ExportBytes are the OTLP requests, and their bytes, the
	// collector stand-in received from the instrumented gateway: evidence
	// that its spans were really exported.
	Exports     int64 `json:"exports"`
	ExportBytes int64 `json:"export_bytes"`
}

// otlpSink is a local OTLP/HTTP collector stand-in: it accepts every trace
// export and discards it, so that the instrumented gateway pays for
// encoding and sending its spans but no collector's own work is measured.
type otlpSink struct {
	srv          *http.Server
	url          string
	exports, len atomic.Int64
}

func startOTLPSink() (*otlpSink, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &otlpSink{url: "http://" + lis.Addr().String() + "/v1/traces"}
	s.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		s.exports.Add(1)
		s.len.Add(n)
		// An empty ExportTraceServiceResponse: everything accepted.
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	})}
	go func() { _ = s.srv.Serve(lis) }()
	return s, nil
}

func (s *otlpSink) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
}

// instrumentationConfig is the configuration an instrumented gateway adds:
// metrics served (on localhost: the configuration refuses the listen
// address itself, 127.0.0.1:0), and tracing to the sink with every trace sampled.
func instrumentationConfig(otlpURL string) string {
	if otlpURL == "" {
		return ""
	}
	return fmt.Sprintf("metrics: {listen: \"localhost:0\"}\ntracing: {enabled: true, protocol: http, endpoint: %q, sampling_ratio: 1}\n", otlpURL)
}

func (d *driver) instrumentationSection() error {
	sink, err := startOTLPSink()
	if err != nil {
		return err
	}
	defer sink.stop()
	on, err := d.gateway(gatewayConf{otlpURL: sink.url})
	if err != nil {
		return err
	}
	off, err := d.gateway(gatewayConf{})
	if err != nil {
		d.stopGateway(on)
		return err
	}
	sh := d.plan.instrFlood
	res := &instrResult{Flood: sh, Runs: map[string][]job.Result{}}
	gateways := map[string]*gatewayProc{instrumented: on, bare: off}
	for rep := range sh.Runs {
		order := []string{instrumented, bare}
		if rep%2 == 1 {
			slices.Reverse(order)
		}
		for _, which := range order {
			r := d.job(gateways[which], job.Job{Client: job.GatewayStream, N: sh.N, Size: sh.Size, Timeout: 5 * time.Minute})
			d.check("instrumentation "+which, r)
			res.Runs[which] = append(res.Runs[which], r)
			d.logf("   %s run %d %-13s %s (%d events)", sh.Name, rep+1, which, brief(r, sh.N), r.Events)
		}
	}
	// Stopping the instrumented gateway flushes its last spans.
	d.stopGateway(on)
	d.stopGateway(off)
	res.Exports, res.ExportBytes = sink.exports.Load(), sink.len.Load()
	d.rep.Instrumentation = res
	d.logf("   the collector stand-in received %d exports, %s", res.Exports, mib(res.ExportBytes))
	if res.Exports == 0 {
		return errors.New("the instrumented gateway exported no spans to the collector stand-in")
	}
	return nil
}

// instrumentationVerdicts is the instrumentation's target.
func (r *report) instrumentationVerdicts() []verdict {
	v := verdict{Figure: "unpaced flood, 64 B chunks, gateway-stream: metrics and tracing (sampling 1.0) on / both off", Target: "≥ 0.9, zero loss"}
	in := r.Instrumentation
	if in == nil {
		return []verdict{v}
	}
	v.Figure = fmt.Sprintf("unpaced flood, %s chunks, gateway-stream: metrics and tracing (sampling 1.0) on / both off", size(in.Flood.Size))
	on, off := in.Runs[instrumented], in.Runs[bare]
	if rat := ratios(on, off, job.Result.Rate); len(rat) > 0 {
		lost, ooo, _ := lostOf(slices.Concat(on, off))
		errs := len(on) + len(off) - len(oks(on, job.Result.Rate)) - len(oks(off, job.Result.Rate))
		v.Known = true
		v.Measured = fmt.Sprintf("%s; %d lost, %d out of order, %d failed runs", mmm(rat, fmtRatio), lost, ooo, errs)
		v.Met = median(rat) >= 0.9 && lost == 0 && ooo == 0 && errs == 0 && in.Exports > 0
	}
	return []verdict{v}
}

func (r *report) instrumentationMD(w func(string, ...any)) {
	in := r.Instrumentation
	if in == nil {
		return
	}
	sh := in.Flood
	w("## Instrumentation\n\n")
	w("What observability costs the hot path: two gateways started side by side, one with `metrics.listen` set and `tracing` enabled (OTLP over HTTP to a local collector stand-in that accepts and discards every export, every trace sampled), one with both off, the gateway-stream client alternating which goes first in each repetition. A turn is a handful of spans whatever its length (the call, the turn, the agent's start-up and requests); each chunk costs counter increments.\n\n")
	w("### %s chunks × %s, unpaced\n\n", fmtInt(float64(sh.N)), size(sh.Size))
	floodTable(w, "gateway", in.Runs, []labelled{
		{instrumented, "metrics and tracing on"},
		{bare, "metrics and tracing off"},
	})
	w("\nRatio, run by run: on / off **%s**. The collector stand-in received %d exports (%s).\n\n",
		mmm(ratios(in.Runs[instrumented], in.Runs[bare], job.Result.Rate), fmtRatio), in.Exports, mib(in.ExportBytes))
}
