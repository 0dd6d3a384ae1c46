package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/testpg"
	"github.com/acpgate/acpgate/internal/testpki"
	"github.com/acpgate/acpgate/internal/testutil"
)

// The tests in this file run several replicas of the real binary on one
// real PostgreSQL (Debian's, started by package testpg): any replica serves
// any call, an idempotency key runs once across replicas, and a replica
// killed mid-turn is reported by the others.

// leaseTTL is the replicas' lease in these tests: short, so that a lost
// replica is reaped within seconds.
const leaseTTL = time.Second

// replica is one running replica of a test cluster.
type replica struct {
	*served
	id     string
	port   int
	cfg    string
	conn   *grpc.ClientConn
	client acpgatev1.AgentGatewayClient
	dial   func(*testing.T, *served) *grpc.ClientConn // nil: plaintext
}

// testCluster is n replicas on one fresh database, sharing a workspace and
// the test agent's sessions directory (storage shared by the replicas, so
// that a lost replica's sessions can be re-opened elsewhere) and the
// agent's prompt count.
type testCluster struct {
	replicas []*replica
	prompts  string
}

func startCluster(t *testing.T, n int, extra string) *testCluster {
	t.Helper()
	return startClusterWith(t, n, clusterOpts{extra: extra})
}

// clusterOpts vary a test cluster: extra is appended to each replica's
// configuration, inCluster to its cluster block, and dial, when set,
// connects the test's client to a replica.
// dsn, when set, is the database (one on a server of the test's own, say);
// a new one on the test binary's server otherwise. leaseTTL, when set,
// replaces the tests' leaseTTL.
type clusterOpts struct {
	extra, inCluster string
	dial             func(*testing.T, *served) *grpc.ClientConn
	dsn              string
	leaseTTL         time.Duration
}

func startClusterWith(t *testing.T, n int, o clusterOpts) *testCluster {
	t.Helper()
	dsn := o.dsn
	if dsn == "" {
		dsn = testpg.Start(t)
	}
	ttl := leaseTTL
	if o.leaseTTL != 0 {
		ttl = o.leaseTTL
	}
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("a secret the replicas share, 1234567890"), 0o600); err != nil {
		t.Fatal(err)
	}
	workspace, sessions := t.TempDir(), t.TempDir()
	c := &testCluster{prompts: filepath.Join(t.TempDir(), "prompts")}
	for i := range n {
		id := string(rune('a' + i))
		r := &replica{id: id, dial: o.dial}
		r.listen(t, func(port int) string {
			return writeConfig(t, fmt.Sprintf(`
shutdown_grace: 5s
store: postgres
postgres:
  dsn: %q
cluster:
  replica_id: %s
  advertise: 127.0.0.1:%d
  secret_file: %q
  lease_ttl: %s
%s
agents:
  - name: test
    command: "${ACPGATE_E2E_AGENT}"
    args: [--unique-sessions, --load-session, --resume-session, --sessions-dir, %q, --count-prompts, %q]
    workspace: %q
    permission_policy: ask
    cancel_grace: 2s
  - name: scratch
    command: "${ACPGATE_E2E_AGENT}"
    args: [--unique-sessions, --load-session]
%s`, dsn, id, port, secret, ttl, o.inCluster, sessions, c.prompts, workspace, o.extra))
		})
		c.replicas = append(c.replicas, r)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, r := range c.replicas {
				t.Logf("replica %s:\n%s", r.id, r.log())
			}
		}
	})
	return c
}

// listen serves the replica for the first time, on a port of its own:
// config writes its configuration for a port. A port another process took
// between FreePort and the replica's listen is drawn again, a few times,
// rather than failing a test that is not about ports.
func (r *replica) listen(t *testing.T, config func(port int) string) {
	t.Helper()
	const attempts = 3
	for attempt := 1; ; attempt++ {
		r.port = freePort(t)
		r.cfg = config(r.port)
		err := r.serve(t)
		if err == nil {
			return
		}
		if attempt == attempts || !strings.Contains(err.Error(), "address already in use") {
			t.Fatalf("replica %s: %v", r.id, err)
		}
	}
}

// start serves the replica again, on the port it advertises.
func (r *replica) start(t *testing.T) {
	t.Helper()
	if err := r.serve(t); err != nil {
		t.Fatalf("replica %s: %v", r.id, err)
	}
}

