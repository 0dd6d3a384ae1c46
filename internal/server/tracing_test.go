package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc/metadata"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/config"
	"github.com/acpgate/acpgate/internal/metrics"
	"github.com/acpgate/acpgate/internal/server"
	"github.com/acpgate/acpgate/internal/testutil"
	"github.com/acpgate/acpgate/internal/tracing"
)

// The caller's trace, as a traceparent a client would send.
const (
	callerTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpanID  = "00f067aa0ba902b7"
	callerParent  = "00-" + callerTraceID + "-" + callerSpanID + "-01"
)

// withRecordingAgent adds the agent "traced": the test agent recording the
// _meta of every message it receives in the file returned, under the reject
// policy (a permission request is decided at once).
func withRecordingAgent(t *testing.T, opts *server.Options) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "meta.jsonl")
	a := opts.Config.Agents[0]
	a.Name = "traced"
	a.Args = []string{"--unique-sessions", "--record-meta", file}
	a.PermissionPolicy = config.PolicyReject
	opts.Config.Agents = append(opts.Config.Agents, a)
	return file
}

// recordedMeta is one line of the test agent's --record-meta file.
type recordedMeta struct {
	Method string            `json:"method"`
	Meta   map[string]string `json:"meta"`
}

func readMeta(t *testing.T, file string) []recordedMeta {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []recordedMeta
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var m recordedMeta
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// waitForSpan waits (at most 5 s) until exp holds a span named name, and
// returns every span then.
func waitForSpan(t *testing.T, exp *tracetest.InMemoryExporter, name string) tracetest.SpanStubs {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		spans := exp.GetSpans()
		for _, s := range spans {
			if s.Name == name {
				return spans
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s span within 5s; have %v", name, spanNames(spans))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func spanNames(spans tracetest.SpanStubs) []string {
	var names []string
	for _, s := range spans {
		names = append(names, s.Name)
	}
	return names
}

// only is the single span named name.
func only(t *testing.T, spans tracetest.SpanStubs, name string) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans named %s, want 1; have %v", len(found), name, spanNames(spans))
	}
	return found[0]
}

func attrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

func TestATurnsSpansContinueTheCallersTraceFromSpawnThroughTheHandshakeToThePrompt(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	var logs testutil.LockedBuffer
	var metaFile string
	h := startWith(t, func(o *server.Options) {
		o.TracerProvider = tp
		o.Logger = slog.New(tracing.LogHandler(slog.NewJSONHandler(&logs, nil)))
		metaFile = withRecordingAgent(t, o)
	})

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "traceparent", callerParent, "tracestate", "vendor=opaque", "baggage", "tenant=blue")
	stream, err := h.client.Prompt(ctx, &acpgatev1.PromptRequest{Agent: "traced", Text: "permission tool-1\nchunk hello"})
	if err != nil {
		t.Fatal(err)
	}
	events := collect(t, stream)
	if events[len(events)-1].GetOutcome() == nil {
		t.Fatalf("the turn did not complete: %v", events[len(events)-1])
	}
	turnID := events[0].GetStarted().GetTurnId()
	// The call's span ends once gRPC has sent the status, which the
	// client may see first: wait for it as for the turn's.
	waitForSpan(t, exp, server.SpanTurn)
	spans := waitForSpan(t, exp, "acpgate.v1.AgentGateway/Prompt")

	for _, s := range spans {
		if got := s.SpanContext.TraceID().String(); got != callerTraceID {
			t.Errorf("span %s is in trace %s, not the caller's %s", s.Name, got, callerTraceID)
		}
	}
	call := only(t, spans, "acpgate.v1.AgentGateway/Prompt")
	turn := only(t, spans, server.SpanTurn)
	start := only(t, spans, "acpgate.agent.start")
	spawn := only(t, spans, "acpgate.agent.spawn")
	initialize := only(t, spans, "initialize")
	newSession := only(t, spans, "session/new")
	prompt := only(t, spans, "session/prompt")
	permission := only(t, spans, "session/request_permission")
	parentOf := map[string]struct{ child, parent tracetest.SpanStub }{
		"the Prompt call continues the caller's span": {call, tracetest.SpanStub{SpanContext: call.Parent}},
		"the turn is the call's child":                {turn, call},
		"the agent's start-up is the turn's":          {start, turn},
		"the spawn is the start-up's":                 {spawn, start},
		"initialize is the start-up's":                {initialize, start},
		"session/new is the start-up's":               {newSession, start},
		"session/prompt is the turn's":                {prompt, turn},
		"the permission request is the prompt's":      {permission, prompt},
	}
	for what, rel := range parentOf {
		if rel.child.Parent.SpanID() != rel.parent.SpanContext.SpanID() {
			t.Errorf("%s: %s's parent is %s, want %s", what, rel.child.Name, rel.child.Parent.SpanID(), rel.parent.SpanContext.SpanID())
		}
	}
	if got := call.Parent.SpanID().String(); got != callerSpanID || !call.Parent.IsRemote() {
		t.Errorf("the Prompt call's parent is %s (remote %v), want the caller's %s", got, call.Parent.IsRemote(), callerSpanID)
	}

	ta := attrs(turn)
	for key, want := range map[attribute.Key]string{
		"acpgate.agent":          "traced",
		"acpgate.turn.id":        turnID,
		"acpgate.terminal.class": "outcome",
		"acpgate.stop_reason":    "end_turn",
	} {
		if got := ta[key].String(); got != want {
			t.Errorf("the turn's %s = %q, want %q", key, got, want)
		}
	}
	if ta["acpgate.acp_session.id"].AsString() == "" || ta["acpgate.session.id"].AsString() == "" {
		t.Errorf("the turn's span names no session: %v", ta)
	}
	if n := ta["acpgate.turn.events"].AsInt64(); n != int64(len(events)-2) {
		t.Errorf("acpgate.turn.events = %d, want the %d events between started and the terminal", n, len(events)-2)
	}
	if b := ta["acpgate.turn.bytes"].AsInt64(); b <= 0 {
		t.Errorf("acpgate.turn.bytes = %d", b)
	}
	if got := attrs(prompt)["acpgate.stop_reason"].AsString(); got != "end_turn" {
		t.Errorf("session/prompt's stop reason = %q", got)
	}
	for key, want := range map[attribute.Key]string{"rpc.system.name": "jsonrpc", "rpc.method": "session/prompt", "jsonrpc.protocol.version": "2.0"} {
		if got := attrs(prompt)[key].String(); got != want {
			t.Errorf("session/prompt's %s = %q, want %q", key, got, want)
		}
	}
	if got := attrs(permission)["acpgate.permission.decided_by"].AsString(); got != "PERMISSION_DECIDER_POLICY" {
		t.Errorf("the permission span's decided_by = %q", got)
	}

	// The agent received each request's own span as its parent.
	spanOf := map[string]tracetest.SpanStub{"initialize": initialize, "session/new": newSession, "session/prompt": prompt}
	got := readMeta(t, metaFile)
	if len(got) != 3 {
		t.Fatalf("the agent recorded %v, want initialize, session/new and session/prompt", got)
	}
	for _, m := range got {
		want := "00-" + callerTraceID + "-" + spanOf[m.Method].SpanContext.SpanID().String() + "-01"
		if m.Meta["traceparent"] != want {
			t.Errorf("%s carried traceparent %q, want %q", m.Method, m.Meta["traceparent"], want)
		}
		if m.Meta["tracestate"] != "vendor=opaque" || m.Meta["baggage"] != "tenant=blue" {
			t.Errorf("%s carried tracestate %q and baggage %q, want the caller's", m.Method, m.Meta["tracestate"], m.Meta["baggage"])
		}
	}

	// The turn's log lines lead to its trace.
	var completed map[string]any
	for line := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(line, `"msg":"turn completed"`) {
			_ = json.Unmarshal([]byte(line), &completed)
		}
	}
	if completed["trace_id"] != callerTraceID || completed["span_id"] != turn.SpanContext.SpanID().String() {
		t.Errorf("the turn's log line carries trace_id %v span_id %v, want %s and the turn span's %s", completed["trace_id"], completed["span_id"], callerTraceID, turn.SpanContext.SpanID())
	}
}

