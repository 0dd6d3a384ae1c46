package e2e

import (
	"strings"
	"syscall"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// The tests in this file check session modes and config options through
// the real binary, with the test agent's --modes: it advertises the modes
// ask (initial) and code and the option model (small, initial, or large),
// and a new agent process starts every session, re-opened or not, in ask
// with small.

// settingsReport is what the test agent says its session's settings are.
func settingsReport(t *testing.T, events []*acpgatev1.PromptEvent) string {
	t.Helper()
	return events[len(events)-1].GetOutcome().GetText()
}

func TestModesAndOptionsSetBeforeARestartAreSetAgainAfterTheSessionIsReopened(t *testing.T) {
	cfg, _ := resumable(t, "", "--load-session", "--modes", "ask,code")
	ctx := testCtx(t)
	s, client, sess := servedWithASession(ctx, t, cfg)
	// The mode by the agent's own update, the model by the client.
	events := promptEvents(ctx, t, client, sess.GetId(), "mode code")
	streamed := false
	for _, e := range events {
		streamed = streamed || e.GetCurrentMode().GetModeId() == "code"
	}
	if !streamed {
		t.Errorf("the agent's current_mode_update did not reach the stream: %v", events)
	}
	if _, err := client.SetSessionConfigOption(ctx, &acpgatev1.SetSessionConfigOptionRequest{SessionId: sess.GetId(), OptionId: "model", Value: "large"}); err != nil {
		t.Fatal(err)
	}
	if got := settingsReport(t, promptEvents(ctx, t, client, sess.GetId(), "settings")); got != "mode:code model:large" {
		t.Fatalf("before the restart the agent reports %q", got)
	}
	s.stop(t, syscall.SIGTERM)
	again := serve(t, "--config", cfg)
	client = acpgatev1.NewAgentGatewayClient(dialTest(t, again.addr))
	susp := wantState(ctx, t, client, sess.GetId(), acpgatev1.SessionState_SESSION_STATE_SUSPENDED)
	if susp.GetCurrentModeId() != "code" || len(susp.GetConfigOptions()) != 1 || susp.GetConfigOptions()[0].GetCurrentValue() != "large" {
		t.Errorf("the suspended session shows mode %q and options %v", susp.GetCurrentModeId(), susp.GetConfigOptions())
	}
	// The agent process that re-opens the session starts it in ask/small:
	// the report says whether the gateway set the recorded ones again.
	if got := settingsReport(t, promptEvents(ctx, t, client, sess.GetId(), "settings")); got != "mode:code model:large" {
		t.Errorf("after re-opening the agent reports %q, want the settings of before the restart\n%s", got, again.log())
	}
	got := wantState(ctx, t, client, sess.GetId(), acpgatev1.SessionState_SESSION_STATE_IDLE)
	if got.GetCurrentModeId() != "code" || len(got.GetModes()) != 2 {
		t.Errorf("the re-opened session shows mode %q of %v", got.GetCurrentModeId(), got.GetModes())
	}
}

func TestTheBinaryValidatesModesAgainstWhatTheAgentAdvertised(t *testing.T) {
	cfg, _ := resumable(t, "", "--modes", "ask,code")
	ctx := testCtx(t)
	s := serve(t, "--config", cfg)
	client := acpgatev1.NewAgentGatewayClient(dialTest(t, s.addr))
	sess, err := client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "test", ModeId: "code"})
	if err != nil {
		t.Fatal(err)
	}
	if sess.GetCurrentModeId() != "code" {
		t.Errorf("CreateSession with mode code made a session in %q", sess.GetCurrentModeId())
	}
	if got := settingsReport(t, promptEvents(ctx, t, client, sess.GetId(), "settings")); got != "mode:code model:small" {
		t.Errorf("the agent reports %q", got)
	}
	_, err = client.SetSessionMode(ctx, &acpgatev1.SetSessionModeRequest{SessionId: sess.GetId(), ModeId: "yolo"})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `"ask", "code"`) {
		t.Errorf("SetSessionMode with an unknown mode: %v", err)
	}
	got, err := client.SetSessionMode(ctx, &acpgatev1.SetSessionModeRequest{SessionId: sess.GetId(), ModeId: "ask"})
	if err != nil || got.GetCurrentModeId() != "ask" {
		t.Errorf("SetSessionMode ask: %v, %v", got, err)
	}
}
