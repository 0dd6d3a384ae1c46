package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/acp"
	"github.com/acpgate/acpgate/internal/acp/clientreq"
)

// Tests of the gateway against an agent that floods it with requests of
// its own and does not read the answers: what the gateway holds for them
// must stay bounded, and the turn and the session must still end.

// readerConfig runs the test agent with fs.read in workspace. The short
// cancel grace keeps the tests quick: an agent that has stopped reading its
// stdin never hears session/cancel, so the grace is what ends its turn.
func readerConfig(t *testing.T, workspace string) string {
	return writeConfig(t, fmt.Sprintf(`
shutdown_grace: 5s
agents:
  - name: hostile
    command: "${ACPGATE_E2E_AGENT}"
    args: [--unique-sessions]
    workspace: %q
    fs: {read: true}
    cancel_grace: 2s
`, workspace))
}

// procStatus reads one "Key: N [kB]" line of /proc/<pid>/status, in bytes
// for a size and as is for a count.
func procStatus(t *testing.T, pid int, key string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		value, ok := strings.CutPrefix(line, key+":")
		if !ok {
			continue
		}
		f := strings.Fields(value)
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			t.Fatalf("%s: %q", key, line)
		}
		if len(f) > 1 && f[1] == "kB" {
			n <<= 10
		}
		return n
	}
	t.Fatalf("no %s in /proc/%d/status", key, pid)
	return 0
}

// settle waits until the gateway's RSS has stopped growing (no growth of
// more than 1 MiB for two seconds, at most a minute), so that what a flood
// could make it hold has been taken.
func settle(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	top, since := procStatus(t, pid, "VmRSS"), time.Now()
	for time.Since(since) < 2*time.Second && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		if rss := procStatus(t, pid, "VmRSS"); rss > top+1<<20 {
			top, since = rss, time.Now()
		}
	}
}

// openHostile opens a session on the hostile agent and starts a turn
// running script, for as long as ctx lasts.
func openHostile(ctx context.Context, t *testing.T, s *served, script string) (acpgatev1.AgentGatewayClient, string, acpgatev1.AgentGateway_PromptClient) {
	t.Helper()
	client, _ := s.client(t)
	sess, err := client.CreateSession(context.Background(), &acpgatev1.CreateSessionRequest{Agent: "hostile"})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := client.Prompt(ctx, &acpgatev1.PromptRequest{SessionId: sess.GetId(), Text: script})
	if err != nil {
		t.Fatal(err)
	}
	return client, sess.GetId(), stream
}

// terminal reads the turn's events up to its terminal one, failing if that
// takes longer than within.
func terminal(t *testing.T, stream acpgatev1.AgentGateway_PromptClient, within time.Duration) *acpgatev1.PromptEvent {
	t.Helper()
	type ending struct {
		last *acpgatev1.PromptEvent
		err  error
	}
	got := make(chan ending, 1)
	go func() {
		var last *acpgatev1.PromptEvent
		for {
			e, err := stream.Recv()
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				got <- ending{last, err}
				return
			}
			last = e
		}
	}()
	select {
	case end := <-got:
		if end.err != nil {
			t.Fatalf("the stream ended with %v instead of its terminal", end.err)
		}
		if end.last.GetOutcome() == nil && end.last.GetError() == nil {
			t.Fatalf("the stream ended without a terminal event (last %v)", end.last)
		}
		return end.last
	case <-time.After(within):
		t.Fatalf("the turn did not end within %s", within)
		return nil
	}
}

