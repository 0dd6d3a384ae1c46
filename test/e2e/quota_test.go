package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/testpki"
	"github.com/acpgate/acpgate/outcome"
)

// as is a call context carrying a bearer token for subject sub.
func as(t *testing.T, signer *testpki.Signer, sub string) context.Context {
	token := signer.Sign(goodClaims(func(c jwt.MapClaims) { c["sub"] = sub }))
	return metadata.AppendToOutgoingContext(callCtx(t), "authorization", "Bearer "+token)
}

// promptStatus runs a one-shot prompt to its end and returns the status
// the stream ended with (nil after a terminal).
func promptStatus(ctx context.Context, client acpgatev1.AgentGatewayClient, text string) error {
	stream, err := client.Prompt(ctx, &acpgatev1.PromptRequest{Agent: "test", Text: text})
	if err != nil {
		return err
	}
	for {
		e, err := stream.Recv()
		if err != nil {
			return err
		}
		if e.GetOutcome() != nil || e.GetError() != nil {
			return nil
		}
	}
}

// startTurnOnSession opens a session and starts a turn of text on it,
// returning the session, the turn's stream and the turn's id.
func startTurnOnSession(t *testing.T, ctx context.Context, client acpgatev1.AgentGatewayClient, text string) (*acpgatev1.Session, acpgatev1.AgentGateway_PromptClient, string) {
	t.Helper()
	sess, err := client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "test"})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := client.Prompt(ctx, &acpgatev1.PromptRequest{SessionId: sess.GetId(), Text: text})
	if err != nil {
		t.Fatal(err)
	}
	e, err := stream.Recv()
	if err != nil || e.GetStarted() == nil {
		t.Fatalf("first event %v, %v", e, err)
	}
	return sess, stream, e.GetStarted().GetTurnId()
}

// wantRetryInfo checks that err is RESOURCE_EXHAUSTED with a RetryInfo
// and returns its delay.
func wantRetryInfo(t *testing.T, what string, err error) time.Duration {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("%s: got %v, want RESOURCE_EXHAUSTED", what, err)
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	t.Fatalf("%s: %v carries no RetryInfo", what, err)
	return 0
}

func TestATurnQuotaRefusesWithRetryInfoPerPrincipalAndFreesWhenTheTurnEnds(t *testing.T) {
	p, signer, s := jwtGatewayWith(t, "quotas: {default: {concurrent_turns: 1}, principals: {carol: {turns_per_minute: 1}}}\n")
	client := acpgatev1.NewAgentGatewayClient(p.tlsClient(t, s, nil))
	alice := as(t, signer, "alice")

	sess, hanging, _ := startTurnOnSession(t, alice, client, "hang")
	if d := wantRetryInfo(t, "alice's second turn", promptStatus(alice, client, "hello")); d != time.Second {
		t.Errorf("retry_delay %v, want 1s for a concurrency quota", d)
	}
	if err := promptStatus(as(t, signer, "bob"), client, "hello"); err != nil {
		t.Errorf("bob is refused while alice is at her quota: %v", err)
	}

	if _, err := client.Cancel(alice, &acpgatev1.CancelRequest{SessionId: sess.GetId()}); err != nil {
		t.Fatal(err)
	}
	terminal(t, hanging, 10*time.Second)
	// The turn's slot is given back as its run ends, just after the
	// terminal is sent.
	deadline := time.Now().Add(10 * time.Second)
	for err := promptStatus(alice, client, "hello"); err != nil; err = promptStatus(alice, client, "hello") {
		if status.Code(err) != codes.ResourceExhausted || time.Now().After(deadline) {
			t.Fatalf("alice after her turn ended: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	carol := as(t, signer, "carol")
	if err := promptStatus(carol, client, "hello"); err != nil {
		t.Fatal(err)
	}
	if d := wantRetryInfo(t, "carol's second turn in a minute", promptStatus(carol, client, "hello")); d < 50*time.Second || d > time.Minute {
		t.Errorf("retry_delay %v, want about a minute (one turn a minute)", d)
	}
}

func TestASessionQuotaRefusesTheAnonymousCallerUnderDefault(t *testing.T) {
	s := serve(t, "--config", writeConfig(t, e2eConfig+"quotas: {default: {open_sessions: 1}}\n"))
	client, _ := s.client(t)
	ctx := callCtx(t)
	sess, err := client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "test"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "test"})
	wantRetryInfo(t, "a second session", err)
	if _, err := client.CloseSession(ctx, &acpgatev1.CloseSessionRequest{SessionId: sess.GetId()}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "test"}); err != nil {
		t.Errorf("after the first session closed: %v", err)
	}
}

