package acp

import (
	"context"
	"encoding/json"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/acpgate/acpgate/internal/acp/jsonrpc"
)

// Span names of the gateway's own work on an agent. The requests on the
// wire are named by their JSON-RPC method, as OpenTelemetry's RPC
// conventions (semconv 1.43, those otelgrpc follows for the gateway's own
// calls) name a JSON-RPC span: rpc.system.name "jsonrpc", no service.
const (
	SpanAgentStart = "acpgate.agent.start" // spawn and handshake, all of Open; session/new alone for a warm process
	SpanAgentWarm  = "acpgate.agent.warm"  // spawn, initialize and authenticate of a warm process (Start)
	SpanAgentSpawn = "acpgate.agent.spawn" // starting the process
	SpanTurnCancel = "acpgate.turn.cancel" // from the cancel request to the turn's ending, grace included
)

// Attribute keys of the acpgate domain, those of the turn span (made by
// package server) included, so that the vocabulary is in one place. (The
// keys of the decisions on the agent's requests are clientreq's, which
// sets them.)
const (
	AttrSession   = attribute.Key("acpgate.session.id")
	AttrAttempt   = attribute.Key("acpgate.turn.attempt")
	AttrOneShot   = attribute.Key("acpgate.turn.one_shot")
	AttrClass     = attribute.Key("acpgate.terminal.class")
	AttrReason    = attribute.Key("acpgate.terminal.reason")
	AttrRetryable = attribute.Key("acpgate.terminal.retryable")
	AttrEvents    = attribute.Key("acpgate.turn.events")
	AttrBytes     = attribute.Key("acpgate.turn.bytes")

	AttrAgent        = attribute.Key("acpgate.agent")
	AttrACPSession   = attribute.Key("acpgate.acp_session.id")
	AttrTurn         = attribute.Key("acpgate.turn.id")
	AttrStopReason   = attribute.Key("acpgate.stop_reason")
	AttrCancelCause  = attribute.Key("acpgate.cancel.cause")
	AttrGraceExpired = attribute.Key("acpgate.cancel.grace_expired")
	AttrContainment  = attribute.Key("acpgate.agent.containment")
	AttrLoadSession  = attribute.Key("acpgate.session.load")
	AttrWarm         = attribute.Key("acpgate.agent.warm")
)

// tracer is the configured tracer, or one that records nothing.
func (c *Config) tracer() trace.Tracer {
	if c.Tracer == nil {
		return noop.Tracer{}
	}
	return c.Tracer
}

// requestMeta is the _meta of a request sent in ctx: p's fields
// (traceparent, and tracestate and baggage when present), or nil, which
// leaves _meta out, as it is without tracing.
func requestMeta(ctx context.Context, p propagation.TextMapPropagator) map[string]any {
	if p == nil {
		return nil
	}
	carrier := propagation.MapCarrier{}
	p.Inject(ctx, carrier)
	if len(carrier) == 0 {
		return nil
	}
	m := make(map[string]any, len(carrier))
	for k, v := range carrier {
		m[k] = v
	}
	return m
}

// rpcAttrs are a JSON-RPC span's attributes.
func rpcAttrs(agent, method string) trace.SpanStartOption {
	return trace.WithAttributes(
		semconv.RPCSystemNameJSONRPC,
		semconv.JSONRPCProtocolVersion("2.0"),
		semconv.RPCMethod(method),
		AttrAgent.String(agent),
	)
}

// startCall starts the client span of a request the gateway sends to
// agent.
func startCall(ctx context.Context, tracer trace.Tracer, agent, method string) (context.Context, trace.Span) {
	return tracer.Start(ctx, method, trace.WithSpanKind(trace.SpanKindClient), rpcAttrs(agent, method))
}

// endCall ends a request's span with what its reply says.
func endCall(span trace.Span, reply jsonrpc.Reply, err error) {
	noteReply(span, reply, err)
	span.End()
}

// noteReply sets a request's span's status from its reply.
func noteReply(span trace.Span, reply jsonrpc.Reply, err error) {
	switch {
	case err != nil:
		span.SetStatus(codes.Error, err.Error())
	case reply.End != nil:
		span.SetStatus(codes.Error, "the agent's channel ended: "+reply.End.Detail)
	case reply.Violation != "":
		span.SetStatus(codes.Error, reply.Violation)
	case len(reply.Response.Error) > 0 && string(reply.Response.Error) != "null":
		var e jsonrpc.ErrorObject
		if json.Unmarshal(reply.Response.Error, &e) != nil {
			span.SetStatus(codes.Error, "the agent answered with an error")
			break
		}
		rpcError(span, &e)
	}
}

// noteStopReason records the stop reason a session/prompt answer carries,
// as the agent sent it. It decodes the answer a second time, once per
// turn, only when the span records.
func noteStopReason(span trace.Span, reply jsonrpc.Reply) {
	if !span.IsRecording() || len(reply.Response.Result) == 0 {
		return
	}
	var r struct {
		StopReason string `json:"stopReason"`
	}
	if json.Unmarshal(reply.Response.Result, &r) == nil && r.StopReason != "" {
		span.SetAttributes(AttrStopReason.String(r.StopReason))
	}
}

// rpcError records a JSON-RPC error answer on its request's span: the
// code as rpc.response.status_code and error.type, the message as the
// status's description.
func rpcError(span trace.Span, e *jsonrpc.ErrorObject) {
	code := strconv.FormatInt(e.Code, 10)
	span.SetAttributes(semconv.RPCResponseStatusCode(code), semconv.ErrorTypeKey.String(code))
	span.SetStatus(codes.Error, e.Message)
}

// failSpan marks span failed with err, when there is one.
func failSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
}

// serveSpan starts the server span of a request agent sent (fs/*,
// session/request_permission), a child of turn's session/prompt span
// (turn is nil outside a turn), so that a permission wait or a file read
// shows inside the turn that caused it.
func serveSpan(ctx context.Context, tracer trace.Tracer, agent, method string, t *turn) (context.Context, trace.Span) {
	if t != nil {
		ctx = trace.ContextWithSpanContext(ctx, t.spanCtx)
	}
	return tracer.Start(ctx, method, trace.WithSpanKind(trace.SpanKindServer), rpcAttrs(agent, method))
}
