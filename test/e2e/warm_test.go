package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// The tests in this file check the warm pool against the real binary and
// real agent processes: what is kept warm, how it is replaced, how it
// backs off, how it is counted and that it is stopped with the gateway.

// warmBound bounds every wait for the pool to reach a state: generous,
// since the machine running the tests may be shared.
const warmBound = 15 * time.Second

// initDelay is how long the slow agent of these tests sleeps before it
// answers initialize: a stand-in for a slow-starting agent.
const initDelay = time.Second

// agentInfo is the ListAgents entry of the agent named.
func agentInfo(t *testing.T, client acpgatev1.AgentGatewayClient, name string) *acpgatev1.Agent {
	t.Helper()
	resp, err := client.ListAgents(bounded(t), &acpgatev1.ListAgentsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range resp.GetAgents() {
		if a.GetName() == name {
			return a
		}
	}
	t.Fatalf("ListAgents has no agent %q", name)
	return nil
}

// waitAgent polls ListAgents until the agent named satisfies ok, for at
// most warmBound.
func waitAgent(t *testing.T, s *served, client acpgatev1.AgentGatewayClient, name, what string, ok func(*acpgatev1.Agent) bool) *acpgatev1.Agent {
	t.Helper()
	deadline := time.Now().Add(warmBound)
	for {
		a := agentInfo(t, client, name)
		if ok(a) {
			return a
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent %q: %s: not within %s; ListAgents says %v\n%s", name, what, warmBound, a, s.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// testAgent is the YAML of one agent running the test agent with args,
// keeping warm processes warm.
func testAgent(name string, warm int, args ...string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	return fmt.Sprintf(`  - name: %s
    command: "${ACPGATE_E2E_AGENT}"
    args: [%s]
    warm: %d
`, name, strings.Join(quoted, ", "), warm)
}

// warmConfig is a configuration of agents (testAgent's) under extra
// top-level settings.
func warmConfig(t *testing.T, extra string, agents ...string) string {
	return writeConfig(t, "shutdown_grace: 3s\n"+extra+"agents:\n"+strings.Join(agents, ""))
}

// waitReplaced waits for agent "test" to have one warm process ready
// again, and one agent process running, other than old.
func waitReplaced(t *testing.T, s *served, client acpgatev1.AgentGatewayClient, old int) *acpgatev1.Agent {
	t.Helper()
	return waitAgent(t, s, client, "test", "a replacement ready", func(a *acpgatev1.Agent) bool {
		now := childrenRunning(s.cmd.Process.Pid, agentBin)
		return a.GetWarmReady() == 1 && len(now) == 1 && now[0] != old
	})
}

func readyIs(n uint32) func(*acpgatev1.Agent) bool {
	return func(a *acpgatev1.Agent) bool { return a.GetWarmReady() == n && a.GetWarmStarting() == 0 }
}

// firstChunkAfter runs a one-shot turn on agent and returns the time from
// sending it to its first chunk.
func firstChunkAfter(t *testing.T, client acpgatev1.AgentGatewayClient, agent string) time.Duration {
	t.Helper()
	began := time.Now()
	stream, err := client.Prompt(bounded(t), &acpgatev1.PromptRequest{Agent: agent, Text: "chunk hello\nstop end_turn"})
	if err != nil {
		t.Fatal(err)
	}
	var took time.Duration
	for {
		e, err := stream.Recv()
		if err != nil {
			t.Fatalf("the stream ended with %v before its terminal", err)
		}
		if e.GetAgentMessageChunk() != nil && took == 0 {
			took = time.Since(began)
		}
		if e.GetError() != nil {
			t.Fatalf("terminal %v", e)
		}
		if e.GetOutcome() != nil {
			return took
		}
	}
}

func TestAOneShotTurnOnAWarmAgentGetsItsFirstChunkWithoutWaitingForTheAgentToStart(t *testing.T) {
	slow := []string{"--unique-sessions", "--initialize-delay", initDelay.String()}
	s := serve(t, "--config", warmConfig(t, "", testAgent("warm", 1, slow...), testAgent("cold", 0, slow...)))
	client, _ := s.client(t)
	waitAgent(t, s, client, "warm", "one warm process ready", readyIs(1))

	// Bounds on which path was taken, not performance assertions: a warm
	// take cannot wait for initialize, a cold start must.
	if took := firstChunkAfter(t, client, "warm"); took >= initDelay/2 {
		t.Errorf("the warm one-shot turn's first chunk came after %s, want well under the agent's %s start-up", took, initDelay)
	}
	if took := firstChunkAfter(t, client, "cold"); took < initDelay {
		t.Errorf("the cold one-shot turn's first chunk came after %s, before the agent could have started (%s)", took, initDelay)
	}
	warm := agentInfo(t, client, "warm")
	if d := warm.GetLastStartupDuration().AsDuration(); d < initDelay {
		t.Errorf("ListAgents says the last start-up took %s, want at least the agent's %s", d, initDelay)
	}
	if warm.GetWarmTarget() != 1 {
		t.Errorf("warm_target = %d, want 1", warm.GetWarmTarget())
	}
}

func TestThePoolRefillsAfterEachTake(t *testing.T) {
	s := serve(t, "--config", warmConfig(t, "metrics: {listen: 127.0.0.1:0}\n", testAgent("test", 2, "--unique-sessions", "--initialize-delay", "300ms")))
	client, _ := s.client(t)
	waitAgent(t, s, client, "test", "two warm processes ready", readyIs(2))
	before := childrenRunning(s.cmd.Process.Pid, agentBin)
	sess, err := client.CreateSession(bounded(t), &acpgatev1.CreateSessionRequest{Agent: "test"})
	if err != nil {
		t.Fatal(err)
	}
	// --unique-sessions ids are sess-<agent pid>-<n>: the session runs on
	// one of the processes that were warm.
	pid := leftover(t, strings.Split(sess.GetAcpSessionId(), "-")[1])
	if !slices.Contains(before, pid) {
		t.Errorf("the session runs on agent %d, not on one of the warm processes %v", pid, before)
	}
	waitAgent(t, s, client, "test", "the pool back at two ready after the take", readyIs(2))
	if n := len(childrenRunning(s.cmd.Process.Pid, agentBin)); n != 3 {
		t.Errorf("%d agent processes run, want 3: the session's and two warm", n)
	}
	fams := scrape(t, s.metricsURL(t))
	wantValues(t, fams, "acpgate_agent_warm_ready", map[string]float64{"agent=test": 2})
	wantValues(t, fams, "acpgate_agent_warm_starting", map[string]float64{"agent=test": 0})
	wantValues(t, fams, "acpgate_session_starts_total", map[string]float64{"agent=test,start=warm": 1})
	if _, err := client.CloseSession(bounded(t), &acpgatev1.CloseSessionRequest{SessionId: sess.GetId()}); err != nil {
		t.Fatal(err)
	}
	if !gone(pid) {
		t.Errorf("the taken process %d outlived its session: a process serves one session", pid)
	}
}

func TestAWarmProcessKilledWhileItWaitsIsReplaced(t *testing.T) {
	s := serve(t, "--config", warmConfig(t, "", testAgent("test", 1, "--unique-sessions")))
	client, _ := s.client(t)
	waitAgent(t, s, client, "test", "one warm process ready", readyIs(1))
	warm := childrenRunning(s.cmd.Process.Pid, agentBin)
	if len(warm) != 1 {
		t.Fatalf("agent processes %v, want the one warm process", warm)
	}
	if err := syscall.Kill(warm[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !gone(warm[0]) {
		t.Fatalf("the warm process %d survived SIGKILL", warm[0])
	}
	a := waitReplaced(t, s, client, warm[0])
	if a.GetLastStartupFailure() != nil {
		t.Errorf("the replacement's success should clear the failure, ListAgents says %v", a.GetLastStartupFailure())
	}
	if !strings.Contains(s.log(), "exited while waiting to be taken") {
		t.Errorf("the log does not say the warm process died:\n%s", s.log())
	}
	// The replacement serves.
	if took := firstChunkAfter(t, client, "test"); took <= 0 {
		t.Error("the turn on the replacement streamed no chunk")
	}
}

func TestAWarmProcessOlderThanWarmMaxAgeIsReplaced(t *testing.T) {
	s := serve(t, "--config", warmConfig(t, "", testAgent("test", 1, "--unique-sessions")+"    warm_max_age: 1s\n"))
	client, _ := s.client(t)
	waitAgent(t, s, client, "test", "one warm process ready", readyIs(1))
	first := childrenRunning(s.cmd.Process.Pid, agentBin)
	if len(first) != 1 {
		t.Fatalf("agent processes %v, want the one warm process", first)
	}
	leftover(t, fmt.Sprint(first[0]))
	if !gone(first[0]) {
		t.Fatalf("the warm process %d was not retired after warm_max_age", first[0])
	}
	a := waitReplaced(t, s, client, first[0])
	if a.GetLastStartupFailure() != nil {
		t.Errorf("retiring an old process is no failure, ListAgents says %v", a.GetLastStartupFailure())
	}
}

func TestAnAgentThatCannotStartBacksOffInsteadOfRespawningInALoop(t *testing.T) {
	starts := filepath.Join(t.TempDir(), "starts")
	s := serve(t, "--config", warmConfig(t, "", testAgent("broken", 2, "--exit-on-initialize", "3", "--count-starts", starts)))
	client, _ := s.client(t)
	window := 3 * time.Second
	time.Sleep(window)
	b, err := os.ReadFile(starts)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	// Two at once, then after 1 s and 2 s of back-off (doubling to a
	// minute): a handful in 3 s. A loop without back-off would start
	// hundreds.
	n := bytes.Count(b, []byte("start\n"))
	if n == 0 || n > 6 {
		t.Errorf("the failing agent was started %d times in %s, want between 1 and 6", n, window)
	}
	a := agentInfo(t, client, "broken")
	f := a.GetLastStartupFailure()
	if f == nil || !strings.Contains(f.GetMessage(), "warm start-up failed") || f.GetAt() == nil || !f.GetRetryAt().AsTime().After(f.GetAt().AsTime()) {
		t.Errorf("ListAgents does not show the failure and when it is retried: %v", a)
	}
	if a.GetWarmReady() != 0 {
		t.Errorf("warm_ready = %d for an agent that cannot start", a.GetWarmReady())
	}
	// A session still starts cold, and fails for the agent's own reason.
	if _, err := client.CreateSession(bounded(t), &acpgatev1.CreateSessionRequest{Agent: "broken"}); status.Code(err) != codes.Unavailable {
		t.Errorf("CreateSession on the broken agent: %v, want UNAVAILABLE", err)
	}
	t.Logf("%d starts in %s; failure %q", n, window, f.GetMessage())
}

func TestShutdownStopsWarmProcessesAndThoseStillStartingLeavingNone(t *testing.T) {
	s := serve(t, "--config", warmConfig(t, "",
		testAgent("ready", 2, "--unique-sessions"),
		testAgent("slow", 1, "--unique-sessions", "--initialize-delay", "1h")))
	client, _ := s.client(t)
	waitAgent(t, s, client, "ready", "two warm processes ready", readyIs(2))
	waitAgent(t, s, client, "slow", "one warm process starting", func(a *acpgatev1.Agent) bool { return a.GetWarmStarting() == 1 })
	pids := childrenRunning(s.cmd.Process.Pid, agentBin)
	if len(pids) != 3 {
		t.Fatalf("agent processes %v, want two ready and one starting", pids)
	}
	for _, pid := range pids {
		leftover(t, fmt.Sprint(pid))
	}
	s.terminate(t, 3*time.Second)
	for _, pid := range pids {
		if !gone(pid) {
			t.Errorf("warm agent process %d outlived the gateway", pid)
		}
	}
}

func TestMaxWarmCapsWarmProcessesAcrossAgentsAndATakeStillCountsAsASession(t *testing.T) {
	s := serve(t, "--config", warmConfig(t, "limits: {max_warm: 3, max_sessions: 1}\n",
		testAgent("a", 2, "--unique-sessions"), testAgent("b", 2, "--unique-sessions")))
	client, _ := s.client(t)
	total := func() int {
		return int(agentInfo(t, client, "a").GetWarmReady() + agentInfo(t, client, "b").GetWarmReady())
	}
	deadline := time.Now().Add(warmBound)
	for total() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("the pools never held 3 warm processes:\n%s", s.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Long enough for a pool refused a slot to try again (it rechecks
	// every second).
	time.Sleep(1500 * time.Millisecond)
	if n, procs := total(), len(childrenRunning(s.cmd.Process.Pid, agentBin)); n != 3 || procs != 3 {
		t.Errorf("%d warm processes ready, %d agent processes running; limits.max_warm is 3", n, procs)
	}

	// Warm processes are not sessions: they did not fill max_sessions.
	ctx := bounded(t)
	sess, err := client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "a"})
	if err != nil {
		t.Fatalf("CreateSession with warm processes held and no session open: %v", err)
	}
	// Taken, a warm process is a session: max_sessions (1) is reached,
	// and a warm process waiting does not get past it.
	if _, err := client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "b"}); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a second session with max_sessions 1: %v, want RESOURCE_EXHAUSTED", err)
	}
	if _, err := client.CloseSession(ctx, &acpgatev1.CloseSessionRequest{SessionId: sess.GetId()}); err != nil {
		t.Fatal(err)
	}
	// The take gave its warm slot back: the pools fill up to 3 again.
	deadline = time.Now().Add(warmBound)
	for total() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("the pools did not refill to limits.max_warm after a take:\n%s", s.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := len(childrenRunning(s.cmd.Process.Pid, agentBin)); n > 3 {
		t.Errorf("%d agent processes run with no session open and limits.max_warm 3", n)
	}
}
