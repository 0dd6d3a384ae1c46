package server_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/acp/translate"
	"github.com/acpgate/acpgate/internal/server"
)

func imageBlock(data string) *acpgatev1.ContentBlock {
	return &acpgatev1.ContentBlock{Block: &acpgatev1.ContentBlock_Image{Image: &acpgatev1.ImageContent{Data: data, MimeType: "image/png"}}}
}

func TestAnImageForATextOnlyAgentIsRefusedNamingTheBlockBeforeTheAgentIsPrompted(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	s, err := h.client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "textonly"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		block              *acpgatev1.ContentBlock
		blockType, missing string
	}{
		{imageBlock("aGk="), "image", "promptCapabilities.image"},
		{&acpgatev1.ContentBlock{Block: &acpgatev1.ContentBlock_Audio{Audio: &acpgatev1.AudioContent{Data: "aGk=", MimeType: "audio/wav"}}}, "audio", "promptCapabilities.audio"},
		{&acpgatev1.ContentBlock{Block: &acpgatev1.ContentBlock_Resource{Resource: &acpgatev1.EmbeddedResource{Uri: "file:///a.txt", Contents: &acpgatev1.EmbeddedResource_Text{Text: "a"}}}}, "resource", "promptCapabilities.embeddedContext"},
	}
	for _, c := range cases {
		stream, err := h.client.Prompt(ctx, &acpgatev1.PromptRequest{SessionId: s.GetId(), Prompt: []*acpgatev1.ContentBlock{{Block: &acpgatev1.ContentBlock_Text{Text: "chunk hello"}}, c.block}})
		if err != nil {
			t.Fatal(err)
		}
		events := collect(t, stream)
		e := last(events).GetError()
		if e.GetCapabilityNotSupported().GetPrimitive() != c.missing || e.GetRetryable() {
			t.Errorf("%s: terminal %v", c.blockType, last(events))
		}
		if !strings.Contains(e.GetMessage(), c.blockType+" blocks") || !strings.Contains(e.GetMessage(), "prompt block 1") {
			t.Errorf("%s: the message names neither the block type nor its place: %q", c.blockType, e.GetMessage())
		}
	}
	// A text prompt still runs on the same session, and it is the only
	// prompt the agent ever received.
	if got := last(collectOK(t, h, s.GetId(), "chunk fine")).GetOutcome().GetText(); got != "fine" {
		t.Errorf("a text prompt after the refusals: %q", got)
	}
	prompts, err := os.ReadFile(filepath.Join(h.ws, "textonly-prompts"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(prompts), "prompt"); n != 1 {
		t.Errorf("the agent received %d prompts; the refused ones must never reach it", n)
	}
}

func TestAnImageForAnAgentThatAcceptsImagesIsSent(t *testing.T) {
	h := start(t)
	stream, err := h.client.Prompt(context.Background(), &acpgatev1.PromptRequest{Agent: "test", Prompt: []*acpgatev1.ContentBlock{imageBlock("aGk=")}, Text: "chunk seen"})
	if err != nil {
		t.Fatal(err)
	}
	if got := last(collect(t, stream)).GetOutcome().GetText(); got != "seen" {
		t.Errorf("terminal: %q", got)
	}
}

func TestAOneShotImageForATextOnlyAgentEndsInBandAsCapabilityNotSupported(t *testing.T) {
	h := start(t)
	stream, err := h.client.Prompt(context.Background(), &acpgatev1.PromptRequest{Agent: "textonly", Prompt: []*acpgatev1.ContentBlock{imageBlock("aGk=")}})
	if err != nil {
		t.Fatal(err)
	}
	if e := last(collect(t, stream)).GetError(); e.GetCapabilityNotSupported().GetPrimitive() != "promptCapabilities.image" {
		t.Errorf("terminal: %v", e)
	}
}

func TestABlockOverItsSizeLimitIsInvalidArgument(t *testing.T) {
	h := startWith(t, func(o *server.Options) { o.Config.Limits.MaxPromptBytes = 64 << 20 })
	stream, err := h.client.Prompt(context.Background(), &acpgatev1.PromptRequest{Agent: "test", Prompt: []*acpgatev1.ContentBlock{imageBlock(strings.Repeat("A", translate.MaxImageBlockBytes+4))}})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "limit") {
		t.Errorf("an oversized image: %v", err)
	}
}
