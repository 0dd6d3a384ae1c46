package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

func TestACallersMetaReachesTheAgentBesideTheGatewaysTraceContext(t *testing.T) {
	h, _, metaFile := startTraced(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "traceparent", callerParent)
	stream, err := h.client.Prompt(ctx, &acpgatev1.PromptRequest{Agent: "traced", Text: "chunk hi",
		Meta: map[string]string{"example.com/ticket": "T-1", "zed.dev/debugMode": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	if last(collect(t, stream)).GetOutcome() == nil {
		t.Fatal("the turn did not complete")
	}
	var prompt *recordedMeta
	for _, m := range readMeta(t, metaFile) {
		if m.Method == "session/prompt" {
			prompt = &m
		}
	}
	if prompt == nil {
		t.Fatal("the agent recorded no session/prompt")
	}
	if prompt.Meta["example.com/ticket"] != "T-1" || prompt.Meta["zed.dev/debugMode"] != "true" {
		t.Errorf("the caller's entries did not arrive: %v", prompt.Meta)
	}
	if !strings.Contains(prompt.Meta["traceparent"], callerTraceID) {
		t.Errorf("the gateway's trace context is missing beside them: %v", prompt.Meta)
	}
}

func TestMetaKeysThatAreReservedOrNotNamespacedAreInvalidArgument(t *testing.T) {
	h := start(t)
	for _, key := range []string{"traceparent", "tracestate", "baggage", "TraceParent", "ticket", "/x", "x/", "acpgate/turn", "has space/x", strings.Repeat("a", 120) + "/" + strings.Repeat("b", 10)} {
		stream, err := h.client.Prompt(context.Background(), &acpgatev1.PromptRequest{Agent: "test", Text: "chunk hi", Meta: map[string]string{key: "v"}})
		if err == nil {
			_, err = stream.Recv()
		}
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "meta key") {
			t.Errorf("key %q: %v", key, err)
		}
	}
}

func TestTheAgentsMetaOnUpdatesAndOnItsAnswerReachesTheClient(t *testing.T) {
	h := start(t)
	events := oneShot(t, h, "test", "chunk plain\nchunk_meta example.com/source=cache cached\nstop_meta end_turn example.com/model=m-1")
	var metas []string
	for _, e := range events {
		if c := e.GetAgentMessageChunk(); c != nil {
			metas = append(metas, c.GetText()+":"+e.GetMeta().GetFields()["example.com/source"].GetStringValue())
		}
	}
	if strings.Join(metas, ",") != "plain:,cached:cache" {
		t.Errorf("chunks and their _meta: %q", metas)
	}
	if events[1].GetMeta() != nil {
		t.Errorf("an update without _meta has %v", events[1].GetMeta())
	}
	o := last(events).GetOutcome()
	if o.GetMeta().GetFields()["example.com/model"].GetStringValue() != "m-1" {
		t.Errorf("the outcome's meta is %v", o.GetMeta())
	}
}
