package temporal

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/testgateway"
)

// No Temporal server runs here: the activity runs in the SDK's in-process
// test environments (the same activity task handler, heartbeat batching
// and retry bookkeeping a worker uses, with the server mocked), against
// the real acpgate binary serving the test agent. A worker's loss is a
// real process killed with SIGKILL: the test binary, run again as a
// worker.

// workerEnv, when set in the environment, makes the test binary a worker
// that runs PromptWorkflow against the gateway it names (see runWorker).
const (
	workerEnv       = "ACPGATE_TEMPORAL_WORKER"
	workerPromptEnv = "ACPGATE_TEMPORAL_PROMPT"
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(workerEnv); addr != "" {
		os.Exit(runWorker(addr, os.Getenv(workerPromptEnv)))
	}
	os.Exit(m.Run())
}

// workerHeartbeatTimeout is the worker's activity heartbeat timeout: the
// SDK sends heartbeats to the server at most every 80% of it, so a short
// one lets the test see a heartbeat past the turn's first event quickly.
const workerHeartbeatTimeout = time.Second

// Bounds of the tests' waits.
const (
	// heartbeatWait bounds the wait for the worker's heartbeat to reach
	// the given seq.
	heartbeatWait = 30 * time.Second
	// reapTimeout bounds the wait for a killed worker to be reaped.
	reapTimeout = 10 * time.Second
	// endWait bounds the wait for a cancelled turn to end.
	endWait = 15 * time.Second
)

// runWorker runs PromptWorkflow in the in-process workflow environment
// and prints, on stdout, `delivered SEQ` for each event the activity
// delivers and `heartbeat JSON` for each heartbeat the SDK sends to the
// (mocked) server, whose details a retry would get.
func runWorker(addr, prompt string) int {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer conn.Close()
	var out sync.Mutex
	say := func(format string, args ...any) {
		out.Lock()
		defer out.Unlock()
		fmt.Printf(format+"\n", args...)
	}
	var s testsuite.WorkflowTestSuite
	s.SetLogger(quietLogger())
	env := s.NewTestWorkflowEnvironment()
	ActivityOptions.HeartbeatTimeout = workerHeartbeatTimeout
	env.RegisterWorkflow(PromptWorkflow)
	env.RegisterActivity(&Activities{
		Gateway: acpgatev1.NewAgentGatewayClient(conn),
		Deliver: func(_ context.Context, e *acpgatev1.PromptEvent) error {
			say("delivered %d", e.GetSeq())
			return nil
		},
	})
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, details converter.EncodedValues) {
		var p Progress
		if details.Get(&p) == nil {
			b, _ := json.Marshal(p)
			say("heartbeat %s", b)
		}
	})
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "wf-worker-lost"})
	env.ExecuteWorkflow(PromptWorkflow, Input{Agent: "test", Prompt: prompt})
	if err := env.GetWorkflowError(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// quietLogger keeps the test environments' debug logging out of the
// test's output.
func quietLogger() tlog.Logger {
	return tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
}

func gatewayConfig() string {
	return `
heartbeat_interval: 200ms
shutdown_grace: 3s
agents:
  - name: test
    command: "${ACPGATE_E2E_AGENT}"
    args: [--unique-sessions, --count-prompts, "${ACPGATE_PROMPTS}"]
`
}

// recorder is a Deliver that keeps the seqs delivered, and says when one
// reached a given seq.
type recorder struct {
	mu      sync.Mutex
	seqs    []uint64
	reached chan struct{}
	at      uint64
	once    sync.Once
}

func newRecorder(at uint64) *recorder { return &recorder{reached: make(chan struct{}), at: at} }

func (r *recorder) deliver(_ context.Context, e *acpgatev1.PromptEvent) error {
	r.mu.Lock()
	r.seqs = append(r.seqs, e.GetSeq())
	r.mu.Unlock()
	if e.GetSeq() >= r.at {
		r.once.Do(func() { close(r.reached) })
	}
	return nil
}

func (r *recorder) delivered() []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]uint64(nil), r.seqs...)
}

