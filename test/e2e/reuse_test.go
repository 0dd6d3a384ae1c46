package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// The tests in this file check reuse_process against the real binary and
// real test agent processes: which sessions share a process, that each
// session's stream gets only its own updates and requests, that the
// per-process bound opens another process, and that a crash, a close and
// a shutdown treat every session on a shared process as they should.

// reusing serves an agent "test" in a workspace with reuse_process set to
// reuse, at most perProcess sessions a process and the ask permission
// policy; it returns the gateway, a client, the workspace and the file
// the agent counts its starts in.
func reusing(t *testing.T, reuse bool, perProcess int, agentFlags ...string) (*served, acpgatev1.AgentGatewayClient, string, string) {
	return reusingWith(t, reuse, perProcess, "", agentFlags...)
}

// reusingWith is reusing with the agent settings extra.
func reusingWith(t *testing.T, reuse bool, perProcess int, extra string, agentFlags ...string) (*served, acpgatev1.AgentGatewayClient, string, string) {
	t.Helper()
	starts := filepath.Join(t.TempDir(), "starts")
	cfg, workspace := resumable(t, fmt.Sprintf("    permission_policy: ask\n    reuse_process: %t\n    max_sessions_per_process: %d\n%s", reuse, perProcess, extra),
		append([]string{"--count-starts", starts}, agentFlags...)...)
	s := serve(t, "--config", cfg)
	client, _ := s.client(t)
	return s, client, workspace, starts
}

// startsIn is how many agent processes have started, as the agent counted.
func startsIn(t *testing.T, file string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("start\n"))
}

// newSessions creates n sessions of agent "test" in cwd.
func newSessions(t *testing.T, client acpgatev1.AgentGatewayClient, cwd string, n int) []*acpgatev1.Session {
	t.Helper()
	var out []*acpgatev1.Session
	for range n {
		sess, err := client.CreateSession(bounded(t), &acpgatev1.CreateSessionRequest{Agent: "test", Cwd: cwd})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, sess)
	}
	return out
}

// wantProcesses checks the agent processes the gateway runs and the agent's
// count of starts.
func wantProcesses(t *testing.T, s *served, starts string, n int) []int {
	t.Helper()
	pids := childrenRunning(s.cmd.Process.Pid, agentBin)
	if len(pids) != n || startsIn(t, starts) != n {
		t.Fatalf("%d agent processes running (%v), %d started; want %d", len(pids), pids, startsIn(t, starts), n)
	}
	return pids
}

// untilPermission reads a turn's events up to its permission request.
func untilPermission(t *testing.T, stream grpc.ServerStreamingClient[acpgatev1.PromptEvent]) ([]*acpgatev1.PromptEvent, *acpgatev1.PermissionRequest) {
	t.Helper()
	var events []*acpgatev1.PromptEvent
	for {
		e, err := stream.Recv()
		if err != nil {
			t.Fatalf("the stream ended with %v before its permission request; events %v", err, events)
		}
		events = append(events, e)
		if p := e.GetPermissionRequested(); p != nil {
			return events, p
		}
	}
}

func TestTwoSessionsOfOneCallerShareOneProcessAndEachStreamGetsOnlyItsOwnUpdatesAndPermissionRequests(t *testing.T) {
	s, client, _, starts := reusing(t, true, 2)
	sessions := newSessions(t, client, "", 2)
	wantProcesses(t, s, starts, 1)
	if a := agentInfo(t, client, "test"); !a.GetReuseProcess() || a.GetMaxSessionsPerProcess() != 2 || a.GetSharedProcesses() != 1 {
		t.Errorf("ListAgents says %v; want reuse_process, 2 sessions a process, 1 shared process", a)
	}

	// Both turns run at once on the one process, each waiting for its
	// own permission answer; they are answered in the other order.
	ctx := bounded(t)
	streams := make([]grpc.ServerStreamingClient[acpgatev1.PromptEvent], 2)
	requests := make([]*acpgatev1.PermissionRequest, 2)
	heads := make([][]*acpgatev1.PromptEvent, 2)
	for i, name := range []string{"a", "b"} {
		var err error
		streams[i], err = client.Prompt(ctx, &acpgatev1.PromptRequest{SessionId: sessions[i].GetId(),
			Text: fmt.Sprintf("chunk %s1 \npermission tool-%s\nchunk  %s2", name, name, name)})
		if err != nil {
			t.Fatal(err)
		}
		heads[i], requests[i] = untilPermission(t, streams[i])
		if got := requests[i].GetToolCall().GetToolCallId(); got != "tool-"+name {
			t.Errorf("session %s's stream got the permission request for %q", name, got)
		}
	}
	for i, option := range map[int]string{1: "reject", 0: "allow"} {
		if _, err := client.ResolvePermission(ctx, &acpgatev1.ResolvePermissionRequest{SessionId: sessions[i].GetId(), RequestId: requests[i].GetRequestId(), OptionId: option}); err != nil {
			t.Fatalf("ResolvePermission(%s, %s): %v", sessions[i].GetId(), option, err)
		}
	}
	for i, want := range []string{"a1 permission:allow a2", "b1 permission:reject b2"} {
		events := append(heads[i], drain(t, streams[i])...)
		if got := chunkTexts(events); got != want {
			t.Errorf("session %d's stream carried %q, want %q", i, got, want)
		}
		if o := events[len(events)-1].GetOutcome(); o.GetSessionId() != sessions[i].GetAcpSessionId() || !strings.HasSuffix(want, o.GetFinalMessage()) {
			t.Errorf("session %d's turn ended %v", i, events[len(events)-1])
		}
	}
	wantProcesses(t, s, starts, 1)
}

