package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"

	"github.com/acpgate/acpgate/internal/acp"
	"github.com/acpgate/acpgate/internal/acp/clientreq"
)

// floodCostBound is what the flood below may cost the gateway above its
// RSS before it: the bytes its answers may hold (one copy each), once
// more for garbage the collector has not yet returned (it lets the heap
// reach twice what is live), and 32 MiB for everything else. Holding each
// answer twice or more, or one per request slot, goes past it.
const floodCostBound = 2*acp.DefaultMaxAgentReplyBytes + 32<<20

// serveLargestReadable serves the hostile agent with a workspace holding
// a file of the largest size an agent may read, and returns its path.
func serveLargestReadable(t *testing.T) (*served, string) {
	workspace := t.TempDir()
	big := filepath.Join(workspace, "big.txt")
	if err := os.WriteFile(big, bytes.Repeat([]byte("x"), clientreq.DefaultMaxReadBytes), 0o644); err != nil {
		t.Fatal(err)
	}
	return serve(t, "--config", readerConfig(t, workspace)), big
}

func TestAFloodOfLargeReadsNotReadByTheAgentCostsTheGatewayLessThanThreeTimesItsReplyBudget(t *testing.T) {
	s, big := serveLargestReadable(t)
	pid := s.cmd.Process.Pid
	// A first turn brings the gateway to its working size.
	_, _, warm := openHostile(context.Background(), t, s, "stop end_turn")
	terminal(t, warm, ends)
	before := procStatus(t, pid, "VmRSS")

	client, id, stream := openHostile(context.Background(), t, s, "stall\nreadflood 60 "+big+"\nhang")
	settle(t, pid)
	peak := procStatus(t, pid, "VmHWM")
	t.Logf("gateway RSS %d MiB before the flood, peak %d MiB: the flood cost %d MiB (bound %d MiB)", before>>20, peak>>20, (peak-before)>>20, floodCostBound>>20)
	if peak-before > floodCostBound {
		t.Errorf("60 reads of an 8 MiB file by an agent that does not read cost the gateway %d MiB, over %d MiB", (peak-before)>>20, floodCostBound>>20)
	}

	// Cancelling the turn still ends it: the cancel grace stops the agent.
	ctx, cancel := context.WithTimeout(context.Background(), ends)
	defer cancel()
	if _, err := client.Cancel(ctx, &acpgatev1.CancelRequest{SessionId: id}); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	terminal(t, stream, ends)
}