// lossScript is the turn a worker is lost in: its sleep leaves a loaded
// machine seconds to see the heartbeat after its first chunks and kill the worker
// while the turn still runs.
const lossScript = "chunk a\nchunk b\nsleep 4000\nchunk c\nstop end_turn"

func TestARetryAfterAWorkerLossResumesFromTheHeartbeatsSeqWithoutASecondAgentRun(t *testing.T) {
	gw := testgateway.Start(t, gatewayConfig())
	client := gw.Client(t)

	// Attempt 1: a worker process, killed once the server has a heartbeat
	// past the turn's first events.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), workerEnv+"="+gw.Addr, workerPromptEnv+"="+lossScript)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var recorded Progress
	timeout := time.After(heartbeatWait)
	// Seq 2 is the turn's first chunk event: "chunk a" and "chunk b",
	// read together, may be one (the gateway coalesces by default).
	for recorded.Seq < 2 {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("the worker ended before heartbeating seq 2: %v\n%s", cmd.Wait(), stderr.String())
			}
			if b, ok := strings.CutPrefix(line, "heartbeat "); ok {
				if err := json.Unmarshal([]byte(b), &recorded); err != nil {
					t.Fatal(err)
				}
			}
		case <-timeout:
			t.Fatalf("the worker did not heartbeat seq 2 within %s", heartbeatWait)
		}
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	reaped := make(chan struct{})
	go func() {
		for range lines {
		}
		_ = cmd.Wait()
		close(reaped)
	}()
	select {
	case <-reaped:
	case <-time.After(reapTimeout):
		t.Fatalf("the worker was not reaped within %s of SIGKILL", reapTimeout)
	}
	turn, err := client.GetTurn(context.Background(), &acpgatev1.GetTurnRequest{TurnId: recorded.TurnID})
	if err != nil {
		t.Fatal(err)
	}
	if turn.GetState() != acpgatev1.TurnState_TURN_STATE_RUNNING {
		t.Fatalf("the turn is %v once the worker was killed, want it running (the kill was meant to be mid-turn)", turn.GetState())
	}

	// Attempt 2: the retry, with the details the server recorded.
	var s testsuite.WorkflowTestSuite
	s.SetLogger(quietLogger())
	env := s.NewTestActivityEnvironment()
	rec := newRecorder(0)
	acts := &Activities{Gateway: client, Deliver: rec.deliver}
	env.RegisterActivity(acts)
	env.SetHeartbeatDetails(recorded)
	val, err := env.ExecuteActivity(acts.Prompt, Input{Agent: "test", Prompt: lossScript})
	if err != nil {
		t.Fatal(err)
	}
	var answer Answer
	if err := val.Get(&answer); err != nil {
		t.Fatal(err)
	}
	if answer.TurnID != recorded.TurnID || answer.Text != "abc" {
		t.Errorf("the retry answered %+v, want turn %s's outcome \"abc\"", answer, recorded.TurnID)
	}
	seqs := rec.delivered()
	for i, seq := range seqs {
		if seq != recorded.Seq+1+uint64(i) {
			t.Fatalf("the retry delivered seqs %v, want them from %d on, without a gap", seqs, recorded.Seq+1)
		}
	}
	if n := gw.PromptsSeen(t); n != 1 {
		t.Errorf("the agent was prompted %d times, want once", n)
	}
}