// waitNotRunning waits until the session is no longer running a turn
// (closed, or gone), failing after within.
func waitNotRunning(t *testing.T, client acpgatev1.AgentGatewayClient, id string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		sess, err := client.GetSession(context.Background(), &acpgatev1.GetSessionRequest{SessionId: id})
		if status.Code(err) == codes.NotFound || err == nil && sess.GetState() != acpgatev1.SessionState_SESSION_STATE_RUNNING {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session still runs its turn after %s", within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The agents below stop reading their stdin, so they never hear
// session/cancel: the cancel grace (2 s) is what ends their turns, by
// stopping them. The bounds on how long that takes are generous; what they
// catch is a gateway that hangs waiting to write to an agent that does not
// read.
const ends = 30 * time.Second

// peakRSSBound is what the gateway may reach while an agent holds
// inFlight answers of answerBytes each unwritten: those answers, the
// encoding of the one being written (its buffer grows by doubling, so up
// to twice its size), and a margin for the gateway itself (about 16 MiB
// idle) and for garbage not yet collected.
func peakRSSBound(inFlight, answerBytes int64) int64 {
	return inFlight*answerBytes + 2*answerBytes + 80<<20
}

func TestAnAgentFloodingReadsOfALargeFileWhileNotReadingItsStdinCostsTheGatewayBoundedMemory(t *testing.T) {
	s, big := serveLargestReadable(t)
	pid := s.cmd.Process.Pid
	client, id, stream := openHostile(context.Background(), t, s, "stall\nreadflood 60 "+big+"\nhang")
	settle(t, pid)
	// Without a bound on the agent's requests in flight the gateway held
	// all 60 answers, 480 MiB, and peaked above 700 MiB.
	peak, bound := procStatus(t, pid, "VmHWM"), peakRSSBound(acp.DefaultMaxAgentRequests, clientreq.DefaultMaxReadBytes)
	t.Logf("gateway peak RSS %d MiB (bound %d MiB), %d threads", peak>>20, bound>>20, procStatus(t, pid, "Threads"))
	if peak > bound {
		t.Errorf("the gateway's RSS peaked at %d MiB, over %d MiB", peak>>20, bound>>20)
	}

	// Closing the session while the turn runs ends both.
	closed := make(chan error, 1)
	go func() {
		_, err := client.CloseSession(context.Background(), &acpgatev1.CloseSessionRequest{SessionId: id})
		closed <- err
	}()
	terminal(t, stream, ends)
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("close: %v", err)
		}
	case <-time.After(ends):
		t.Fatalf("closing the session took over %s", ends)
	}
}

func TestAnAgentFloodingUnknownRequestsWhileNotReadingItsStdinCostsTheGatewayBoundedMemory(t *testing.T) {
	s := serve(t, "--config", readerConfig(t, t.TempDir()))
	pid := s.cmd.Process.Pid
	client, id, stream := openHostile(context.Background(), t, s, "stall\nreqflood 20000\nhang")
	settle(t, pid)
	// The answers are tiny; what each request cost was its goroutine:
	// without the bound, the gateway peaked above 100 MiB.
	peak, bound := procStatus(t, pid, "VmHWM"), peakRSSBound(acp.DefaultMaxAgentRequests, 1<<10)
	t.Logf("gateway peak RSS %d MiB (bound %d MiB), %d threads", peak>>20, bound>>20, procStatus(t, pid, "Threads"))
	if peak > bound {
		t.Errorf("the gateway's RSS peaked at %d MiB, over %d MiB", peak>>20, bound>>20)
	}

	// Cancelling the turn ends it.
	ctx, cancel := context.WithTimeout(context.Background(), ends)
	defer cancel()
	if _, err := client.Cancel(ctx, &acpgatev1.CancelRequest{SessionId: id}); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	terminal(t, stream, ends)
}

func TestATurnWhoseClientWentAwayEndsWhileItsAgentFloodsRequestsAndDoesNotRead(t *testing.T) {
	workspace := t.TempDir()
	big := filepath.Join(workspace, "big.txt")
	if err := os.WriteFile(big, bytes.Repeat([]byte("x"), 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	s := serve(t, "--config", readerConfig(t, workspace))
	ctx, goAway := context.WithCancel(context.Background())
	client, id, stream := openHostile(ctx, t, s, "stall\nreadflood 20 "+big+"\nhang")
	// The gateway is blocked writing an answer once the agent's stdin
	// pipe is full: 1 MiB answers fill it at once.
	settle(t, s.cmd.Process.Pid)
	goAway()
	_, _ = stream.Recv()
	// The turn's own goroutine asks the agent to cancel; it must not wait
	// behind the blocked answers to do so, or the cancel grace never runs.
	waitNotRunning(t, client, id, ends)
}

func TestAnAgentSendingTwentyThousandRequestsAndReadingTheAnswersStillEndsItsTurn(t *testing.T) {
	s := serve(t, "--config", readerConfig(t, t.TempDir()))
	pid := s.cmd.Process.Pid
	_, _, stream := openHostile(context.Background(), t, s, "reqflood 20000\nstop end_turn")
	e := terminal(t, stream, 2*time.Minute)
	if e.GetOutcome().GetStopReason() != "end_turn" {
		t.Errorf("terminal %v", e)
	}
	peak, bound := procStatus(t, pid, "VmHWM"), peakRSSBound(acp.DefaultMaxAgentRequests, 1<<10)
	t.Logf("gateway peak RSS %d MiB (bound %d MiB), %d threads", peak>>20, bound>>20, procStatus(t, pid, "Threads"))
	if peak > bound {
		t.Errorf("the gateway's RSS peaked at %d MiB, over %d MiB", peak>>20, bound>>20)
	}
}
