package e2e

import (
	"context"
	"errors"
	"fmt"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc"
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
	conn, as := tenantConn(t)
	return acpgatev1.NewAgentGatewayClient(conn), as
}

// tenantConn is tenants' gateway as a connection, for calls made from the
// service's descriptor.
func tenantConn(t *testing.T) (*grpc.ClientConn, func(name string, groups ...string) context.Context) {
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
	conn := p.tlsClient(t, s, nil)
	return conn, func(name string, groups ...string) context.Context {
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

// Every RPC of the service, called by a principal about what another
// created, is refused, found by walking the service's descriptor rather than
// a list kept by hand: a new RPC that names a session or a turn and forgets
// to check its owner fails here. An RPC naming a session or a turn answers
// NOT_FOUND, worded as for an id that does not exist; one naming an agent
// the caller may not use answers PERMISSION_DENIED; a listing shows none of
// it.
func TestEveryRPCRefusesWhatAnotherPrincipalOwns(t *testing.T) {
	conn, as := tenantConn(t)
	client := acpgatev1.NewAgentGatewayClient(conn)
	alice, bob := as("alice"), as("bob")
	sess, err := client.CreateSession(alice, &acpgatev1.CreateSessionRequest{Agent: "test"})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := client.Prompt(alice, &acpgatev1.PromptRequest{SessionId: sess.GetId(), Text: "chunk hello"})
	if err != nil {
		t.Fatal(err)
	}
	var turnID string
	for ev, err := stream.Recv(); err == nil; ev, err = stream.Recv() {
		if s := ev.GetStarted(); s != nil {
			turnID = s.GetTurnId()
		}
	}
	if turnID == "" {
		t.Fatal("alice's turn never started")
	}
	// Fields a request may need to get past its own validation to the
	// owner's check; the ids under test are set separately.
	fillers := map[protoreflect.Name]string{"text": "hi", "mode_id": "code", "option_id": "x", "value": "x", "request_id": "r1", "action": "decline", "acp_session_id": "x"}
	methods := acpgatev1.File_acpgate_v1_gateway_proto.Services().ByName("AgentGateway").Methods()
	for i := range methods.Len() {
		m := methods.Get(i)
		t.Run(string(m.Name()), func(t *testing.T) {
			in := dynamicpb.NewMessage(m.Input())
			fields := m.Input().Fields()
			set := func(name protoreflect.Name, v string) bool {
				f := fields.ByName(name)
				switch {
				case f == nil || f.IsList():
					return false
				case f.Kind() == protoreflect.StringKind:
					in.Set(f, protoreflect.ValueOfString(v))
				case f.Kind() == protoreflect.EnumKind:
					in.Set(f, protoreflect.ValueOfEnum(1)) // the first value past UNSPECIFIED
				default:
					return false
				}
				return true
			}
			for name, v := range fillers {
				set(name, v)
			}
			// A listing's ids are filters: it answers with none of alice's,
			// or refuses an agent bob may not use.
			want := []codes.Code{codes.OK}
			switch {
			case strings.HasPrefix(string(m.Name()), "List"):
				set("session_id", sess.GetId())
				set("agent", "ml")
				want = []codes.Code{codes.OK, codes.PermissionDenied}
			case set("session_id", sess.GetId()), set("turn_id", turnID):
				want = []codes.Code{codes.NotFound}
			case set("agent", "ml"):
				want = []codes.Code{codes.PermissionDenied}
			}
			full := "/" + string(m.Parent().FullName()) + "/" + string(m.Name())
			var answer proto.Message
			if m.IsStreamingServer() {
				st, err := conn.NewStream(bob, &grpc.StreamDesc{ServerStreams: true}, full)
				if err == nil {
					err = st.SendMsg(in)
				}
				if err == nil {
					err = st.CloseSend()
				}
				for err == nil {
					out := dynamicpb.NewMessage(m.Output())
					if err = st.RecvMsg(out); err == nil && answer == nil {
						answer = out
					}
				}
				if errors.Is(err, io.EOF) {
					err = nil
				}
				wantOneOf(t, string(m.Name()), err, want)
			} else {
				out := dynamicpb.NewMessage(m.Output())
				err := conn.Invoke(bob, full, in, out)
				wantOneOf(t, string(m.Name()), err, want)
				answer = out
			}
			if answer != nil {
				text := prototext.Format(answer)
				for _, secret := range []string{sess.GetId(), turnID, `"ml"`} {
					if strings.Contains(text, secret) {
						t.Errorf("%s answered bob with alice's %s: %s", m.Name(), secret, text)
					}
				}
			}
		})
	}
}

func wantOneOf(t *testing.T, what string, err error, codes []codes.Code) {
	t.Helper()
	if !slices.Contains(codes, status.Code(err)) {
		t.Errorf("%s: %v, want one of %v", what, err, codes)
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
