package e2e

import (
	"context"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// The tests in this file check the bounds on suspended sessions: a
// suspended session nobody re-opens within suspended_retention is ended
// and its record deleted, and limits.max_suspended ends those suspended
// longest, both by the gateway's sweeper, against the real sqlite store.

// wantGone waits (at most 10 s) until GetSession says the session does not
// exist.
func wantGone(ctx context.Context, t *testing.T, client acpgatev1.AgentGatewayClient, id string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := client.GetSession(ctx, &acpgatev1.GetSessionRequest{SessionId: id})
		if status.Code(err) == codes.NotFound {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GetSession(%s) = %v, %v; want NOT_FOUND", id, got, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// wantNoSessions checks that a gateway lists no session at all.
func wantNoSessions(ctx context.Context, t *testing.T, client acpgatev1.AgentGatewayClient, when string) {
	t.Helper()
	list, err := client.ListSessions(ctx, &acpgatev1.ListSessionsRequest{})
	if err != nil || len(list.GetSessions()) != 0 {
		t.Errorf("%s ListSessions = %v, %v; want none", when, list, err)
	}
}

func TestASessionSuspendedByARestartAndNotReopenedWithinSuspendedRetentionIsEndedAndItsRecordDeleted(t *testing.T) {
	cfg, _ := resumable(t, "    suspended_retention: 2s\n", "--load-session")
	ctx := testCtx(t)
	s, _, sess := servedWithASession(ctx, t, cfg)
	s.stop(t, syscall.SIGTERM)

	// The retention counts from the restart, not from when the session
	// was created: it is suspended at first.
	again := serve(t, "--config", cfg)
	client := acpgatev1.NewAgentGatewayClient(dialTest(t, again.addr))
	wantState(ctx, t, client, sess.GetId(), acpgatev1.SessionState_SESSION_STATE_SUSPENDED)
	wantGone(ctx, t, client, sess.GetId())
	wantNoSessions(ctx, t, client, "after the retention")
	again.stop(t, syscall.SIGTERM)

	// Its record is gone with it: a third start finds nothing to suspend.
	third := serve(t, "--config", cfg)
	wantNoSessions(ctx, t, acpgatev1.NewAgentGatewayClient(dialTest(t, third.addr)), "after another restart")
}

func TestMaxSuspendedEndsTheSessionSuspendedLongestAndKeepsTheOthers(t *testing.T) {
	cfg, _ := resumable(t, "    idle_timeout: 1s\nlimits: {max_suspended: 1}\n", "--load-session")
	ctx := testCtx(t)
	s, client, first := servedWithASession(ctx, t, cfg)
	wantState(ctx, t, client, first.GetId(), acpgatev1.SessionState_SESSION_STATE_SUSPENDED)
	second := sessionWithATurn(ctx, t, client)
	wantState(ctx, t, client, second.GetId(), acpgatev1.SessionState_SESSION_STATE_SUSPENDED)
	wantGone(ctx, t, client, first.GetId())
	wantResumed(ctx, t, client, second.GetId(), "session/load")

	// The bound holds across a restart too: the ended session's record
	// was deleted, the other one's kept.
	s.stop(t, syscall.SIGTERM)
	again := serve(t, "--config", cfg)
	list, err := acpgatev1.NewAgentGatewayClient(dialTest(t, again.addr)).ListSessions(ctx, &acpgatev1.ListSessionsRequest{})
	if err != nil || len(list.GetSessions()) != 1 || list.GetSessions()[0].GetId() != second.GetId() {
		t.Errorf("after a restart ListSessions = %v, %v; want only %s", list, err, second.GetId())
	}
}
