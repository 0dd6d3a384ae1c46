package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

func TestAJournalTheDiskRefusesEndsTheTurnWithARetryableGatewayErrorSayingSo(t *testing.T) {
	cfg, _ := durableConfig(t, "")
	s := serve(t, "--config", cfg)
	// A real limit on the real process: the kernel refuses a write past
	// 2 MiB in any file with EFBIG, as a full disk refuses with ENOSPC.
	limit := unix.Rlimit{Cur: 2 << 20, Max: 2 << 20}
	if err := unix.Prlimit(s.cmd.Process.Pid, unix.RLIMIT_FSIZE, &limit, nil); err != nil {
		t.Fatalf("prlimit: %v", err)
	}
	client := acpgatev1.NewAgentGatewayClient(dialTest(t, s.addr))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// 20,000 chunks of 256 bytes: 5 MB of journal.
	stream, err := client.Prompt(ctx, &acpgatev1.PromptRequest{Agent: "test", Text: "flood 20000 256\nstop end_turn", OmitOutcomeText: true})
	if err != nil {
		t.Fatal(err)
	}
	events := drain(t, stream)
	checkSeqs(t, events, 1)
	e := events[len(events)-1].GetError()
	if e.GetGateway() == nil || !e.GetRetryable() || !strings.Contains(e.GetMessage(), "journal") {
		t.Fatalf("the turn ended with %v; want a retryable gateway error about the journal", e)
	}
	if !strings.Contains(e.GetGateway().GetDetail(), "full") {
		t.Errorf("the detail %q does not say the disk is full", e.GetGateway().GetDetail())
	}
	text := 0 // bytes, not events: the gateway merges chunks read together
	for _, ev := range events {
		text += len(ev.GetAgentMessageChunk().GetText())
	}
	if text >= 20000*256 {
		t.Errorf("all %d bytes of text were streamed past a journal that could not hold them", text)
	}
	t.Logf("%d bytes of text streamed, then: %s (%s)", text, e.GetMessage(), e.GetGateway().GetDetail())
}
