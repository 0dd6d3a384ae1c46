package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// containmentBound bounds every wait of these tests: the kernel acts at
// once, so only something left behind takes this long.
const containmentBound = 10 * time.Second

func TestAnAgentThatExitsEndsTheTurnWhateverItsGrandchildrenHoldOpen(t *testing.T) {
	s := serve(t, "--config", writeConfig(t, e2eConfig))
	client, _ := s.client(t)
	stream, err := client.Prompt(bounded(t), &acpgatev1.PromptRequest{Agent: "test", Text: "spawn 300\nchunk last words\nsleep 1000\nexit 3"})
	if err != nil {
		t.Fatal(err)
	}
	var grandchild int
	var said []string
	var terminal *acpgatev1.PromptEvent
	for terminal == nil {
		e, err := stream.Recv()
		if err != nil {
			t.Fatalf("the stream ended with %v before its terminal (a grandchild holding the agent's stdout keeps the turn open)", err)
		}
		text := e.GetAgentMessageChunk().GetText()
		if pid, ok := strings.CutPrefix(text, "spawned:"); ok {
			grandchild = leftover(t, pid)
		} else if text != "" {
			said = append(said, text)
		}
		if e.GetOutcome() != nil || e.GetError() != nil {
			terminal = e
		}
	}
	tr := terminal.GetError().GetTransport()
	if tr.GetReason() != acpgatev1.TransportReason_TRANSPORT_REASON_STREAM_ENDED || tr.ExitCode == nil || tr.GetExitCode() != 3 {
		t.Errorf("terminal %v, want a transport STREAM_ENDED failure with exit code 3", terminal)
	}
	if len(said) != 1 || said[0] != "last words" {
		t.Errorf("the agent's last output before it exited: %q", said)
	}
	if grandchild == 0 {
		t.Fatal("the agent reported no grandchild")
	}
	if !gone(grandchild) {
		t.Errorf("the grandchild %d outlived the agent", grandchild)
	}
}

func TestASetsidGrandchildIsGoneAfterItsSessionCloses(t *testing.T) {
	s := serve(t, "--config", writeConfig(t, e2eConfig))
	client, sess, grandchild := sessionWithGrandchild(t, s)
	if _, err := client.CloseSession(bounded(t), &acpgatev1.CloseSessionRequest{SessionId: sess.GetId()}); err != nil {
		t.Fatal(err)
	}
	if !gone(grandchild) {
		t.Errorf("the setsid grandchild %d outlived its session", grandchild)
	}
}

func TestAKilledGatewayLeavesNoDescendantOfItsAgentsAndItsTempDirsGoAtTheNextStart(t *testing.T) {
	// The gateway's temporary directories go where this test can see them.
	t.Setenv("TMPDIR", t.TempDir())
	s := serve(t, "--config", writeConfig(t, e2eConfig))
	_, sess, grandchild := sessionWithGrandchild(t, s)
	// --unique-sessions ids are sess-<agent pid>-<n>.
	agent := leftover(t, strings.Split(sess.GetId(), "-")[1])
	if _, err := os.Stat(sess.GetCwd()); err != nil {
		t.Fatalf("the session's directory: %v", err)
	}

	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.exited:
	case <-time.After(containmentBound):
		t.Fatal("acpgate did not die of SIGKILL")
	}
	for _, pid := range []int{agent, grandchild} {
		if !gone(pid) {
			t.Errorf("process %d outlived the gateway killed with SIGKILL", pid)
		}
	}

	again := serve(t, "--config", writeConfig(t, e2eConfig))
	if _, err := os.Stat(sess.GetCwd()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the killed gateway's session directory %s is still there after the next start (%v)\n%s", sess.GetCwd(), err, again.log())
	}
}

// bounded is a context that ends after containmentBound, or with the test.
func bounded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), containmentBound)
	t.Cleanup(cancel)
	return ctx
}

// sessionWithGrandchild opens a session and runs a turn on it that leaves
// a setsid grandchild of the agent behind, holding the agent's stdout; it
// returns the client, the session and the grandchild's pid.
func sessionWithGrandchild(t *testing.T, s *served) (acpgatev1.AgentGatewayClient, *acpgatev1.Session, int) {
	t.Helper()
	client, _ := s.client(t)
	ctx := bounded(t)
	sess, err := client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "test"})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := client.Prompt(ctx, &acpgatev1.PromptRequest{SessionId: sess.GetId(), Text: "spawn --setsid 300\nstop end_turn"})
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	for {
		e, err := stream.Recv()
		if err != nil {
			t.Fatalf("the stream ended with %v before its terminal", err)
		}
		if text, ok := strings.CutPrefix(e.GetAgentMessageChunk().GetText(), "spawned:"); ok {
			pid = leftover(t, text)
		}
		if e.GetOutcome() != nil {
			break
		}
		if e.GetError() != nil {
			t.Fatalf("terminal %v", e)
		}
	}
	if pid == 0 {
		t.Fatal("the agent reported no grandchild")
	}
	return client, sess, pid
}

// leftover parses a pid the test expects to be gone by its end, and makes
// sure it is: a process that escaped the gateway must not outlive the test
// either. It is killed only while it is still the process the test saw
// start, so a recycled pid is left alone.
func leftover(t *testing.T, text string) int {
	t.Helper()
	pid, err := strconv.Atoi(text)
	if err != nil || pid <= 1 {
		t.Fatalf("pid %q", text)
	}
	started := startTime(pid)
	if started == "" {
		t.Fatalf("process %d is not running", pid)
	}
	t.Cleanup(func() {
		if alive(pid) && startTime(pid) == started {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return pid
}

// startTime is the start time /proc/<pid>/stat gives, which tells a process
// from a later one given the same pid; "" when there is no such process.
func startTime(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// After the command's closing parenthesis, starttime is the 20th field.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// gone waits, up to containmentBound, for pid to stop running.
func gone(pid int) bool {
	deadline := time.Now().Add(containmentBound)
	for alive(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}
