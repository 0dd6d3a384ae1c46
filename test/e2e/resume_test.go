package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// The tests in this file check sessions that survive their agent: a
// session in a configured workspace is recorded in the sqlite store, is
// SUSPENDED once its agent is gone (a gateway restart, an agent killed or
// reaped while idle), and is re-opened by its next Prompt with the test
// agent's session/resume or session/load, the agent keeping its sessions
// in a directory of its own as real agents do.

// resumable is a gateway configuration whose agent "test" runs in a
// workspace and keeps its sessions in a directory, with agentFlags (say
// --load-session) and the agent settings extra; its state directory is
// fixed, so that a second gateway served with it is the first one
// restarted.
func resumable(t *testing.T, extra string, agentFlags ...string) (config, workspace string) {
	t.Helper()
	workspace = t.TempDir()
	args := append([]string{"--unique-sessions", "--sessions-dir", t.TempDir()}, agentFlags...)
	for i, a := range args {
		args[i] = strconv.Quote(a)
	}
	return writeConfig(t, fmt.Sprintf(`
state_dir: %q
shutdown_grace: 5s
agents:
  - name: test
    command: "${ACPGATE_E2E_AGENT}"
    args: [%s]
    workspace: %q
%s`, t.TempDir(), strings.Join(args, ", "), workspace, extra)), workspace
}

// testCtx bounds a whole test's calls, restarts included.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// stop sends sig to the gateway and waits for it to exit.
func (s *served) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	_ = s.cmd.Process.Signal(sig)
	select {
	case <-s.exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("the gateway did not exit on %v:\n%s", sig, s.log())
	}
}

// promptEvents runs a turn on a session and returns its events.
func promptEvents(ctx context.Context, t *testing.T, client acpgatev1.AgentGatewayClient, sessionID, text string) []*acpgatev1.PromptEvent {
	t.Helper()
	stream, err := client.Prompt(ctx, &acpgatev1.PromptRequest{SessionId: sessionID, Text: text})
	if err != nil {
		t.Fatalf("Prompt %q: %v", text, err)
	}
	events := drain(t, stream)
	checkSeqs(t, events, 1)
	return events
}

// sessionWithATurn creates a session and runs the turn "chunk one" on it.
func sessionWithATurn(ctx context.Context, t *testing.T, client acpgatev1.AgentGatewayClient) *acpgatev1.Session {
	t.Helper()
	sess, err := client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "test"})
	if err != nil {
		t.Fatal(err)
	}
	events := promptEvents(ctx, t, client, sess.GetId(), "chunk one")
	if o := events[len(events)-1].GetOutcome(); o.GetText() != "one" {
		t.Fatalf("the first turn ended %v", events[len(events)-1])
	}
	return sess
}

// wantState waits (at most 10 s) until GetSession shows the session in
// state want.
func wantState(ctx context.Context, t *testing.T, client acpgatev1.AgentGatewayClient, id string, want acpgatev1.SessionState) *acpgatev1.Session {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := client.GetSession(ctx, &acpgatev1.GetSessionRequest{SessionId: id})
		if err == nil && got.GetState() == want {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("GetSession(%s) = %v, %v; want state %v", id, got, err, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// wantResumed checks the first turn on a re-opened session: it asks the
// agent what it remembers, and the agent, re-opened with method, remembers
// the turn before; TurnStarted says resumed; nothing the agent replayed
// reached the stream. The turn after it is not marked resumed.
func wantResumed(ctx context.Context, t *testing.T, client acpgatev1.AgentGatewayClient, id, method string) {
	t.Helper()
	events := promptEvents(ctx, t, client, id, "history")
	if s := events[0].GetStarted(); !s.GetResumed() || s.GetSessionId() != id {
		t.Errorf("the first turn after re-opening started %v, want resumed in session %s", s, id)
	}
	want := fmt.Sprintf(`history via %s: "chunk one"`, method)
	if got := chunkTexts(events); got != want {
		t.Errorf("the re-opened agent answered %q, want %q", got, want)
	}
	for _, e := range events {
		if e.GetUserMessageChunk() != nil || strings.Contains(e.GetAgentMessageChunk().GetText(), "replayed") {
			t.Errorf("the replayed history leaked into the stream: %v", e)
		}
	}
	if o := events[len(events)-1].GetOutcome(); o.GetText() != want {
		t.Errorf("the turn ended %v", events[len(events)-1])
	}
	next := promptEvents(ctx, t, client, id, "chunk two")
	if next[0].GetStarted().GetResumed() {
		t.Errorf("the second turn after re-opening is marked resumed: %v", next[0])
	}
	wantState(ctx, t, client, id, acpgatev1.SessionState_SESSION_STATE_IDLE)
}

// servedWithASession serves cfg and creates a session with a turn.
func servedWithASession(ctx context.Context, t *testing.T, cfg string) (*served, acpgatev1.AgentGatewayClient, *acpgatev1.Session) {
	t.Helper()
	s := serve(t, "--config", cfg)
	client := acpgatev1.NewAgentGatewayClient(dialTest(t, s.addr))
	return s, client, sessionWithATurn(ctx, t, client)
}

// acrossARestart serves cfg, creates a session with a turn, stops the
// gateway with sig and serves cfg again: it returns a client of the
// restarted gateway and the session as the first one described it.
func acrossARestart(ctx context.Context, t *testing.T, cfg string, sig syscall.Signal) (acpgatev1.AgentGatewayClient, *acpgatev1.Session) {
	t.Helper()
	s, _, sess := servedWithASession(ctx, t, cfg)
	s.stop(t, sig)
	again := serve(t, "--config", cfg)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the gateway before the restart:\n%s\nafter it:\n%s", s.log(), again.log())
		}
	})
	return acpgatev1.NewAgentGatewayClient(dialTest(t, again.addr)), sess
}

