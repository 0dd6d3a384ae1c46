package e2e

import (
	"strings"
	"syscall"
	"testing"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// An agent such as Qwen Code starts its ACP sessions in a mode in which it
// approves its own tools ("auto"): the gateway would never see a request,
// and permission_policy ask or reject would decide nothing. The test agent
// starts in "auto" too (the first of --modes).
func TestASessionStartedInASelfApprovingModeIsMovedToTheAskingModeUnlessThePolicyIsAllow(t *testing.T) {
	ctx := testCtx(t)
	for _, c := range []struct {
		policy, callerMode, want string
	}{
		{"ask", "", "default"},
		{"reject", "", "default"},
		{"allow", "", "auto"},
		{"ask", "auto", "auto"}, // the caller chose it
	} {
		cfg, _ := resumable(t, "    permission_policy: "+c.policy+"\n", "--modes", "auto,default")
		s := serve(t, "--config", cfg)
		client := acpgatev1.NewAgentGatewayClient(dialTest(t, s.addr))
		sess, err := client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "test", ModeId: c.callerMode})
		if err != nil {
			t.Fatalf("policy %s: %v", c.policy, err)
		}
		if sess.GetCurrentModeId() != c.want {
			t.Errorf("policy %s, caller mode %q: the session is in mode %q, want %q", c.policy, c.callerMode, sess.GetCurrentModeId(), c.want)
		}
		if got := settingsReport(t, promptEvents(ctx, t, client, sess.GetId(), "settings")); got != "mode:"+c.want+" model:small" {
			t.Errorf("policy %s, caller mode %q: the agent reports %q", c.policy, c.callerMode, got)
		}
		s.stop(t, syscall.SIGTERM)
		if logged := strings.Contains(s.log(), "to match permission_policy"); logged != (c.want != "auto") {
			t.Errorf("policy %s, caller mode %q: the gateway logged the change: %v\n%s", c.policy, c.callerMode, logged, s.log())
		}
	}
}
