package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// otlpReceiver is an OTLP/HTTP trace receiver: what a collector is to the
// gateway, keeping every span it is sent.
type otlpReceiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
	attrs map[string]string // the resource's attributes, as last sent
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{attrs: map[string]string{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
			http.Error(w, "not an OTLP trace export", http.StatusNotFound)
			return
		}
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			gz, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = gz
		}
		data, err := io.ReadAll(body)
		var export collectortrace.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(data, &export)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range export.GetResourceSpans() {
			for _, kv := range rs.GetResource().GetAttributes() {
				r.attrs[kv.GetKey()] = kv.GetValue().GetStringValue()
			}
			for _, ss := range rs.GetScopeSpans() {
				r.spans = append(r.spans, ss.GetSpans()...)
			}
		}
		r.mu.Unlock()
		resp, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(resp)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *otlpReceiver) received() ([]*tracepb.Span, map[string]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	attrs := map[string]string{}
	for k, v := range r.attrs {
		attrs[k] = v
	}
	return append([]*tracepb.Span(nil), r.spans...), attrs
}

func spanAttr(s *tracepb.Span, key string) string {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == key {
			v := kv.GetValue()
			if v.GetIntValue() != 0 {
				return fmt.Sprint(v.GetIntValue())
			}
			return v.GetStringValue()
		}
	}
	return ""
}

func TestTheBinaryExportsATurnsSpansInTheCallersTraceToAnOTLPCollectorAndTheAgentJoinsIt(t *testing.T) {
	collector := newOTLPReceiver(t)
	metaFile := filepath.Join(t.TempDir(), "meta.jsonl")
	// The batch is sent at shutdown at the latest: the test also shows the
	// flush within the shutdown's bound.
	s := serve(t, "--config", writeConfig(t, fmt.Sprintf(`
shutdown_grace: 5s
tracing:
  enabled: true
  protocol: http
  endpoint: "%s/v1/traces"
  sampling_ratio: 1
agents:
  - name: test
    command: "${ACPGATE_E2E_AGENT}"
    args: [--unique-sessions, --record-meta, %q]
`, collector.srv.URL, metaFile)))
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(s.log())
		}
	})
	client, _ := s.client(t)
	const traceID = "0af7651916cd43dd8448eb211c80319c"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "traceparent", "00-"+traceID+"-b7ad6b7169203331-01")
	stream, err := client.Prompt(ctx, &acpgatev1.PromptRequest{Agent: "test", Text: "chunk hello\nchunk again",
		// Two events, whatever the timing: the span counts them.
		ChunkDelivery: acpgatev1.ChunkDelivery_CHUNK_DELIVERY_EACH})
	if err != nil {
		t.Fatal(err)
	}
	end := terminal(t, stream, 15*time.Second)
	if end.GetOutcome() == nil {
		t.Fatalf("the turn did not complete: %v", end)
	}

	s.terminate(t, 13*time.Second)

	spans, resource := collector.received()
	if resource["service.name"] != "acpgate" {
		t.Errorf("the resource's service.name is %q", resource["service.name"])
	}
	byName := map[string]*tracepb.Span{}
	for _, sp := range spans {
		if got := hex.EncodeToString(sp.GetTraceId()); got != traceID {
			t.Errorf("span %s is in trace %s, not the caller's", sp.GetName(), got)
		}
		byName[sp.GetName()] = sp
	}
	for _, name := range []string{"acpgate.v1.AgentGateway/Prompt", "acpgate.turn", "acpgate.agent.start", "acpgate.agent.spawn", "initialize", "session/new", "session/prompt"} {
		if byName[name] == nil {
			t.Errorf("no %s span among %d received", name, len(spans))
		}
	}
	if t.Failed() {
		return
	}
	turn := byName["acpgate.turn"]
	if !bytes.Equal(turn.GetParentSpanId(), byName["acpgate.v1.AgentGateway/Prompt"].GetSpanId()) {
		t.Error("the turn span is not the Prompt call's child")
	}
	if !bytes.Equal(byName["session/new"].GetParentSpanId(), byName["acpgate.agent.start"].GetSpanId()) {
		t.Error("session/new is not the start-up's child")
	}
	for key, want := range map[string]string{
		"acpgate.agent":          "test",
		"acpgate.turn.id":        end.GetOutcome().GetTurnId(),
		"acpgate.terminal.class": "outcome",
		"acpgate.stop_reason":    "end_turn",
		"acpgate.turn.events":    "2",
	} {
		if got := spanAttr(turn, key); got != want {
			t.Errorf("the turn span's %s = %q, want %q", key, got, want)
		}
	}

	// The agent got session/prompt's own span as the parent of its work.
	var prompted bool
	messages := recorded(t, metaFile)
	for _, m := range messages {
		if m.Method == "session/prompt" {
			prompted = true
			want := "00-" + traceID + "-" + hex.EncodeToString(byName["session/prompt"].GetSpanId()) + "-01"
			if m.Meta["traceparent"] != want {
				t.Errorf("session/prompt carried traceparent %q, want %q", m.Meta["traceparent"], want)
			}
		}
	}
	if !prompted {
		t.Errorf("the agent recorded no session/prompt: %v", messages)
	}
}
