package e2e

import (
	"github.com/acpgate/acpgate/internal/exitcode"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/testutil"
)

// interruptedPrompt runs the real `acpgate prompt --request-id` on the demo
// agent's slow turn, sends SIGINT once its answer streams (twice, with
// twice set), and returns its exit code, stderr and the turn's id.
func interruptedPrompt(t *testing.T, addr, requestID string, twice bool) (code int, stderr, turnID string) {
	t.Helper()
	bin, _ := binaries(t)
	cmd := exec.Command(bin, "prompt", "--addr", addr, "--agent", "demo", "--request-id", requestID, "slow")
	var stdout, errOut testutil.LockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(20 * time.Second)
	for stdout.String() == "" {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			t.Fatalf("no answer streamed; stderr:\n%s", errOut.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	if twice {
		for !strings.Contains(errOut.String(), "Ctrl-C again") {
			if time.Now().After(deadline) {
				t.Fatalf("no detaching message; stderr:\n%s", errOut.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
		_ = cmd.Process.Signal(syscall.SIGINT)
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		t.Fatalf("the interrupted prompt did not exit; stderr:\n%s", errOut.String())
	}
	m := regexp.MustCompile(`acpgate watch (\S+)`).FindStringSubmatch(errOut.String())
	if m == nil {
		t.Fatalf("stderr does not say how to watch the turn:\n%s", errOut.String())
	}
	return cmd.ProcessState.ExitCode(), errOut.String(), m[1]
}

func TestCtrlCOnAPromptWithARequestIDDetachesAndASecondCtrlCCancels(t *testing.T) {
	s := serve(t)
	client := acpgatev1.NewAgentGatewayClient(dialTest(t, s.addr))
	ctx := testCtx(t)

	code, stderr, turnID := interruptedPrompt(t, s.addr, "job-detach", false)
	if code != exitcode.OK || !strings.Contains(stderr, "acpgate cancel ") || strings.Contains(stderr, "cancelled") {
		t.Errorf("one Ctrl-C: exit %d, want 0, and how to cancel; stderr:\n%s", code, stderr)
	}
	turn, err := client.GetTurn(ctx, &acpgatev1.GetTurnRequest{TurnId: turnID})
	if err != nil || turn.GetState() != acpgatev1.TurnState_TURN_STATE_RUNNING {
		t.Errorf("after one Ctrl-C the turn is %v (%v), want running", turn.GetState(), err)
	}
	if _, err := client.Cancel(ctx, &acpgatev1.CancelRequest{SessionId: turn.GetSessionId()}); err != nil {
		t.Error(err)
	}

	code, stderr, turnID = interruptedPrompt(t, s.addr, "job-cancel", true)
	if code != exitcode.Cancelled {
		t.Errorf("two Ctrl-C: exit %d, want %d; stderr:\n%s", code, exitcode.Cancelled, stderr)
	}
	turn, err = client.GetTurn(ctx, &acpgatev1.GetTurnRequest{TurnId: turnID})
	if err != nil || !turn.GetTerminal().GetError().GetHarness().GetCancelled() {
		t.Errorf("after two Ctrl-C the turn is %v with %v (%v), want cancelled", turn.GetState(), turn.GetTerminal(), err)
	}
}
