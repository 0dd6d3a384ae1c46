package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/testgateway"
	"github.com/acpgate/acpgate/internal/testpg"
	"github.com/acpgate/acpgate/internal/testutil"
)

// The tests run the worker as a real process on a real PostgreSQL, against
// the real acpgate binary serving the test agent, and kill one or the other
// with SIGKILL mid-turn.

func TestMain(m *testing.M) { os.Exit(testpg.Main(m)) }

// Bounds of the tests' waits.
const (
	// eventTimeout bounds the wait for the worker to log a turn's event.
	eventTimeout = 30 * time.Second
	// workflowTimeout bounds the wait for a worker to end its workflow:
	// DBOS's start and recovery, the turn, and the step's retries.
	workflowTimeout = 90 * time.Second
	// reapTimeout bounds the wait for a killed worker to be reaped.
	reapTimeout = 10 * time.Second
)

// gatewayConfig runs the test agent, counting its prompts; state_dir keeps
// turns across a gateway's restart.
func gatewayConfig(t *testing.T) string {
	return fmt.Sprintf(`
state_dir: %q
shutdown_grace: 3s
agents:
  - name: test
    command: "${ACPGATE_E2E_AGENT}"
    args: [--unique-sessions, --count-prompts, "${ACPGATE_PROMPTS}"]
`, t.TempDir())
}

var workerBuild struct {
	once sync.Once
	path string
	err  error
}

// workerBinary builds this example's worker once per test binary.
func workerBinary(t *testing.T) string {
	t.Helper()
	workerBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "acpgate-dbos-worker")
		if err != nil {
			workerBuild.err = err
			return
		}
		workerBuild.path = filepath.Join(dir, "worker")
		if out, err := exec.Command("go", "build", "-o", workerBuild.path, ".").CombinedOutput(); err != nil {
			workerBuild.err = fmt.Errorf("building the worker: %v\n%s", err, out)
		}
	})
	if workerBuild.err != nil {
		t.Fatal(workerBuild.err)
	}
	return workerBuild.path
}

// workerProc is a running worker process.
type workerProc struct {
	cmd    *exec.Cmd
	stdout *testutil.LockedBuffer
	stderr *testutil.LockedBuffer
	exited chan struct{}
	err    error // Wait's, once exited is closed
}

func startWorker(t *testing.T, database, gateway, workflowID, prompt string) *workerProc {
	t.Helper()
	w := &workerProc{stdout: &testutil.LockedBuffer{}, stderr: &testutil.LockedBuffer{}, exited: make(chan struct{})}
	w.cmd = exec.Command(workerBinary(t), "-database", database, "-gateway", gateway, "-workflow-id", workflowID, "-agent", "test", "-prompt", prompt)
	w.cmd.Stdout, w.cmd.Stderr = w.stdout, w.stderr
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		w.err = w.cmd.Wait()
		close(w.exited)
	}()
	t.Cleanup(func() {
		_ = w.cmd.Process.Kill()
		<-w.exited
	})
	return w
}

var turnEvent = regexp.MustCompile(`msg="turn event" turn=(\S+) seq=(\d+)`)

// waitForSeq waits until the worker's step logs an event of seq at least
// seq, and returns the turn's id.
func (w *workerProc) waitForSeq(t *testing.T, seq int) string {
	t.Helper()
	deadline := time.Now().Add(eventTimeout)
	for {
		for _, m := range turnEvent.FindAllStringSubmatch(w.stderr.String(), -1) {
			var n int
			fmt.Sscan(m[2], &n)
			if n >= seq {
				return m[1]
			}
		}
		select {
		case <-w.exited:
			t.Fatalf("the worker exited (%v) before its step saw seq %d:\n%s%s", w.err, seq, w.stdout.String(), w.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker's step did not see seq %d within %s:\n%s", seq, eventTimeout, w.stderr.String())
		}
	}
}

func (w *workerProc) kill(t *testing.T) {
	t.Helper()
	_ = w.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-w.exited:
	case <-time.After(reapTimeout):
		t.Fatalf("the worker was not reaped within %s of SIGKILL", reapTimeout)
	}
}

// result waits for the worker to end its workflow and returns the line it
// printed and its exit code.
func (w *workerProc) result(t *testing.T) (string, int) {
	t.Helper()
	select {
	case <-w.exited:
	case <-time.After(workflowTimeout):
		t.Fatalf("the worker did not end its workflow within %s:\n%s", workflowTimeout, w.stderr.String())
	}
	return strings.TrimSpace(w.stdout.String()), w.cmd.ProcessState.ExitCode()
}

