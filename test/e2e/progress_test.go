package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal: the controlling side, which reads what
// is written to the terminal, and the terminal itself, for a child's
// stderr.
func openPTY(t *testing.T) (control, term *os.File) {
	t.Helper()
	control, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { _ = control.Close() })
	if err := unix.IoctlSetPointerInt(int(control.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlocking the pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetInt(int(control.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("naming the pseudo-terminal: %v", err)
	}
	term, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = term.Close() })
	return control, term
}

// progressConfig has an agent slow to start (its initialize answers after
// 1.5s) and heartbeats every 200ms, so a prompt waits visibly on both.
const progressConfig = `
store: memory
heartbeat_interval: 200ms
agents:
  - name: slow
    command: "${ACPGATE_E2E_AGENT}"
    args: [--initialize-delay, 1500ms]
`

// progressPrompt waits on the slow agent's start and then on its answer.
const progressPrompt = "sleep 1500\nchunk done"

// onTerminal runs the real acpgate with args and its stderr on a
// pseudo-terminal, and returns its stdout and what the terminal showed.
func onTerminal(t *testing.T, args ...string) (stdout, shown string) {
	t.Helper()
	bin, _ := binaries(t)
	control, term := openPTY(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, term
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = term.Close() // the child holds it; the read below ends when it exits
	read := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(control) // EIO once the child has closed the terminal
		read <- string(b)
	}()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("acpgate %q: %v; stdout %q", args, err, out.String())
	}
	select {
	case shown = <-read:
	case <-time.After(10 * time.Second):
		t.Fatal("the terminal's output did not end within 10s of the command's exit")
	}
	return out.String(), shown
}

// checkProgress checks that the terminal showed each of want, on one line
// rewritten with \r, never scrolled, and erased (blanked, the cursor back
// at its start) before the first output, the end_turn note.
func checkProgress(t *testing.T, shown string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(shown, w) {
			t.Errorf("the terminal never showed %q:\n%q", w, shown)
		}
	}
	end := strings.Index(shown, "· end_turn")
	if end < 0 {
		t.Fatalf("no end_turn note on the terminal:\n%q", shown)
	}
	before := shown[:end]
	if strings.Contains(before, "\n") {
		t.Errorf("the status line scrolled (a newline before the first output):\n%q", before)
	}
	if !strings.HasSuffix(before, " \r") || strings.Contains(before[strings.LastIndex(before[:len(before)-1], "\r"):], "·") {
		t.Errorf("the status line was not erased before the output:\n%q", before)
	}
}

// A prompt whose stderr is a terminal says what it waits on while nothing
// streams (the agent's start, cold, then the agent, with the heartbeats
// that show the turn alive) on one line rewritten in place, and erases it
// before its output: the answer on stdout is untouched.
func TestAPromptOnATerminalShowsWhatItWaitsOnUntilItsOutputStarts(t *testing.T) {
	s := serve(t, "--config", writeConfig(t, progressConfig))
	stdout, shown := onTerminal(t, "prompt", "--addr", s.addr, "--agent", "slow", progressPrompt)
	if stdout != "done\n" {
		t.Errorf("stdout = %q, want the answer alone", stdout)
	}
	checkProgress(t, shown, "· starting agent slow… ", "(cold start)", "· waiting on agent slow… ", " · last heartbeat ")
}

// A watch of a running turn on a terminal says so while nothing streams.
func TestAWatchOnATerminalShowsWhatItWaitsOn(t *testing.T) {
	s := serve(t, "--config", writeConfig(t, progressConfig))
	code, turn, stderr, _ := s.runBinary(t, "prompt", "--agent", "slow", "--request-id", "progress-1", "--detach", "sleep 2000\nchunk done")
	if code != 0 {
		t.Fatalf("prompt --detach: exit %d, stderr %q", code, stderr)
	}
	stdout, shown := onTerminal(t, "watch", "--addr", s.addr, strings.TrimSpace(turn))
	if stdout != "done\n" {
		t.Errorf("stdout = %q, want the answer alone", stdout)
	}
	checkProgress(t, shown, "· waiting on agent slow… ", " · last heartbeat ")
}

// With stderr not a terminal (a pipe, a log), a prompt prints no status
// line: only what it printed before.
func TestAPromptWhoseStderrIsNoTerminalShowsNoProgress(t *testing.T) {
	s := serve(t, "--config", writeConfig(t, progressConfig))
	code, stdout, stderr := runCLI(t, "prompt", "--addr", s.addr, "--agent", "slow", progressPrompt)
	if code != 0 || stdout != "done\n" {
		t.Fatalf("prompt: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if strings.Contains(stderr, "\r") || strings.Contains(stderr, "waiting") || strings.Contains(stderr, "starting") {
		t.Errorf("stderr, not a terminal, shows progress: %q", stderr)
	}
}