// serve starts the replica's gateway and connects the test's client.
func (r *replica) serve(t *testing.T) error {
	t.Helper()
	var err error
	if r.served, err = startServe(t, "--config", r.cfg, "--listen", fmt.Sprintf("127.0.0.1:%d", r.port)); err != nil {
		return err
	}
	if r.dial != nil {
		r.conn = r.dial(t, r.served)
	} else {
		r.conn = dialTest(t, r.addr)
	}
	r.client = acpgatev1.NewAgentGatewayClient(r.conn)
	return nil
}

// freePort is a loopback port nothing listens on (for a replica's
// advertised address, which its configuration names before it listens).
func freePort(t *testing.T) int {
	t.Helper()
	port, err := testutil.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// startedTurn reads a Prompt stream up to its TurnStarted.
func startedTurn(t *testing.T, stream acpgatev1.AgentGateway_PromptClient) *acpgatev1.TurnStarted {
	t.Helper()
	for {
		e, err := stream.Recv()
		if err != nil {
			t.Fatalf("before TurnStarted: %v", err)
		}
		if s := e.GetStarted(); s != nil {
			return s
		}
	}
}

func TestASessionCreatedOnOneReplicaIsPromptedThroughAnotherAndCancelledThroughAThird(t *testing.T) {
	c := startCluster(t, 3, "")
	a, b, cc := c.replicas[0], c.replicas[1], c.replicas[2]
	ctx := testCtx(t)
	sess, err := a.client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if sess.GetReplica() != "a" {
		t.Errorf("a session created through replica a runs on %q", sess.GetReplica())
	}
	events := promptEvents(ctx, t, b.client, sess.GetId(), "chunk one")
	if o := events[len(events)-1].GetOutcome(); o.GetText() != "one" {
		t.Fatalf("the turn prompted through b ended %v", events[len(events)-1])
	}
	for _, r := range c.replicas {
		got, err := r.client.GetSession(ctx, &acpgatev1.GetSessionRequest{SessionId: sess.GetId()})
		if err != nil || got.GetTurns() != 1 || got.GetReplica() != "a" || got.GetAcpSessionId() != sess.GetAcpSessionId() {
			t.Errorf("GetSession through %s = %v, %v; want the session on a with one turn", r.id, got, err)
		}
		list, err := r.client.ListSessions(ctx, &acpgatev1.ListSessionsRequest{})
		if err != nil || len(list.GetSessions()) != 1 || list.GetSessions()[0].GetId() != sess.GetId() || list.GetSessions()[0].GetReplica() != "a" {
			t.Errorf("ListSessions through %s = %v, %v; want the one session, on a", r.id, list, err)
		}
	}

	stream, err := b.client.Prompt(ctx, &acpgatev1.PromptRequest{SessionId: sess.GetId(), Text: "chunk waiting\nsleep 60000\nchunk never"})
	if err != nil {
		t.Fatal(err)
	}
	startedTurn(t, stream)
	resp, err := cc.client.Cancel(ctx, &acpgatev1.CancelRequest{SessionId: sess.GetId()})
	if err != nil || !resp.GetCancelled() {
		t.Fatalf("Cancel through c = %v, %v; want cancelled", resp, err)
	}
	rest := drain(t, stream)
	if e := rest[len(rest)-1].GetError(); !e.GetHarness().GetCancelled() {
		t.Errorf("the turn cancelled through c ended %v, want cancelled", rest[len(rest)-1])
	}
	if _, err := cc.client.CloseSession(ctx, &acpgatev1.CloseSessionRequest{SessionId: sess.GetId()}); err != nil {
		t.Fatalf("CloseSession through c: %v", err)
	}
	for _, r := range c.replicas {
		if _, err := r.client.GetSession(ctx, &acpgatev1.GetSessionRequest{SessionId: sess.GetId()}); status.Code(err) != codes.NotFound {
			t.Errorf("after CloseSession, GetSession through %s: %v, want NOT_FOUND", r.id, err)
		}
	}
}

func TestAPermissionAskedOnOneReplicaIsResolvedThroughAnother(t *testing.T) {
	c := startCluster(t, 3, "metrics:\n  listen: 127.0.0.1:0\n")
	a, cc := c.replicas[0], c.replicas[2]
	ctx := testCtx(t)
	sess, err := a.client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "test"})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := a.client.Prompt(ctx, &acpgatev1.PromptRequest{SessionId: sess.GetId(), Text: "permission tool-1\nchunk after"})
	if err != nil {
		t.Fatal(err)
	}
	var asked *acpgatev1.PermissionRequest
	for asked == nil {
		e, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		asked = e.GetPermissionRequested()
	}
	if _, err := cc.client.ResolvePermission(ctx, &acpgatev1.ResolvePermissionRequest{SessionId: sess.GetId(), RequestId: asked.GetRequestId(), OptionId: "allow"}); err != nil {
		t.Fatalf("ResolvePermission through c: %v", err)
	}
	rest := drain(t, stream)
	if o := rest[len(rest)-1].GetOutcome(); o.GetText() != "permission:allowafter" {
		t.Errorf("the turn whose permission c resolved ended %v", rest[len(rest)-1])
	}
	relayed := values(scrape(t, cc.metricsURL(t)), "acpgate_cluster_relayed_calls_total")
	if relayed["method=/acpgate.v1.AgentGateway/ResolvePermission"] != 1 {
		t.Errorf("c's relayed calls: %v; want the one ResolvePermission", relayed)
	}
}