// restartedAndResumed runs the restart test for a gateway stopped with
// sig and an agent started with flags, which re-opens sessions with
// method.
func restartedAndResumed(t *testing.T, sig syscall.Signal, method string, flags ...string) {
	cfg, workspace := resumable(t, "", flags...)
	ctx := testCtx(t)
	client, sess := acrossARestart(ctx, t, cfg, sig)
	got := wantState(ctx, t, client, sess.GetId(), acpgatev1.SessionState_SESSION_STATE_SUSPENDED)
	if got.GetAcpSessionId() != sess.GetAcpSessionId() || got.GetAgent() != "test" || got.GetCwd() != workspace ||
		!got.GetCreatedAt().AsTime().Equal(sess.GetCreatedAt().AsTime()) {
		t.Errorf("after the restart the session is %v; before it was %v", got, sess)
	}
	list, err := client.ListSessions(ctx, &acpgatev1.ListSessionsRequest{})
	if err != nil || len(list.GetSessions()) != 1 || list.GetSessions()[0].GetState() != acpgatev1.SessionState_SESSION_STATE_SUSPENDED {
		t.Errorf("after the restart ListSessions = %v, %v", list, err)
	}
	wantResumed(ctx, t, client, sess.GetId(), method)
}

func TestASessionSurvivesAGatewayRestartAndIsReopenedWithSessionLoadWithoutStreamingTheReplayedHistory(t *testing.T) {
	restartedAndResumed(t, syscall.SIGTERM, "session/load", "--load-session")
}

func TestASessionSurvivesAKilledGatewayAndIsReopenedWithSessionResumeWhenTheAgentAdvertisesIt(t *testing.T) {
	restartedAndResumed(t, syscall.SIGKILL, "session/resume", "--load-session", "--resume-session")
}

func TestASessionWhoseAgentCanNeitherResumeNorLoadEndsWithTheCapabilityNamedAfterARestart(t *testing.T) {
	cfg, _ := resumable(t, "")
	ctx := testCtx(t)
	client, sess := acrossARestart(ctx, t, cfg, syscall.SIGTERM)
	wantState(ctx, t, client, sess.GetId(), acpgatev1.SessionState_SESSION_STATE_SUSPENDED)
	events := promptEvents(ctx, t, client, sess.GetId(), "chunk two")
	if len(events) != 2 || events[0].GetStarted().GetSessionId() != sess.GetId() {
		t.Fatalf("the turn on a session that cannot be re-opened carried %v", events)
	}
	e := events[1].GetError()
	if e.GetCapabilityNotSupported().GetPrimitive() != "session/load" || e.GetRetryable() ||
		!strings.Contains(e.GetMessage(), "sessionCapabilities.resume") || !strings.Contains(e.GetMessage(), "loadSession") {
		t.Errorf("the terminal is %v, want capability_not_supported naming session/resume and session/load", e)
	}
	if _, err := client.GetSession(ctx, &acpgatev1.GetSessionRequest{SessionId: sess.GetId()}); status.Code(err) != codes.NotFound {
		t.Errorf("after the capability terminal GetSession says %v, want NOT_FOUND: the session has ended", err)
	}
}

func TestASessionWhoseAgentWasKilledWhileIdleIsReopenedOnItsNextPromptInsteadOfNotFound(t *testing.T) {
	cfg, _ := resumable(t, "", "--load-session")
	ctx := testCtx(t)
	_, client, sess := servedWithASession(ctx, t, cfg)
	// --unique-sessions mints sess-<pid>-<n> (see hostPid).
	pid := hostPid(t, strings.Split(sess.GetAcpSessionId(), "-")[1])
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wantState(ctx, t, client, sess.GetId(), acpgatev1.SessionState_SESSION_STATE_SUSPENDED)
	wantResumed(ctx, t, client, sess.GetId(), "session/load")
}