// completed is the answer of a worker whose workflow completed.
func (w *workerProc) completed(t *testing.T) Answer {
	t.Helper()
	line, code := w.result(t)
	rest, ok := strings.CutPrefix(line, "completed ")
	if code != 0 || !ok {
		t.Fatalf("the worker exited %d printing %q, want a completed workflow:\n%s", code, line, w.stderr.String())
	}
	var a Answer
	if err := json.Unmarshal([]byte(rest), &a); err != nil {
		t.Fatal(err)
	}
	return a
}

func getTurn(t *testing.T, gw acpgatev1.AgentGatewayClient, id string) *acpgatev1.Turn {
	t.Helper()
	turn, err := gw.GetTurn(context.Background(), &acpgatev1.GetTurnRequest{TurnId: id})
	if err != nil {
		t.Fatal(err)
	}
	return turn
}

func TestAWorkerKilledMidStepIsRecoveredAndReattachesToTheTurnItStarted(t *testing.T) {
	database := testpg.Start(t)
	gw := testgateway.Start(t, gatewayConfig(t))
	client := gw.Client(t)
	const script = "chunk a\nsleep 4000\nchunk b\nstop end_turn"

	first := startWorker(t, database, gw.Addr, "wf-worker-killed", script)
	turnID := first.waitForSeq(t, 2) // started, then chunk a
	first.kill(t)
	if s := getTurn(t, client, turnID).GetState(); s != acpgatev1.TurnState_TURN_STATE_RUNNING {
		t.Fatalf("the turn is %v once the worker was killed, want it running (the kill was meant to be mid-step)", s)
	}

	// The same command again: DBOS recovers the pending workflow and
	// re-executes its step, whose request_id names the running turn.
	answer := startWorker(t, database, gw.Addr, "wf-worker-killed", script).completed(t)
	if answer.TurnID != turnID || answer.Text != "ab" {
		t.Errorf("the recovered workflow answered %+v, want turn %s's outcome \"ab\"", answer, turnID)
	}
	if n := gw.PromptsSeen(t); n != 1 {
		t.Errorf("the agent was prompted %d times, want once", n)
	}
}

func TestAGatewayKilledMidStepEndsTheTurnRetryableAndTheStepRunsAttemptTwo(t *testing.T) {
	database := testpg.Start(t)
	gw := testgateway.Start(t, gatewayConfig(t))
	w := startWorker(t, database, gw.Addr, "wf-gateway-killed", "chunk a\nchunk b\nsleep 4000\nchunk c\nstop end_turn")
	// Seq 2: started, then chunk a and chunk b, which the gateway may
	// coalesce into one event since it read them together.
	firstTurn := w.waitForSeq(t, 2)
	// Chunks are journaled within 100 ms of being sent: the seq the step
	// saw is then durable, and its re-attach resumes inside the journal.
	time.Sleep(150 * time.Millisecond)
	gw.Kill(t)
	gw.Restart(t)

	answer := w.completed(t)
	client := gw.Client(t)
	stopped := getTurn(t, client, firstTurn).GetTerminal().GetError()
	if stopped.GetTransport().GetReason() != acpgatev1.TransportReason_TRANSPORT_REASON_GATEWAY_STOPPED || !stopped.GetRetryable() {
		t.Fatalf("the first turn ended with %v, want a retryable GATEWAY_STOPPED", stopped)
	}
	if !strings.Contains(w.stderr.String(), "reason=TRANSPORT_REASON_GATEWAY_STOPPED retryable=true") {
		t.Errorf("the step did not see the first turn's GATEWAY_STOPPED ending:\n%s", w.stderr.String())
	}
	if answer.TurnID == firstTurn || answer.Text != "abc" {
		t.Fatalf("the workflow answered %+v, want another turn's outcome \"abc\"", answer)
	}
	if a := getTurn(t, client, answer.TurnID).GetAttempt(); a != 2 {
		t.Errorf("the completing turn is attempt %d, want 2", a)
	}
	if n := gw.PromptsSeen(t); n != 2 {
		t.Errorf("the agent was prompted %d times, want twice (one per attempt)", n)
	}
}

func TestANonRetryableEndingFailsTheWorkflowForGood(t *testing.T) {
	database := testpg.Start(t)
	gw := testgateway.Start(t, gatewayConfig(t))
	for run := 1; run <= 2; run++ {
		line, code := startWorker(t, database, gw.Addr, "wf-refused", "stop refusal").result(t)
		if code != exitFailed || !strings.HasPrefix(line, "failed ") || !strings.Contains(line, "refusal") {
			t.Fatalf("run %d: the worker exited %d printing %q, want the workflow failed with the refusal", run, code, line)
		}
	}
	// The step was not retried, and the second run found the workflow's
	// recorded failure instead of prompting again.
	if n := gw.PromptsSeen(t); n != 1 {
		t.Errorf("the agent was prompted %d times, want once", n)
	}
}