func TestTheBoundOnSessionsPerProcessAndAnotherDirectoryEachOpenAnotherProcess(t *testing.T) {
	s, client, workspace, starts := reusing(t, true, 2)
	newSessions(t, client, "", 3)
	wantProcesses(t, s, starts, 2)
	if err := os.Mkdir(filepath.Join(workspace, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	newSessions(t, client, "sub", 1)
	wantProcesses(t, s, starts, 3)
	// The second process has room for one more of the workspace's root.
	newSessions(t, client, "", 1)
	wantProcesses(t, s, starts, 3)
	if a := agentInfo(t, client, "test"); a.GetSharedProcesses() != 3 {
		t.Errorf("ListAgents counts %d shared processes, want 3", a.GetSharedProcesses())
	}
}

func TestWithoutReuseProcessEverySessionHasAProcessOfItsOwn(t *testing.T) {
	s, client, _, starts := reusing(t, false, 8)
	newSessions(t, client, "", 2)
	wantProcesses(t, s, starts, 2)
	if a := agentInfo(t, client, "test"); a.GetReuseProcess() || a.GetMaxSessionsPerProcess() != 0 || a.GetSharedProcesses() != 0 {
		t.Errorf("ListAgents says %v; want no reuse", a)
	}
}

func TestACrashOfTheSharedProcessEndsEverySessionOnIt(t *testing.T) {
	s, client, _, starts := reusing(t, true, 2)
	sessions := newSessions(t, client, "", 2)
	pid := wantProcesses(t, s, starts, 1)[0]
	stream, err := client.Prompt(bounded(t), &acpgatev1.PromptRequest{SessionId: sessions[0].GetId(), Text: "chunk running\nhang"})
	if err != nil {
		t.Fatal(err)
	}
	if e, err := stream.Recv(); err != nil || e.GetStarted() == nil {
		t.Fatalf("the turn began with %v, %v", e, err)
	}
	if e, err := stream.Recv(); err != nil || e.GetAgentMessageChunk().GetText() != "running" {
		t.Fatalf("the turn's first update is %v, %v", e, err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	events := drain(t, stream)
	if e := events[len(events)-1].GetError(); e.GetTransport() == nil {
		t.Errorf("the running turn ended %v, want a transport failure", events[len(events)-1])
	}
	// The idle session on the same process ends too (its agent cannot
	// re-open sessions, so it is not suspended).
	ctx := bounded(t)
	for _, sess := range sessions {
		wantGone(ctx, t, client, sess.GetId())
	}
	if a := agentInfo(t, client, "test"); a.GetSharedProcesses() != 0 {
		t.Errorf("ListAgents counts %d shared processes after the crash, want 0", a.GetSharedProcesses())
	}
	// A new session starts a new process.
	newSessions(t, client, "", 1)
	if n := startsIn(t, starts); n != 2 {
		t.Errorf("%d starts after the crash and a new session, want 2", n)
	}
}

func TestClosingOneSessionClosesItOnTheAgentAndKeepsTheSharedProcessForTheOther(t *testing.T) {
	meta := filepath.Join(t.TempDir(), "meta")
	s, client, _, starts := reusing(t, true, 2, "--close-session", "--record-meta", meta)
	sessions := newSessions(t, client, "", 2)
	pid := wantProcesses(t, s, starts, 1)[0]
	ctx := bounded(t)
	if _, err := client.CloseSession(ctx, &acpgatev1.CloseSessionRequest{SessionId: sessions[0].GetId()}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(meta); !bytes.Contains(b, []byte(`"method":"session/close"`)) {
		t.Errorf("the agent received no session/close; it received:\n%s", b)
	}
	wantProcesses(t, s, starts, 1)
	events := promptEvents(ctx, t, client, sessions[1].GetId(), "chunk still here")
	if got := chunkTexts(events); got != "still here" {
		t.Errorf("the other session's turn carried %q", got)
	}
	// The last session's close stops the process.
	if _, err := client.CloseSession(ctx, &acpgatev1.CloseSessionRequest{SessionId: sessions[1].GetId()}); err != nil {
		t.Fatal(err)
	}
	if !gone(pid) {
		t.Errorf("the shared process %d outlived its last session", pid)
	}
}

func TestShutdownStopsASharedProcessAndItsSessions(t *testing.T) {
	s, client, _, starts := reusing(t, true, 4)
	newSessions(t, client, "", 3)
	pid := wantProcesses(t, s, starts, 1)[0]
	s.terminate(t, 5*time.Second)
	if !gone(pid) {
		t.Errorf("the shared agent process %d outlived the gateway", pid)
	}
}

func TestTheIdleTimeoutEndsAnIdleSessionOfASharedProcessWhileAnotherRunsOnIt(t *testing.T) {
	s, client, _, starts := reusingWith(t, true, 2, "    idle_timeout: 1s\n")
	sessions := newSessions(t, client, "", 2)
	pid := wantProcesses(t, s, starts, 1)[0]
	ctx := bounded(t)
	stream, err := client.Prompt(ctx, &acpgatev1.PromptRequest{SessionId: sessions[0].GetId(), Text: "sleep 3000\nchunk done"})
	if err != nil {
		t.Fatal(err)
	}
	wantGone(ctx, t, client, sessions[1].GetId())
	if !alive(pid) {
		t.Fatal("the shared process stopped with the idle session, under a running turn")
	}
	events := drain(t, stream)
	if got := chunkTexts(events); got != "done" || events[len(events)-1].GetOutcome() == nil {
		t.Errorf("the running turn carried %q and ended %v", got, events[len(events)-1])
	}
}

func TestACrashOfTheSharedProcessSuspendsItsIdleSessionsWhenTheAgentCanReopenThem(t *testing.T) {
	s, client, _, starts := reusing(t, true, 2, "--load-session")
	ctx := bounded(t)
	first := sessionWithATurn(ctx, t, client)
	second := newSessions(t, client, "", 1)[0]
	pid := wantProcesses(t, s, starts, 1)[0]
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{first.GetId(), second.GetId()} {
		wantState(ctx, t, client, id, acpgatev1.SessionState_SESSION_STATE_SUSPENDED)
	}
	wantResumed(ctx, t, client, first.GetId(), "session/load")
}

func TestSessionsOfDifferentCallersNeverShareAProcess(t *testing.T) {
	starts := filepath.Join(t.TempDir(), "starts")
	p, signer, cfg := jwtConfig(t, func(p *pki, jwks string) string {
		return fmt.Sprintf(`
tls: {cert_file: %s, key_file: %s}
auth: {mode: jwt, jwks_file: %s, issuer: https://issuer.test, audience: acpgate}
agents:
  - name: test
    command: "${ACPGATE_E2E_AGENT}"
    args: [--unique-sessions, --count-starts, %q]
    workspace: %q
    reuse_process: true
`, p.certFile, p.keyFle, jwks, starts, t.TempDir())
	})
	as := func(name string) context.Context {
		token := signer.Sign(goodClaims(func(c jwt.MapClaims) { c["sub"] = name }))
		return metadata.AppendToOutgoingContext(bounded(t), "authorization", "Bearer "+token)
	}
	s := serve(t, "--config", cfg)
	client := acpgatev1.NewAgentGatewayClient(p.tlsClient(t, s, nil))
	for i, who := range []string{"alice", "bob", "alice", "bob"} {
		if _, err := client.CreateSession(as(who), &acpgatev1.CreateSessionRequest{Agent: "test"}); err != nil {
			t.Fatalf("%s's CreateSession: %v", who, err)
		}
		if want := min(i+1, 2); startsIn(t, starts) != want {
			t.Fatalf("after %d sessions %d processes started, want %d: one per caller", i+1, startsIn(t, starts), want)
		}
	}
	wantProcesses(t, s, starts, 2)
}
