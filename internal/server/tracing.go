package server

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/acpgate/acpgate/internal/acp"
	"github.com/acpgate/acpgate/internal/config"
	"github.com/acpgate/acpgate/internal/metrics"
	"github.com/acpgate/acpgate/internal/sessions"
	"github.com/acpgate/acpgate/internal/tracing"
	"github.com/acpgate/acpgate/internal/turn"
	"github.com/acpgate/acpgate/outcome"
)

// SpanTurn is the span of one prompt turn, from its admission to its
// terminal: a child of the Prompt call's server span (and so of the
// caller's trace), the parent of the agent's start-up (one-shot turns) and
// of the session/prompt request.
const SpanTurn = "acpgate.turn"

// instrumentationName names the gateway's tracer.
const instrumentationName = "github.com/acpgate/acpgate"

// traceFlushBound is how long shutdown waits for the last spans to reach
// the collector, after the gateway has stopped: within the 3 s by which
// the process may overrun its shutdown_grace, so that an unreachable
// collector never holds the exit.
const traceFlushBound = 2 * time.Second

// tracer is the gateway's tracer, or one that records nothing.
func (o Options) tracer() trace.Tracer {
	if o.TracerProvider == nil {
		return noop.Tracer{}
	}
	return o.TracerProvider.Tracer(instrumentationName)
}

// startTracing builds the tracer provider the configuration asks for, and
// the logger that stamps records with the active span; without tracing it
// returns nil and log unchanged. shutdown flushes and stops the provider.
func startTracing(ctx context.Context, cfg *config.Config, version string, lookupEnv func(string) (string, bool), log *slog.Logger) (_ *sdktrace.TracerProvider, _ *slog.Logger, shutdown func(), _ error) {
	t := cfg.Tracing
	if !t.Enabled {
		return nil, log, func() {}, nil
	}
	tp, err := tracing.New(ctx, tracing.Options{
		Protocol:       string(t.Protocol),
		Endpoint:       t.Endpoint,
		Insecure:       t.Insecure,
		SamplingRatio:  t.SamplingRatio,
		ServiceVersion: version,
		LookupEnv:      lookupEnv,
	})
	if err != nil {
		return nil, nil, nil, err
	}
	log = slog.New(tracing.LogHandler(log.Handler()))
	log.Info("tracing", "protocol", cmp.Or(string(t.Protocol), "environment"), "endpoint", cmp.Or(t.Endpoint, "environment"), "sampling_ratio", t.SamplingRatio)
	shutdown = func() {
		flush, cancel := context.WithTimeout(context.WithoutCancel(ctx), traceFlushBound)
		defer cancel()
		if err := tp.Shutdown(flush); err != nil {
			log.Warn("flushing the last spans", "err", err)
		}
	}
	return tp, log, shutdown, nil
}

// tracerProvider is tp as the interface, nil (not a typed nil) without
// tracing.
func tracerProvider(tp *sdktrace.TracerProvider) trace.TracerProvider {
	if tp == nil {
		return nil
	}
	return tp
}

// agentEnviron is an agent's environment: its own (Agent.Environ), and,
// when the gateway traces, the gateway's OTLP variables (see
// tracing.AgentEnv), which the agent's own settings override.
func agentEnviron(a config.Agent, opts Options, lookup func(string) (string, bool)) []string {
	own := a.Environ(lookup)
	if opts.TracerProvider == nil {
		return own
	}
	vars := map[string]string{}
	for _, kv := range append(tracing.AgentEnv(opts.Environ), own...) {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	env := make([]string, 0, len(vars))
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	return env
}

// turnSpan starts a turn's span in ctx, which holds the Prompt call's.
func (g *Gateway) turnSpan(ctx context.Context, r *turn.Running, oneShot bool) (context.Context, trace.Span) {
	return g.tracer.Start(ctx, SpanTurn, trace.WithAttributes(
		acp.AttrAgent.String(r.Rec.Agent),
		acp.AttrTurn.String(r.Rec.ID),
		acp.AttrAttempt.Int(int(r.Rec.Attempt)),
		acp.AttrOneShot.Bool(oneShot),
	))
}

// endTurnSpan records a turn's ending on its span and ends it. live is
// the turn's session, nil when its agent did not start.
func endTurnSpan(span trace.Span, live *sessions.Live, result outcome.Result, st turn.Stats) {
	if span.IsRecording() {
		class, reason := metrics.Classify(result.Error)
		attrs := []attribute.KeyValue{acp.AttrClass.String(class), acp.AttrEvents.Int64(st.Events), acp.AttrBytes.Int64(st.Bytes)}
		if reason != "" {
			attrs = append(attrs, acp.AttrReason.String(reason))
		}
		if live != nil {
			attrs = append(attrs, acp.AttrSession.String(live.ID()), acp.AttrACPSession.String(live.ACP().ID()))
		}
		if o := result.Outcome; o != nil {
			attrs = append(attrs, acp.AttrStopReason.String(o.GetStopReason()))
		} else {
			attrs = append(attrs, acp.AttrRetryable.Bool(result.Error.GetRetryable()))
			span.SetStatus(otelcodes.Error, result.Error.GetMessage())
		}
		span.SetAttributes(attrs...)
	}
	span.End()
}

// exemplar labels a gRPC latency observation with the call's trace, when
// it is sampled, so that a slow bucket in Prometheus leads to a trace.
func exemplar(ctx context.Context) prometheus.Labels {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsSampled() {
		return nil
	}
	return prometheus.Labels{"trace_id": sc.TraceID().String()}
}
