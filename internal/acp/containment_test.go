package acp_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/acp"
	"github.com/acpgate/acpgate/internal/acp/agentproc"
)

// contained opens a test agent under containment c, skipping the test when
// the kernel gives the agent a weaker kind.
func contained(t *testing.T, c agentproc.Containment) *acp.Session {
	t.Helper()
	cfg := agentConfig()
	cfg.Process.Containment = c
	s := open(t, cfg)
	if got := s.Containment(); got != c {
		t.Skipf("the kernel refuses %s here (the agent runs under %s)", c, got)
	}
	return s
}

// spawned returns the pid in the "spawned:<pid>" chunk among a turn's
// events.
func spawned(t *testing.T, rec *recorder) int {
	t.Helper()
	e := rec.waitFor(t, func(e *acpgatev1.PromptEvent) bool {
		return strings.HasPrefix(e.GetAgentMessageChunk().GetText(), "spawned:")
	})
	pid, err := strconv.Atoi(strings.TrimPrefix(e.GetAgentMessageChunk().GetText(), "spawned:"))
	if err != nil || pid <= 1 {
		t.Fatalf("chunk %q", e.GetAgentMessageChunk().GetText())
	}
	return pid
}

// goneWithin waits up to d for pid to stop running.
func goneWithin(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !processGone(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

var everyContainment = []agentproc.Containment{agentproc.ContainProcessGroup, agentproc.ContainPIDNamespace, agentproc.ContainUserPIDNamespace}

func TestUnderEveryContainmentAnAgentsExitEndsTheTurnWithItsStatusAndStopsTheGrandchildHoldingItsStdout(t *testing.T) {
	for _, c := range everyContainment {
		t.Run(strings.ReplaceAll(c.String(), " ", "_"), func(t *testing.T) {
			s := contained(t, c)
			rec := newRecorder()
			done := make(chan struct{})
			var e *acpgatev1.HarnessError
			go func() {
				defer close(done)
				e = mustError(t, prompt(t, s, "spawn 300\nchunk last words\nexit 3", rec))
			}()
			grandchild := spawned(t, rec)
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				s.Close() // ends the turn, so the test can end
				<-done
				t.Fatal("the turn outlived its agent: a grandchild holding the agent's stdout kept it open")
			}
			tr := e.GetTransport()
			if tr.GetReason() != acpgatev1.TransportReason_TRANSPORT_REASON_STREAM_ENDED || tr.ExitCode == nil || tr.GetExitCode() != 3 {
				t.Errorf("%v", e)
			}
			contains(t, e.GetMessage(), "status 3", "last words")
			if !goneWithin(grandchild, 5*time.Second) {
				t.Errorf("the grandchild %d outlived the agent", grandchild)
			}
		})
	}
}

func TestInAPIDNamespaceNoDescendantOutlivesItsSessionEvenOutsideTheProcessGroup(t *testing.T) {
	for _, c := range everyContainment[1:] {
		t.Run(strings.ReplaceAll(c.String(), " ", "_"), func(t *testing.T) {
			s := contained(t, c)
			rec := newRecorder()
			if r := prompt(t, s, "spawn --setsid 300\nstop end_turn", rec); r.Outcome == nil {
				t.Fatalf("%v", r.Error)
			}
			grandchild := spawned(t, rec)
			if processGone(grandchild) {
				t.Fatal("the grandchild should run until the session closes")
			}
			s.Close()
			if !goneWithin(grandchild, 5*time.Second) {
				t.Errorf("the setsid grandchild %d outlived its session", grandchild)
			}
		})
	}
}

func TestProbeContainmentFindsWhatTheKernelAllows(t *testing.T) {
	c, _, refused := agentproc.ProbeContainment("")
	if c == agentproc.ContainPIDNamespace && refused != nil || !c.KernelEnforced() && refused == nil {
		t.Errorf("%s, refused %v: the strongest kind and no reason, or a weaker kind with one", c, refused)
	}
	if !c.KernelEnforced() {
		t.Logf("namespaces refused here: %v", refused)
		return
	}
	// What the probe allows, a session gets.
	if s := contained(t, c); s.Containment() != c {
		t.Errorf("the agent runs under %s, the probe said %s", s.Containment(), c)
	}
}