func TestATurnRunningOnOneReplicaIsWatchedLiveThroughTheOthersWithIdenticalBytes(t *testing.T) {
	c := startCluster(t, 3, "")
	ctx := testCtx(t)
	a := c.replicas[0]
	var script strings.Builder
	for i := range 20 {
		fmt.Fprintf(&script, "chunk part%d\nsleep 50\n", i)
	}
	stream, err := a.client.Prompt(ctx, &acpgatev1.PromptRequest{Agent: "test", Text: script.String()})
	if err != nil {
		t.Fatal(err)
	}
	turnID := startedTurn(t, stream).GetTurnId()
	watched := make([][][]byte, len(c.replicas))
	errs := make([]error, len(c.replicas))
	var wg sync.WaitGroup
	for i, r := range c.replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			watched[i], errs[i] = rawStream(t, r.conn, "/acpgate.v1.AgentGateway/WatchTurn", &acpgatev1.WatchTurnRequest{TurnId: turnID})
		}()
	}
	drain(t, stream)
	wg.Wait()
	for i, r := range c.replicas {
		if errs[i] != nil {
			t.Fatalf("watching through %s: %v", r.id, errs[i])
		}
		events := decodeEvents(t, watched[i])
		checkSeqs(t, events, 1)
		if o := events[len(events)-1].GetOutcome(); o == nil {
			t.Fatalf("the watch through %s ended %v", r.id, events[len(events)-1])
		}
		if len(watched[i]) != len(watched[0]) || !slices.EqualFunc(watched[i], watched[0], bytes.Equal) {
			t.Errorf("the watch through %s differs from the one through a (%d events, %d)", r.id, len(watched[i]), len(watched[0]))
		}
	}
	for _, r := range c.replicas {
		got, err := r.client.GetTurn(ctx, &acpgatev1.GetTurnRequest{TurnId: turnID})
		if err != nil || got.GetState() != acpgatev1.TurnState_TURN_STATE_ENDED || got.GetReplica() != "a" {
			t.Errorf("GetTurn through %s = %v, %v", r.id, got, err)
		}
	}
}

func TestOneRequestIDSubmittedAHundredTimesAcrossThreeReplicasRunsOneTurn(t *testing.T) {
	c := startCluster(t, 3, "")
	ctx := testCtx(t)
	const n = 100
	results := make([][]*acpgatev1.PromptEvent, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := c.replicas[i%len(c.replicas)]
			stream, err := r.client.Prompt(ctx, &acpgatev1.PromptRequest{Agent: "test", Text: "chunk once\nsleep 200\nchunk only", RequestId: "the-one-key"})
			if err != nil {
				errs[i] = err
				return
			}
			for {
				e, err := stream.Recv()
				if err != nil {
					if status.Code(err) != codes.OK && !strings.Contains(err.Error(), "EOF") {
						errs[i] = err
					}
					return
				}
				results[i] = append(results[i], e)
			}
		}()
	}
	wg.Wait()
	turns := map[string]bool{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("submission %d: %v", i, errs[i])
		}
		ev := results[i]
		if len(ev) == 0 || ev[len(ev)-1].GetOutcome().GetText() != "onceonly" {
			t.Fatalf("submission %d got %v", i, ev)
		}
		turns[ev[0].GetStarted().GetTurnId()] = true
	}
	if len(turns) != 1 {
		t.Errorf("the submissions saw %d turns, want 1: %v", len(turns), turns)
	}
	if got := promptsSeen(t, c.prompts); got != 1 {
		t.Errorf("the agent was prompted %d times, want once", got)
	}
}