// auditLines are the gateway's audit records.
func auditLines(s *served) []string {
	var out []string
	for _, l := range strings.Split(s.log(), "\n") {
		if strings.Contains(l, "msg=audit") {
			out = append(out, l)
		}
	}
	return out
}

// waitAudit waits for an audit record holding every one of parts.
func waitAudit(t *testing.T, s *served, parts ...string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, l := range auditLines(s) {
			all := true
			for _, p := range parts {
				all = all && strings.Contains(l, p)
			}
			if all {
				return l
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no audit record with %q:\n%s", parts, strings.Join(auditLines(s), "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

const secretPrompt = "the-secret-word-is-zebra"

func TestEveryRPCIsAuditedWithItsPrincipalAndNeverThePromptText(t *testing.T) {
	p, signer, s := jwtGatewayWith(t, "")
	client := acpgatev1.NewAgentGatewayClient(p.tlsClient(t, s, nil))
	alice := as(t, signer, "alice")
	sess, stream, turn := startTurnOnSession(t, alice, client, secretPrompt)
	class := "class=outcome"
	if e := terminal(t, stream, 10*time.Second).GetError(); e != nil {
		class = "class=" + outcome.Class(e)
	}
	if _, err := client.GetSession(alice, &acpgatev1.GetSessionRequest{SessionId: sess.GetId()}); err != nil {
		t.Fatal(err)
	}
	watch, err := client.WatchTurn(alice, &acpgatev1.WatchTurnRequest{TurnId: turn})
	if err != nil {
		t.Fatal(err)
	}
	terminal(t, watch, 10*time.Second)
	// Another principal is told the turn does not exist, and that is audited too.
	hidden, err := client.WatchTurn(as(t, signer, "bob"), &acpgatev1.WatchTurnRequest{TurnId: turn})
	if err == nil {
		_, err = hidden.Recv()
	}
	if status.Code(err) != codes.NotFound {
		t.Errorf("bob watching alice's turn: %v, want NOT_FOUND", err)
	}
	_ = listAgents(t, p.tlsClient(t, s, nil)) // no token

	session := "session=" + sess.GetId()
	waitAudit(t, s, "principal=alice", "AgentGateway/CreateSession", "agent=test", session, "code=OK", "duration=")
	waitAudit(t, s, "principal=alice", "AgentGateway/Prompt", "agent=test", session, "turn="+turn, "code=OK", class)
	waitAudit(t, s, "principal=alice", "AgentGateway/GetSession", session, "code=OK")
	waitAudit(t, s, "principal=alice", "AgentGateway/WatchTurn", "turn="+turn, session, class)
	waitAudit(t, s, "principal=bob", "AgentGateway/WatchTurn", "turn="+turn, "code=NotFound")
	waitAudit(t, s, `principal=""`, "AgentGateway/ListAgents", "code=Unauthenticated")
	for _, l := range auditLines(s) {
		if strings.Contains(l, secretPrompt) {
			t.Errorf("an audit record holds the prompt text: %s", l)
		}
	}
}

func TestWithIncludeTextThePromptTextIsAudited(t *testing.T) {
	s := serve(t, "--config", writeConfig(t, e2eConfig+"audit: {include_text: true}\n"))
	client, _ := s.client(t)
	if err := promptStatus(callCtx(t), client, secretPrompt); err != nil {
		t.Fatal(err)
	}
	waitAudit(t, s, "AgentGateway/Prompt", "text="+secretPrompt, "class=")
}

func TestWithAuditDisabledNothingIsAudited(t *testing.T) {
	s := serve(t, "--config", writeConfig(t, e2eConfig+"audit: {enabled: false}\n"))
	client, _ := s.client(t)
	if _, err := client.ListAgents(callCtx(t), &acpgatev1.ListAgentsRequest{}); err != nil {
		t.Fatal(err)
	}
	waitLog(t, s, "ListAgents")
	if l := auditLines(s); len(l) != 0 {
		t.Errorf("audit records with audit disabled: %q", l)
	}
}
