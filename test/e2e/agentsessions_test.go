package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

func TestListAndDeleteAgentSessionsReachTheAgentAndAreRefusedForAnAgentWithoutThem(t *testing.T) {
	workspace := t.TempDir()
	if err := os.Mkdir(filepath.Join(workspace, "proj"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, fmt.Sprintf(`
shutdown_grace: 5s
agents:
  - name: lister
    command: "${ACPGATE_E2E_AGENT}"
    args: [--unique-sessions, --list-sessions, --delete-sessions, --record-meta, %q]
    workspace: %q
  - name: plain
    command: "${ACPGATE_E2E_AGENT}"
    args: [--unique-sessions]
`, filepath.Join(workspace, "..", filepath.Base(workspace)+"-methods"), workspace))
	s := serve(t, "--config", cfg)
	client := acpgatev1.NewAgentGatewayClient(dialTest(t, s.addr))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	first, err := client.ListAgentSessions(ctx, &acpgatev1.ListAgentSessionsRequest{Agent: "lister", Cwd: "proj"})
	if err != nil {
		t.Fatal(err)
	}
	realProj, _ := filepath.EvalSymlinks(filepath.Join(workspace, "proj"))
	if len(first.GetSessions()) != 1 || first.GetSessions()[0].GetAcpSessionId() != "listed-1" ||
		first.GetSessions()[0].GetCwd() != realProj || first.GetSessions()[0].GetTitle() != "first" || first.GetNextPageToken() != "page-2" {
		t.Fatalf("first page: %v; want listed-1 in %s, titled, with a next page", first, realProj)
	}
	second, err := client.ListAgentSessions(ctx, &acpgatev1.ListAgentSessionsRequest{Agent: "lister", PageToken: first.GetNextPageToken()})
	if err != nil {
		t.Fatal(err)
	}
	if len(second.GetSessions()) != 1 || second.GetSessions()[0].GetAcpSessionId() != "listed-2" || second.GetNextPageToken() != "" {
		t.Fatalf("second page: %v; want listed-2 and no next page", second)
	}

	_, err = client.ListAgentSessions(ctx, &acpgatev1.ListAgentSessionsRequest{Agent: "plain"})
	st := status.Convert(err)
	e := harnessErrorOf(st)
	if st.Code() != codes.FailedPrecondition || e.GetCapabilityNotSupported().GetPrimitive() != "session/list" {
		t.Errorf("an agent without session/list: %v (detail %v); want FAILED_PRECONDITION naming session/list", err, e)
	}
	if _, err := client.ListAgentSessions(ctx, &acpgatev1.ListAgentSessionsRequest{Agent: "plain", Cwd: "x"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("a cwd for an agent without a workspace: %v; want INVALID_ARGUMENT", err)
	}
	if _, err := client.DeleteAgentSession(ctx, &acpgatev1.DeleteAgentSessionRequest{Agent: "lister", AcpSessionId: "listed-1"}); err != nil {
		t.Fatalf("DeleteAgentSession: %v", err)
	}
	if got := methodsSent(t, filepath.Join(workspace, "..", filepath.Base(workspace)+"-methods")); len(got) == 0 || got[len(got)-1] != "session/delete" {
		t.Errorf("the agent got %v; want session/delete last", got)
	}
	_, err = client.DeleteAgentSession(ctx, &acpgatev1.DeleteAgentSessionRequest{Agent: "plain", AcpSessionId: "x"})
	if st := status.Convert(err); st.Code() != codes.FailedPrecondition || harnessErrorOf(st).GetCapabilityNotSupported().GetPrimitive() != "session/delete" {
		t.Errorf("deleting on an agent without session/delete: %v; want FAILED_PRECONDITION naming session/delete", err)
	}
	if _, err := client.DeleteAgentSession(ctx, &acpgatev1.DeleteAgentSessionRequest{Agent: "lister"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("DeleteAgentSession without a session id: %v; want INVALID_ARGUMENT", err)
	}
	// ListAgents says what each agent advertised, as the calls found it.
	agents, err := client.ListAgents(ctx, &acpgatev1.ListAgentsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range agents.GetAgents() {
		c := a.GetCapabilities()
		want := a.GetName() == "lister"
		if c.GetSessionList() != want || c.GetSessionDelete() != want || c.GetSessionResume() || c.GetSessionClose() {
			t.Errorf("ListAgents shows %s's session capabilities as list %v, delete %v, resume %v, close %v; want list and delete %v, no resume or close",
				a.GetName(), c.GetSessionList(), c.GetSessionDelete(), c.GetSessionResume(), c.GetSessionClose(), want)
		}
	}
	// The agents started for the calls are gone: no session is open.
	sessions, err := client.ListSessions(ctx, &acpgatev1.ListSessionsRequest{})
	if err != nil || len(sessions.GetSessions()) != 0 {
		t.Errorf("ListSessions after listing: %v, %v; want none", sessions, err)
	}
}

// harnessErrorOf is the HarnessError a status carries in its details, or
// nil.
func harnessErrorOf(st *status.Status) *acpgatev1.HarnessError {
	for _, d := range st.Details() {
		if e, ok := d.(*acpgatev1.HarnessError); ok {
			return e
		}
	}
	return nil
}