func TestAKilledReplicasTurnEndsWithGatewayStoppedForWatchersOnTheOthersAndStaysEnded(t *testing.T) {
	c := startCluster(t, 3, "metrics:\n  listen: 127.0.0.1:0\n")
	a, b, cc := c.replicas[0], c.replicas[1], c.replicas[2]
	ctx := testCtx(t)
	stream, err := a.client.Prompt(ctx, &acpgatev1.PromptRequest{Agent: "test", Text: "chunk before\nsleep 60000\nchunk never"})
	if err != nil {
		t.Fatal(err)
	}
	turnID := startedTurn(t, stream).GetTurnId()
	watch, err := b.client.WatchTurn(ctx, &acpgatev1.WatchTurnRequest{TurnId: turnID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := watch.Recv(); err != nil {
		t.Fatalf("the watch through b: %v", err)
	}
	killed := time.Now()
	a.stop(t, syscall.SIGKILL)
	events := drain(t, watch)
	took := time.Since(killed)
	last := events[len(events)-1].GetError()
	if last.GetTransport().GetReason() != acpgatev1.TransportReason_TRANSPORT_REASON_GATEWAY_STOPPED || !last.GetRetryable() {
		t.Fatalf("the watcher on b got %v, want the retryable gateway-stopped terminal", events[len(events)-1])
	}
	// The lease runs out leaseTTL after its last renewal (at most
	// leaseTTL/3 before the kill), and a replica reaps at its next
	// renewal, leaseTTL/3 later: 2 s is the stated bound plus a margin for
	// a loaded machine.
	if took > leaseTTL+leaseTTL/3+2*time.Second {
		t.Errorf("the watcher learned of the loss %v after the kill", took)
	}
	t.Logf("the watcher on b got the gateway-stopped terminal %v after replica a was killed", took.Round(time.Millisecond))
	got, err := cc.client.GetTurn(ctx, &acpgatev1.GetTurnRequest{TurnId: turnID})
	if err != nil || got.GetState() != acpgatev1.TurnState_TURN_STATE_ENDED || got.GetTerminal().GetError().GetTransport() == nil {
		t.Fatalf("GetTurn through c = %v, %v", got, err)
	}
	// Exactly one of b and c reaped a, and both count two live replicas.
	deadline := time.Now().Add(5 * time.Second)
	for {
		reaped, live := 0.0, map[string]float64{}
		for _, r := range []*replica{b, cc} {
			fams := scrape(t, r.metricsURL(t))
			reaped += values(fams, "acpgate_cluster_replicas_reaped_total")[""]
			live[r.id] = values(fams, "acpgate_cluster_replicas")[""]
		}
		if reaped == 1 && live["b"] == 2 && live["c"] == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the metrics say %v replicas reaped and %v live; want 1 reaped, 2 live on each", reaped, live)
		}
		time.Sleep(100 * time.Millisecond)
	}
	a.start(t)
	again, err := a.client.GetTurn(ctx, &acpgatev1.GetTurnRequest{TurnId: turnID})
	if err != nil || again.GetState() != acpgatev1.TurnState_TURN_STATE_ENDED || again.GetLastSeq() != got.GetLastSeq() {
		t.Errorf("after a's restart, GetTurn through a = %v, %v; want the turn ended as c saw it (last seq %d)", again, err, got.GetLastSeq())
	}
}

func TestACreateSessionSentToAReplicaAtItsLimitOpensOnAnother(t *testing.T) {
	c := startCluster(t, 2, "limits:\n  max_sessions: 1\n")
	a := c.replicas[0]
	ctx := testCtx(t)
	first, err := a.client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "test"})
	if err != nil {
		t.Fatal(err)
	}
	second, err := a.client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "test"})
	if err != nil {
		t.Fatalf("a second CreateSession to a, at its limit: %v", err)
	}
	if first.GetReplica() != "a" || second.GetReplica() != "b" {
		t.Errorf("the sessions run on %q and %q, want a and b", first.GetReplica(), second.GetReplica())
	}
	events := promptEvents(ctx, t, a.client, second.GetId(), "chunk placed")
	if o := events[len(events)-1].GetOutcome(); o.GetText() != "placed" {
		t.Errorf("the placed session's turn ended %v", events[len(events)-1])
	}
	if _, err := a.client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "test"}); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a third CreateSession with every replica full: %v, want RESOURCE_EXHAUSTED", err)
	}
}

