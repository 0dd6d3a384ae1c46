package e2e

import (
	"bytes"
	"context"
	"errors"
	"github.com/acpgate/acpgate/internal/exitcode"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// cliCommandTimeout bounds one run of the client binary.
const cliCommandTimeout = 30 * time.Second

// runBinary runs the real acpgate binary with args against s and returns
// its exit code, output and how long it took.
func (s *served) runBinary(t *testing.T, args ...string) (code int, stdout, stderr string, took time.Duration) {
	t.Helper()
	bin, _ := binaries(t)
	ctx, cancel := context.WithTimeout(t.Context(), cliCommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{args[0], "--addr", s.addr}, args[1:]...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	err := cmd.Run()
	took = time.Since(start)
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("acpgate %q did not finish within %v; stderr:\n%s", args, cliCommandTimeout, errOut.String())
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("acpgate %q: %v", args, err)
	}
	return code, out.String(), errOut.String(), took
}

// turnRows returns the rows of `acpgate turns`' table, as fields.
func turnRows(t *testing.T, s *served) [][]string {
	t.Helper()
	code, stdout, stderr, _ := s.runBinary(t, "turns")
	if code != exitcode.OK {
		t.Fatalf("turns: exit %d, stderr %q", code, stderr)
	}
	var rows [][]string
	for _, line := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")[1:] {
		rows = append(rows, strings.Fields(line))
	}
	return rows
}

func TestADetachedPromptCanBeWatchedListedAndAttachedToAgainByItsRequestID(t *testing.T) {
	// Heartbeats every 100ms: the watch below, during the agent's sleep,
	// receives some, and must not show them.
	s := serve(t, "--config", writeConfig(t, e2eConfig+"heartbeat_interval: 100ms\n"))
	const script = "sleep 1500\nchunk done"

	code, stdout, stderr, took := s.runBinary(t, "prompt", "--agent", "test", "--request-id", "e2e-job-1", "--detach", script)
	turnID := strings.TrimSpace(stdout)
	if code != exitcode.OK || turnID == "" || strings.Count(stdout, "\n") != 1 {
		t.Fatalf("prompt --detach: exit %d, stdout %q, stderr %q; want 0 and a turn id", code, stdout, stderr)
	}
	if took >= 1500*time.Millisecond {
		t.Errorf("prompt --detach took %v: it waited for the turn", took)
	}
	// The command is gone; the turn is not.
	if code, stdout, stderr, _ := s.runBinary(t, "turn", turnID); code != exitcode.OK || !strings.Contains(stdout, "running") {
		t.Errorf("turn %s right after detaching: exit %d, stdout %q, stderr %q; want it running", turnID, code, stdout, stderr)
	}

	code, stdout, stderr, _ = s.runBinary(t, "watch", turnID)
	if code != exitcode.OK || stdout != "done\n" {
		t.Errorf("watch: exit %d, stdout %q; want 0, %q; stderr:\n%s", code, stdout, "done\n", stderr)
	}
	if !strings.Contains(stderr, "· end_turn (session ") || strings.Contains(stderr, "acpgate:") {
		t.Errorf("watch's stderr = %q, want the end_turn note and no error", stderr)
	}

	rows := turnRows(t, s)
	if len(rows) != 1 {
		t.Fatalf("turns lists %d turns, want 1: %q", len(rows), rows)
	}
	// TURN STATE AGENT SESSION ATTEMPT REQUEST STARTED ENDED SEQ ENDING
	if r := rows[0]; len(r) != 10 || r[0] != turnID || r[1] != "ended" || r[2] != "test" || r[4] != "1" || r[5] != "e2e-job-1" || r[9] != "outcome" {
		t.Errorf("turns row = %q, want turn %s ended with an outcome, attempt 1 of e2e-job-1", r, turnID)
	}

	// The same request again attaches to the ended turn: its answer, at
	// once, and no second turn.
	code, stdout, stderr, took = s.runBinary(t, "prompt", "--agent", "test", "--request-id", "e2e-job-1", script)
	if code != exitcode.OK || stdout != "done\n" {
		t.Errorf("prompt again: exit %d, stdout %q; want 0, %q; stderr:\n%s", code, stdout, "done\n", stderr)
	}
	if took >= 1500*time.Millisecond {
		t.Errorf("prompt again took %v: the turn ran again", took)
	}
	if rows := turnRows(t, s); len(rows) != 1 {
		t.Errorf("after the same request again, turns lists %d turns, want 1: %q", len(rows), rows)
	}

	// A watch from the middle on replays the rest.
	if code, stdout, stderr, _ := s.runBinary(t, "watch", "--json", turnID, "--after", "1"); code != exitcode.OK ||
		strings.Contains(stdout, `"started"`) || !strings.Contains(stdout, `"outcome"`) || strings.Contains(stdout, `"heartbeat"`) {
		t.Errorf("watch --json --after 1: exit %d, stdout %q, stderr %q; want the events after started, no heartbeat", code, stdout, stderr)
	}

	if code, _, stderr, _ := s.runBinary(t, "watch", "no-such-turn"); code != exitcode.Rejected || !strings.Contains(stderr, "NOT_FOUND") {
		t.Errorf("watch of an unknown turn: exit %d, stderr %q; want %d and NOT_FOUND", code, stderr, exitcode.Rejected)
	}
}

// A cancelled turn is listed as cancelled: "harness" would read as the
// agent's own failure.
func TestTurnsListsACancelledTurnAsCancelled(t *testing.T) {
	s := serve(t, "--config", writeConfig(t, e2eConfig))
	code, stdout, stderr, _ := s.runBinary(t, "prompt", "--agent", "test", "--request-id", "e2e-cancel-1", "--detach", "hang")
	turnID := strings.TrimSpace(stdout)
	if code != exitcode.OK || turnID == "" {
		t.Fatalf("prompt --detach: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	rows := turnRows(t, s)
	if len(rows) != 1 || len(rows[0]) != 10 {
		t.Fatalf("turns = %q, want the one running turn", rows)
	}
	if code, _, stderr, _ := s.runBinary(t, "cancel", rows[0][3]); code != exitcode.OK {
		t.Fatalf("cancel %s: exit %d, stderr %q", rows[0][3], code, stderr)
	}
	deadline := time.Now().Add(10 * time.Second)
	for rows[0][1] != "ended" {
		if time.Now().After(deadline) {
			t.Fatalf("the cancelled turn has not ended within 10s: %q", rows)
		}
		time.Sleep(50 * time.Millisecond)
		rows = turnRows(t, s)
	}
	if ending := strings.Join(rows[0][9:], " "); ending != "cancelled" {
		t.Errorf("turns lists the cancelled turn's ending as %q, want cancelled", ending)
	}
}
