package e2e

import (
	"context"
	"fmt"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// tenants is a gateway over TLS with JWT callers, an agent everyone may
// use, one only the ml-team group may use, and root as an admin. as(name,
// groups...) is a context calling as that principal.
func tenants(t *testing.T) (acpgatev1.AgentGatewayClient, func(name string, groups ...string) context.Context) {
	t.Helper()
	p, signer, s := jwtGatewayFrom(t, func(p *pki, jwks string) string {
		return fmt.Sprintf(`
shutdown_grace: 5s
tls: {cert_file: %s, key_file: %s}
auth: {mode: jwt, jwks_file: %s, issuer: https://issuer.test, audience: acpgate, claims: [groups], admins: [root]}
agents:
  - name: test
    command: "${ACPGATE_E2E_AGENT}"
    args: [--unique-sessions]
    permission_policy: ask
  - name: ml
    command: "${ACPGATE_E2E_AGENT}"
    args: [--unique-sessions]
    allow: ["claim:groups=ml-team"]
`, p.certFile, p.keyFle, jwks)
	})
	client := acpgatev1.NewAgentGatewayClient(p.tlsClient(t, s, nil))
	return client, func(name string, groups ...string) context.Context {
		token := signer.Sign(goodClaims(func(c jwt.MapClaims) {
			c["sub"] = name
			c["groups"] = groups
		}))
		return metadata.AppendToOutgoingContext(callCtx(t), "authorization", "Bearer "+token)
	}
}

func wantCode(t *testing.T, what string, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Errorf("%s: %v, want %v", what, err, code)
	}
}