func TestASessionOfAKilledReplicaIsSuspendedAndResumedThroughAnotherReplica(t *testing.T) {
	c := startCluster(t, 2, "")
	a, b := c.replicas[0], c.replicas[1]
	ctx := testCtx(t)
	sess := sessionWithATurn(ctx, t, a.client)
	a.stop(t, syscall.SIGKILL)
	killed := time.Now()
	got := wantState(ctx, t, b.client, sess.GetId(), acpgatev1.SessionState_SESSION_STATE_SUSPENDED)
	t.Logf("suspended through b %v after the kill", time.Since(killed).Round(time.Millisecond))
	if got.GetReplica() != "" || got.GetAcpSessionId() != sess.GetAcpSessionId() {
		t.Errorf("the lost replica's session through b: %v", got)
	}
	resumeAt := time.Now()
	wantResumed(ctx, t, b.client, sess.GetId(), "session/resume")
	t.Logf("resumed in %v", time.Since(resumeAt).Round(time.Millisecond))
	if s, err := b.client.GetSession(ctx, &acpgatev1.GetSessionRequest{SessionId: sess.GetId()}); err != nil || s.GetReplica() != "b" {
		t.Errorf("the resumed session: %v, %v; want it on b", s, err)
	}
}

func TestReplicasServingMTLSForwardCallsOverMTLSOnBehalfOfTheCallerTheyAuthenticated(t *testing.T) {
	p := newPKI(t)
	certFile, keyFile, err := p.issue(t, testpki.Leaf{CommonName: "replica", Server: true, AlsoClient: true}).WriteFiles(p.dir, "replica")
	if err != nil {
		t.Fatal(err)
	}
	alice := p.issue(t, testpki.Leaf{CommonName: "alice"})
	bob := p.issue(t, testpki.Leaf{CommonName: "bob"})
	c := startClusterWith(t, 2, clusterOpts{
		extra:     fmt.Sprintf("tls: {cert_file: %s, key_file: %s, client_ca_file: %s}\nauth: {mode: mtls}\n", certFile, keyFile, p.caFile),
		inCluster: fmt.Sprintf("  ca_file: %s", p.caFile),
		dial:      func(t *testing.T, s *served) *grpc.ClientConn { return p.tlsClient(t, s, alice) },
	})
	a, b := c.replicas[0], c.replicas[1]
	ctx := testCtx(t)
	sess, err := a.client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "test"})
	if err != nil {
		t.Fatal(err)
	}
	events := promptEvents(ctx, t, b.client, sess.GetId(), "chunk mine")
	if o := events[len(events)-1].GetOutcome(); o.GetText() != "mine" {
		t.Fatalf("alice's turn through b ended %v", events[len(events)-1])
	}
	asBob := acpgatev1.NewAgentGatewayClient(p.tlsClient(t, b.served, bob))
	if _, err := asBob.GetSession(ctx, &acpgatev1.GetSessionRequest{SessionId: sess.GetId()}); status.Code(err) != codes.NotFound {
		t.Errorf("bob asking b for alice's session on a: %v, want NOT_FOUND (a judges the caller b authenticated)", err)
	}
	if _, err := asBob.Cancel(ctx, &acpgatev1.CancelRequest{SessionId: sess.GetId()}); status.Code(err) != codes.NotFound {
		t.Errorf("bob cancelling alice's session through b: %v, want NOT_FOUND", err)
	}
}

