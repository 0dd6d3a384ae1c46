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
	"github.com/acpgate/acpgate/bench/internal/report"
)

// The instrumentation's section: what Prometheus metrics and OpenTelemetry
// tracing (every span sampled, exported over OTLP) cost the hot path, the
// unpaced small-chunk flood of a streaming client, against a gateway with
// both off. Per-chunk work is meant to be counter increments only, never a
// span per chunk: the bound is ≥ 0.9× the bare gateway's rate.

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
	res := &report.InstrResult{Flood: sh, Runs: map[string][]job.Result{}}
	gateways := map[string]*gatewayProc{report.Instrumented: on, report.Bare: off}
	for rep := range sh.Runs {
		order := []string{report.Instrumented, report.Bare}
		if rep%2 == 1 {
			slices.Reverse(order)
		}
		for _, which := range order {
			r := d.job(gateways[which], job.Job{Client: job.GatewayStream, N: sh.N, Size: sh.Size, Timeout: 5 * time.Minute})
			d.check("instrumentation "+which, r)
			res.Runs[which] = append(res.Runs[which], r)
			logf("   %s run %d %-13s %s (%d events)", sh.Name, rep+1, which, brief(r, sh.N), r.Events)
		}
	}
	// Stopping the instrumented gateway flushes its last spans.
	d.stopGateway(on)
	d.stopGateway(off)
	res.Exports, res.ExportBytes = sink.exports.Load(), sink.len.Load()
	d.rep.Instrumentation = res
	logf("   the collector stand-in received %d exports, %s", res.Exports, report.MiB(res.ExportBytes))
	if res.Exports == 0 {
		return errors.New("the instrumented gateway exported no spans to the collector stand-in")
	}
	return nil
}