func TestASessionReapedByTheIdleTimeoutIsReopenedOnItsNextPrompt(t *testing.T) {
	cfg, _ := resumable(t, "    idle_timeout: 1s\n", "--load-session")
	ctx := testCtx(t)
	s, client, sess := servedWithASession(ctx, t, cfg)
	wantState(ctx, t, client, sess.GetId(), acpgatev1.SessionState_SESSION_STATE_SUSPENDED)
	_, agent := binaries(t)
	if pids := childrenRunning(s.cmd.Process.Pid, agent); len(pids) != 0 {
		t.Errorf("the suspended session's agent still runs: %v", pids)
	}
	wantResumed(ctx, t, client, sess.GetId(), "session/load")
}

func TestAnotherPrincipalCannotSeeOrReopenAStoredSession(t *testing.T) {
	p, signer, cfg := jwtConfig(t, func(p *pki, jwks string) string {
		return fmt.Sprintf(`
state_dir: %q
shutdown_grace: 5s
tls: {cert_file: %s, key_file: %s}
auth: {mode: jwt, jwks_file: %s, issuer: https://issuer.test, audience: acpgate}
agents:
  - name: test
    command: "${ACPGATE_E2E_AGENT}"
    args: [--unique-sessions, --load-session, --sessions-dir, %q]
    workspace: %q
`, t.TempDir(), p.certFile, p.keyFle, jwks, t.TempDir(), t.TempDir())
	})
	as := func(name string) context.Context {
		token := signer.Sign(goodClaims(func(c jwt.MapClaims) { c["sub"] = name }))
		return metadata.AppendToOutgoingContext(testCtx(t), "authorization", "Bearer "+token)
	}
	alice, bob := as("alice"), as("bob")
	s := serve(t, "--config", cfg)
	client := acpgatev1.NewAgentGatewayClient(p.tlsClient(t, s, nil))
	sess := sessionWithATurn(alice, t, client)
	s.stop(t, syscall.SIGTERM)

	again := serve(t, "--config", cfg)
	client = acpgatev1.NewAgentGatewayClient(p.tlsClient(t, again, nil))
	id := sess.GetId()
	_, err := client.GetSession(bob, &acpgatev1.GetSessionRequest{SessionId: id})
	wantCode(t, "bob's GetSession", err, codes.NotFound)
	list, err := client.ListSessions(bob, &acpgatev1.ListSessionsRequest{})
	if err != nil || len(list.GetSessions()) != 0 {
		t.Errorf("bob's ListSessions = %v, %v; want none", list, err)
	}
	stream, err := client.Prompt(bob, &acpgatev1.PromptRequest{SessionId: id, Text: "history"})
	if err == nil {
		_, err = stream.Recv()
	}
	wantCode(t, "bob's Prompt", err, codes.NotFound)
	for _, load := range []string{id, sess.GetAcpSessionId()} {
		_, err = client.CreateSession(bob, &acpgatev1.CreateSessionRequest{Agent: "test", LoadSessionId: load})
		wantCode(t, "bob's CreateSession loading "+load, err, codes.NotFound)
	}
	_, err = client.CloseSession(bob, &acpgatev1.CloseSessionRequest{SessionId: id})
	wantCode(t, "bob's CloseSession", err, codes.NotFound)

	// Alice's session is untouched by all that, and is hers to re-open,
	// eagerly here.
	wantState(alice, t, client, id, acpgatev1.SessionState_SESSION_STATE_SUSPENDED)
	reopened, err := client.CreateSession(alice, &acpgatev1.CreateSessionRequest{Agent: "test", LoadSessionId: id})
	if err != nil || reopened.GetId() != id || reopened.GetState() != acpgatev1.SessionState_SESSION_STATE_IDLE {
		t.Fatalf("alice's CreateSession loading her session = %v, %v", reopened, err)
	}
	wantResumed(alice, t, client, id, "session/load")
}

func TestWithTheMemoryStoreNoSessionSurvivesARestart(t *testing.T) {
	cfg, _ := resumable(t, "", "--load-session")
	body, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg = writeConfig(t, "store: memory\n"+string(body))
	ctx := testCtx(t)
	client, sess := acrossARestart(ctx, t, cfg, syscall.SIGTERM)
	_, err = client.GetSession(ctx, &acpgatev1.GetSessionRequest{SessionId: sess.GetId()})
	wantCode(t, "GetSession after a restart with store: memory", err, codes.NotFound)
	list, err := client.ListSessions(ctx, &acpgatev1.ListSessionsRequest{})
	if err != nil || len(list.GetSessions()) != 0 {
		t.Errorf("ListSessions after a restart with store: memory = %v, %v; want none", list, err)
	}
}