func TestAReplicaPausedPastItsLeaseFindsItsTurnEndedByAnotherAndRejoinsWithoutWritingToIt(t *testing.T) {
	c := startCluster(t, 2, "")
	a, b := c.replicas[0], c.replicas[1]
	ctx := testCtx(t)
	stream, err := a.client.Prompt(ctx, &acpgatev1.PromptRequest{Agent: "test", Text: "chunk before\nsleep 3000\nchunk after"})
	if err != nil {
		t.Fatal(err)
	}
	turnID := startedTurn(t, stream).GetTurnId()
	// A paused process is a partition the test can make: a stops renewing
	// its lease, and comes back believing it still owns the turn.
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	watch, err := b.client.WatchTurn(ctx, &acpgatev1.WatchTurnRequest{TurnId: turnID})
	if err != nil {
		t.Fatal(err)
	}
	events := drain(t, watch)
	ended := events[len(events)-1]
	if ended.GetError().GetTransport().GetReason() != acpgatev1.TransportReason_TRANSPORT_REASON_GATEWAY_STOPPED {
		t.Fatalf("the paused replica's turn ended %v for the watcher on b", ended)
	}
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// a finds its lease lost, stops the turn's agent and joins again: it
	// keeps running, and serves.
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(a.log(), "this replica joined the cluster again") {
		select {
		case err := <-a.exited:
			t.Fatalf("the replica that lost its lease exited (%v):\n%s", err, a.log())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica that lost its lease has not joined again:\n%s", a.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(a.log(), "lost its lease") {
		t.Errorf("the replica did not say it lost its lease:\n%s", a.log())
	}
	again := drain(t, mustPrompt(ctx, t, a.client, &acpgatev1.PromptRequest{Agent: "test", Text: "chunk back"}))
	if o := again[len(again)-1].GetOutcome(); o.GetText() != "back" {
		t.Errorf("a turn on a after it joined again ended %v", again[len(again)-1])
	}
	// The agent on a may have finished its turn ("chunk after") after the
	// pause, and a may have tried to journal it: the store refused, and
	// the turn is as b ended it, through either replica.
	for _, r := range c.replicas {
		got, err := r.client.GetTurn(ctx, &acpgatev1.GetTurnRequest{TurnId: turnID})
		if err != nil || got.GetLastSeq() != ended.GetSeq() || got.GetTerminal().GetError().GetTransport() == nil {
			t.Errorf("after a came back, GetTurn through %s = %v, %v; want the turn as b ended it, at seq %d", r.id, got, err, ended.GetSeq())
		}
		replay := drain(t, mustWatch(ctx, t, r.client, turnID))
		if len(replay) != len(events) || !proto.Equal(replay[len(replay)-1], ended) {
			t.Errorf("through %s, the turn's journal has %d events after a came back, ending %v; %d before, ending %v", r.id, len(replay), replay[len(replay)-1], len(events), ended)
		}
	}
}

// mustWatch opens a WatchTurn of the whole turn.
func mustWatch(ctx context.Context, t *testing.T, client acpgatev1.AgentGatewayClient, turnID string) acpgatev1.AgentGateway_WatchTurnClient {
	t.Helper()
	w, err := client.WatchTurn(ctx, &acpgatev1.WatchTurnRequest{TurnId: turnID})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestAClientThatGoesAwayFromARelayedPromptCancelsTheTurnOnTheOwner(t *testing.T) {
	c := startCluster(t, 2, "")
	a, b := c.replicas[0], c.replicas[1]
	ctx := testCtx(t)
	sess, err := a.client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "test"})
	if err != nil {
		t.Fatal(err)
	}
	callCtx, goAway := context.WithCancel(ctx)
	stream, err := b.client.Prompt(callCtx, &acpgatev1.PromptRequest{SessionId: sess.GetId(), Text: "chunk waiting\nsleep 60000\nchunk never"})
	if err != nil {
		t.Fatal(err)
	}
	turnID := startedTurn(t, stream).GetTurnId()
	goAway()
	gone := time.Now()
	events := drain(t, mustWatch(ctx, t, a.client, turnID))
	t.Logf("the turn ended %v after its client went away", time.Since(gone).Round(time.Millisecond))
	if e := events[len(events)-1].GetError(); !e.GetHarness().GetCancelled() {
		t.Errorf("the relayed turn whose client went away ended %v, want cancelled", events[len(events)-1])
	}
}

func TestASessionOfAKilledReplicaInATemporaryDirectoryEndsSayingWhy(t *testing.T) {
	c := startCluster(t, 2, "")
	a, b := c.replicas[0], c.replicas[1]
	ctx := testCtx(t)
	sess, err := a.client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "scratch"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := b.client.GetSession(ctx, &acpgatev1.GetSessionRequest{SessionId: sess.GetId()}); err != nil || got.GetReplica() != "a" {
		t.Fatalf("a session in a temporary directory, through b: %v, %v; want it found on a", got, err)
	}
	a.stop(t, syscall.SIGKILL)
	deadline := time.Now().Add(10 * time.Second)
	for {
		stream, err := b.client.Prompt(ctx, &acpgatev1.PromptRequest{SessionId: sess.GetId(), Text: "chunk hi"})
		if err == nil {
			_, err = stream.Recv()
		}
		if status.Code(err) == codes.FailedPrecondition {
			if !strings.Contains(err.Error(), "cannot be re-opened elsewhere") {
				t.Errorf("the refusal does not say why: %v", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a prompt on the lost replica's session: %v, want FAILED_PRECONDITION once a is reaped", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := b.client.GetSession(ctx, &acpgatev1.GetSessionRequest{SessionId: sess.GetId()}); status.Code(err) != codes.NotFound {
		t.Errorf("the ended session afterwards: %v, want NOT_FOUND", err)
	}
}