// runUntilStopped runs the activity on a turn that would take ten
// seconds, and ends the worker's background context with cause once the
// turn's first chunk was delivered. It returns the turn's id and the
// activity's error.
func runUntilStopped(t *testing.T, gw *testgateway.Gateway, cause error) (string, error) {
	t.Helper()
	bg, stop := context.WithCancelCause(context.Background())
	defer stop(nil)
	var s testsuite.WorkflowTestSuite
	s.SetLogger(quietLogger())
	env := s.NewTestActivityEnvironment()
	env.SetWorkerOptions(worker.Options{BackgroundActivityContext: bg})
	rec := newRecorder(2)
	acts := &Activities{Gateway: gw.Client(t), Deliver: rec.deliver}
	env.RegisterActivity(acts)
	done := make(chan error, 1)
	go func() {
		_, err := env.ExecuteActivity(acts.Prompt, Input{Agent: "test", Prompt: "chunk a\nsleep 10000\nchunk b\nstop end_turn"})
		done <- err
	}()
	select {
	case <-rec.reached:
	case err := <-done:
		t.Fatalf("the activity ended before its first chunk: %v", err)
	case <-time.After(heartbeatWait):
		t.Fatalf("no chunk within %s", heartbeatWait)
	}
	stop(cause)
	var err error
	select {
	case err = <-done:
	case <-time.After(endWait):
		t.Fatalf("the activity did not return within %s of its context's end", endWait)
	}
	turns, lerr := gw.Client(t).ListTurns(context.Background(), &acpgatev1.ListTurnsRequest{})
	if lerr != nil || len(turns.GetTurns()) != 1 {
		t.Fatalf("ListTurns: %v, %v", turns, lerr)
	}
	return turns.GetTurns()[0].GetTurnId(), err
}

func TestCancellingTheActivityCancelsTheTurn(t *testing.T) {
	gw := testgateway.Start(t, gatewayConfig())
	// The cause the SDK gives an activity's context when the server asks
	// for its cancellation (a heartbeat answered with cancel_requested).
	// The in-process environments deliver a cancellation request as a
	// heartbeat answered NOT_FOUND instead, so the test ends the context
	// the way the worker's task handler does.
	turnID, err := runUntilStopped(t, gw, temporal.NewCanceledError())
	if !errors.Is(err, context.Canceled) && !temporal.IsCanceledError(err) {
		t.Errorf("the cancelled activity returned %v, want a cancellation", err)
	}
	client := gw.Client(t)
	deadline := time.Now().Add(endWait)
	for {
		turn, err := client.GetTurn(context.Background(), &acpgatev1.GetTurnRequest{TurnId: turnID})
		if err != nil {
			t.Fatal(err)
		}
		if turn.GetState() == acpgatev1.TurnState_TURN_STATE_ENDED {
			if e := turn.GetTerminal().GetError(); !e.GetHarness().GetCancelled() {
				t.Fatalf("the turn ended with %v, want the agent's cancellation", turn.GetTerminal())
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the turn still runs %s after the activity was cancelled", endWait)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestAStoppingWorkerLeavesTheTurnRunningForTheNextAttempt(t *testing.T) {
	gw := testgateway.Start(t, gatewayConfig())
	// A worker that stops (a deploy) ends its activities' contexts without
	// the server's cancellation: the next attempt resumes the turn.
	turnID, _ := runUntilStopped(t, gw, nil)
	turn, err := gw.Client(t).GetTurn(context.Background(), &acpgatev1.GetTurnRequest{TurnId: turnID})
	if err != nil {
		t.Fatal(err)
	}
	if turn.GetState() != acpgatev1.TurnState_TURN_STATE_RUNNING {
		t.Errorf("the turn is %v after its worker stopped, want it running: %v", turn.GetState(), turn.GetTerminal())
	}
}

func TestANonRetryableEndingFailsTheWorkflowWithoutARetry(t *testing.T) {
	gw := testgateway.Start(t, gatewayConfig())
	var s testsuite.WorkflowTestSuite
	s.SetLogger(quietLogger())
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(PromptWorkflow)
	env.RegisterActivity(&Activities{Gateway: gw.Client(t)})
	env.ExecuteWorkflow(PromptWorkflow, Input{Agent: "test", Prompt: "stop refusal"})
	var app *temporal.ApplicationError
	if err := env.GetWorkflowError(); !errors.As(err, &app) || !app.NonRetryable() || app.Type() != ErrorTypeNonRetryable {
		t.Fatalf("the workflow ended with %v, want a non-retryable %s application error", err, ErrorTypeNonRetryable)
	}
	if n := gw.PromptsSeen(t); n != 1 {
		t.Errorf("the agent was prompted %d times, want once: a refusal is not retried", n)
	}
}