func TestAnotherPrincipalCannotSeeOrTouchASessionOrTurnItDidNotCreate(t *testing.T) {
	client, as := tenants(t)
	alice, bob, root := as("alice"), as("bob"), as("root")
	sess, err := client.CreateSession(alice, &acpgatev1.CreateSessionRequest{Agent: "test"})
	if err != nil {
		t.Fatal(err)
	}
	id := sess.GetId()
	// A turn of alice's that waits on a permission request.
	stream, err := client.Prompt(alice, &acpgatev1.PromptRequest{SessionId: id, Text: "permission tool-1\nchunk after"})
	if err != nil {
		t.Fatal(err)
	}
	var turnID, permission string
	for permission == "" {
		e, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if s := e.GetStarted(); s != nil {
			turnID = s.GetTurnId()
		}
		if p := e.GetPermissionRequested(); p != nil {
			permission = p.GetRequestId()
		}
	}

	_, err = client.GetSession(bob, &acpgatev1.GetSessionRequest{SessionId: id})
	wantCode(t, "GetSession", err, codes.NotFound)
	_, err = client.Cancel(bob, &acpgatev1.CancelRequest{SessionId: id})
	wantCode(t, "Cancel", err, codes.NotFound)
	_, err = client.ResolvePermission(bob, &acpgatev1.ResolvePermissionRequest{SessionId: id, RequestId: permission, OptionId: "allow"})
	wantCode(t, "ResolvePermission", err, codes.NotFound)
	_, err = client.CloseSession(bob, &acpgatev1.CloseSessionRequest{SessionId: id})
	wantCode(t, "CloseSession", err, codes.NotFound)
	_, err = client.SetSessionMode(bob, &acpgatev1.SetSessionModeRequest{SessionId: id, ModeId: "code"})
	wantCode(t, "SetSessionMode", err, codes.NotFound)
	_, err = client.SetSessionConfigOption(bob, &acpgatev1.SetSessionConfigOptionRequest{SessionId: id, OptionId: "model", Value: "large"})
	wantCode(t, "SetSessionConfigOption", err, codes.NotFound)
	other, err := client.Prompt(bob, &acpgatev1.PromptRequest{SessionId: id, Text: "chunk hi"})
	if err == nil {
		_, err = other.Recv()
	}
	wantCode(t, "Prompt on the session", err, codes.NotFound)
	_, err = client.GetTurn(bob, &acpgatev1.GetTurnRequest{TurnId: turnID})
	wantCode(t, "GetTurn", err, codes.NotFound)
	watch, err := client.WatchTurn(bob, &acpgatev1.WatchTurnRequest{TurnId: turnID})
	if err == nil {
		_, err = watch.Recv()
	}
	wantCode(t, "WatchTurn", err, codes.NotFound)
	// The answer is the one for an id that does not exist: nothing leaks.
	_, unknown := client.GetSession(bob, &acpgatev1.GetSessionRequest{SessionId: "no-such-session"})
	_, hidden := client.GetSession(bob, &acpgatev1.GetSessionRequest{SessionId: id})
	if want := status.Convert(unknown).Message(); status.Convert(hidden).Message() != fmt.Sprintf("no open session %q", id) || want != `no open session "no-such-session"` {
		t.Errorf("hidden %q vs unknown %q: worded differently", status.Convert(hidden).Message(), want)
	}

	for who, ctx := range map[string]context.Context{"bob": bob, "alice": alice, "root": root} {
		list, err := client.ListSessions(ctx, &acpgatev1.ListSessionsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		turns, err := client.ListTurns(ctx, &acpgatev1.ListTurnsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		want := 1
		if who == "bob" {
			want = 0
		}
		if len(list.GetSessions()) != want || len(turns.GetTurns()) != want {
			t.Errorf("%s lists %d sessions and %d turns, want %d of each", who, len(list.GetSessions()), len(turns.GetTurns()), want)
		}
	}
	// The owner, and an admin, may act.
	if _, err := client.ResolvePermission(alice, &acpgatev1.ResolvePermissionRequest{SessionId: id, RequestId: permission, OptionId: "allow"}); err != nil {
		t.Errorf("alice answering her own permission request: %v", err)
	}
	if _, err := client.GetTurn(root, &acpgatev1.GetTurnRequest{TurnId: turnID}); err != nil {
		t.Errorf("an admin reading the turn: %v", err)
	}
	if _, err := client.CloseSession(root, &acpgatev1.CloseSessionRequest{SessionId: id}); err != nil {
		t.Errorf("an admin closing the session: %v", err)
	}
}

func TestAPrincipalOutsideAnAgentsAllowListIsDeniedAndDoesNotSeeIt(t *testing.T) {
	client, as := tenants(t)
	dev, ml := as("dave", "dev"), as("mia", "ml-team")
	_, err := client.CreateSession(dev, &acpgatev1.CreateSessionRequest{Agent: "ml"})
	wantCode(t, "CreateSession", err, codes.PermissionDenied)
	stream, err := client.Prompt(dev, &acpgatev1.PromptRequest{Agent: "ml", Text: "chunk hi"})
	if err == nil {
		_, err = stream.Recv()
	}
	wantCode(t, "a one-shot Prompt", err, codes.PermissionDenied)
	for who, ctx := range map[string]context.Context{"dave": dev, "mia": ml} {
		agents, err := client.ListAgents(ctx, &acpgatev1.ListAgentsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, a := range agents.GetAgents() {
			names = append(names, a.GetName())
		}
		want := map[string]string{"dave": "[test]", "mia": "[test ml]"}[who]
		if got := fmt.Sprint(names); got != want {
			t.Errorf("%s sees agents %s, want %s", who, got, want)
		}
	}
	if _, err := client.CreateSession(ml, &acpgatev1.CreateSessionRequest{Agent: "ml"}); err != nil {
		t.Errorf("a member of ml-team: %v", err)
	}
}

func TestRequestIDsAreScopedToTheirPrincipal(t *testing.T) {
	client, as := tenants(t)
	var turns []string
	for _, who := range []string{"alice", "bob"} {
		stream, err := client.Prompt(as(who), &acpgatev1.PromptRequest{Agent: "test", Text: "chunk hi from " + who, RequestId: "job-1"})
		if err != nil {
			t.Fatal(err)
		}
		e, err := stream.Recv()
		if err != nil {
			t.Fatalf("%s: %v (the same key under another principal must be independent)", who, err)
		}
		turns = append(turns, e.GetStarted().GetTurnId())
		for {
			if _, err := stream.Recv(); err != nil {
				break
			}
		}
	}
	if turns[0] == turns[1] {
		t.Errorf("bob's job-1 attached to alice's turn %s", turns[0])
	}
}

// An unknown agent's error suggests and lists only the agents the caller
// may use: the name of one its allow excludes is not the caller's to learn.
func TestAnUnknownAgentNamesOnlyTheAgentsTheCallerMayUse(t *testing.T) {
	client, as := tenants(t)
	for _, c := range []struct {
		ctx  context.Context
		who  string
		want string
	}{
		{as("bob"), "bob", `no agent named "mk" is configured; the agents you may use: test`},
		{as("alice", "ml-team"), "alice of ml-team", `no agent named "mk" is configured (did you mean "ml"?); the agents you may use: test, ml`},
	} {
		_, err := client.CreateSession(c.ctx, &acpgatev1.CreateSessionRequest{Agent: "mk"})
		if st := status.Convert(err); st.Code() != codes.NotFound || st.Message() != c.want {
			t.Errorf("CreateSession of an unknown agent as %s: %v, want NOT_FOUND %q", c.who, err, c.want)
		}
	}
}