// startTraced starts a gateway that traces into the exporter returned,
// with the recording agent "traced" (see withRecordingAgent) whose file it
// returns.
func startTraced(t *testing.T) (*harness, *tracetest.InMemoryExporter, string) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	var metaFile string
	h := startWith(t, func(o *server.Options) {
		o.TracerProvider = tp
		metaFile = withRecordingAgent(t, o)
	})
	return h, exp, metaFile
}

func TestACancelledTurnsCancelAndGraceAreASpanThatTheAgentsCancelContinues(t *testing.T) {
	h, exp, metaFile := startTraced(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sess, err := h.client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "traced"})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := h.client.Prompt(ctx, &acpgatev1.PromptRequest{SessionId: sess.GetId(), Text: "chunk waiting\nhang"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil { // started
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil { // the chunk: the agent is hanging
		t.Fatal(err)
	}
	if _, err := h.client.Cancel(ctx, &acpgatev1.CancelRequest{SessionId: sess.GetId()}); err != nil {
		t.Fatal(err)
	}
	rest := collect2(t, stream)
	if !rest[len(rest)-1].GetError().GetHarness().GetCancelled() {
		t.Fatalf("the turn did not end cancelled: %v", rest[len(rest)-1])
	}
	spans := waitForSpan(t, exp, server.SpanTurn)
	cancelSpan := only(t, spans, "acpgate.turn.cancel")
	prompt := only(t, spans, "session/prompt")
	if cancelSpan.Parent.SpanID() != prompt.SpanContext.SpanID() {
		t.Errorf("the cancel's parent is %s, want session/prompt's %s", cancelSpan.Parent.SpanID(), prompt.SpanContext.SpanID())
	}
	ca := attrs(cancelSpan)
	if ca["acpgate.cancel.cause"].AsString() != "cancel requested through the Cancel call" || ca["acpgate.cancel.grace_expired"].AsBool() {
		t.Errorf("the cancel span's attributes: %v", ca)
	}
	if got := attrs(only(t, spans, server.SpanTurn))["acpgate.terminal.reason"].AsString(); got != "cancelled" {
		t.Errorf("the turn's terminal reason = %q, want cancelled", got)
	}
	var sawCancel bool
	for _, m := range readMeta(t, metaFile) {
		if m.Method == "session/cancel" {
			sawCancel = true
			if want := "00-" + cancelSpan.SpanContext.TraceID().String() + "-" + cancelSpan.SpanContext.SpanID().String() + "-01"; m.Meta["traceparent"] != want {
				t.Errorf("session/cancel carried traceparent %q, want the cancel span's %q", m.Meta["traceparent"], want)
			}
		}
	}
	if !sawCancel {
		t.Error("the agent recorded no session/cancel")
	}
}

func TestWithTracingOffTheAgentReceivesNoMetaEvenFromATracedCaller(t *testing.T) {
	var metaFile string
	h := startWith(t, func(o *server.Options) { metaFile = withRecordingAgent(t, o) })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "traceparent", callerParent)
	stream, err := h.client.Prompt(ctx, &acpgatev1.PromptRequest{Agent: "traced", Text: "chunk hello"})
	if err != nil {
		t.Fatal(err)
	}
	collect(t, stream)
	got := readMeta(t, metaFile)
	if len(got) != 3 {
		t.Fatalf("the agent recorded %v, want initialize, session/new and session/prompt", got)
	}
	for _, m := range got {
		if m.Meta != nil {
			t.Errorf("%s carried _meta %v with tracing off", m.Method, m.Meta)
		}
	}
}

func TestGRPCLatencyObservationsCarryTheSampledCallersTraceIDAsAnExemplar(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	m := metrics.New(metrics.Limits{})
	h := startWith(t, func(o *server.Options) {
		o.TracerProvider = tp
		o.Metrics = m
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "traceparent", callerParent)
	if _, err := h.client.ListAgents(ctx, &acpgatev1.ListAgentsRequest{}); err != nil {
		t.Fatal(err)
	}
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var exemplars []string
	for _, f := range fams {
		if f.GetName() != "grpc_server_handling_seconds" {
			continue
		}
		for _, metric := range f.GetMetric() {
			for _, b := range metric.GetHistogram().GetBucket() {
				for _, l := range b.GetExemplar().GetLabel() {
					exemplars = append(exemplars, l.GetName()+"="+l.GetValue())
				}
			}
		}
	}
	if !slices.Contains(exemplars, "trace_id="+callerTraceID) {
		t.Errorf("grpc_server_handling_seconds exemplars %v, want one with trace_id=%s", exemplars, callerTraceID)
	}
}

func TestAnAgentsFileRequestIsASpanInsideItsTurnCarryingTheErrorItWasAnswered(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	h := startWith(t, func(o *server.Options) {
		o.TracerProvider = tp
		withRecordingAgent(t, o)
		o.Config.Agents[len(o.Config.Agents)-1].FS.Read = true
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream, err := h.client.Prompt(ctx, &acpgatev1.PromptRequest{Agent: "traced", Text: "read no-such-file.txt\nchunk done"})
	if err != nil {
		t.Fatal(err)
	}
	collect(t, stream)
	spans := waitForSpan(t, exp, server.SpanTurn)
	read := only(t, spans, "fs/read_text_file")
	if read.Parent.SpanID() != only(t, spans, "session/prompt").SpanContext.SpanID() {
		t.Error("the file request is not a child of session/prompt")
	}
	a := attrs(read)
	if a["rpc.method"].AsString() != "fs/read_text_file" || a["rpc.response.status_code"].AsString() == "" || read.Status.Code.String() != "Error" {
		t.Errorf("the failed read's span: attributes %v, status %v", a, read.Status)
	}
}
