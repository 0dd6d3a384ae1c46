package server_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/testutil"
)

// createSession opens a session of agent.
func createSession(t *testing.T, h *harness, agent string) *acpgatev1.Session {
	t.Helper()
	sess, err := h.client.CreateSession(context.Background(), &acpgatev1.CreateSessionRequest{Agent: agent})
	if err != nil {
		t.Fatal(err)
	}
	return sess
}

// startModes starts a gateway and opens a session of the agent with modes.
func startModes(t *testing.T) (*harness, *acpgatev1.Session) {
	t.Helper()
	h := start(t)
	return h, createSession(t, h, "modes")
}

// answer is the text of a turn's outcome.
func answer(events []*acpgatev1.PromptEvent) string {
	return last(events).GetOutcome().GetText()
}

func TestASessionListsTheModesAndOptionsItsAgentAdvertised(t *testing.T) {
	_, sess := startModes(t)
	var modes []string
	for _, m := range sess.GetModes() {
		modes = append(modes, m.GetId()+"="+m.GetName()+"/"+m.GetDescription())
	}
	if got, want := strings.Join(modes, " "), "ask=Mode ask/the ask mode code=Mode code/the code mode"; got != want {
		t.Errorf("modes %q, want %q", got, want)
	}
	if sess.GetCurrentModeId() != "ask" {
		t.Errorf("current mode %q, want the agent's initial ask", sess.GetCurrentModeId())
	}
	opts := sess.GetConfigOptions()
	if len(opts) != 1 {
		t.Fatalf("config options %v, want the agent's one", opts)
	}
	o := opts[0]
	var values []string
	for _, v := range o.GetValues() {
		values = append(values, v.GetValue())
	}
	if o.GetId() != "model" || o.GetType() != "select" || o.GetCategory() != "model" || o.GetCurrentValue() != "small" || strings.Join(values, ",") != "small,large" {
		t.Errorf("config option %v", o)
	}
}

func TestSetSessionModeChangesTheAgentsModeAndTheSession(t *testing.T) {
	h, sess := startModes(t)
	ctx := context.Background()
	got, err := h.client.SetSessionMode(ctx, &acpgatev1.SetSessionModeRequest{SessionId: sess.GetId(), ModeId: "code"})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetCurrentModeId() != "code" {
		t.Errorf("the returned session's mode is %q", got.GetCurrentModeId())
	}
	got, err = h.client.SetSessionConfigOption(ctx, &acpgatev1.SetSessionConfigOptionRequest{SessionId: sess.GetId(), OptionId: "model", Value: "large"})
	if err != nil {
		t.Fatal(err)
	}
	if v := got.GetConfigOptions()[0].GetCurrentValue(); v != "large" {
		t.Errorf("the returned session's model is %q", v)
	}
	if text := answer(collectOK(t, h, sess.GetId(), "settings")); text != "mode:code model:large" {
		t.Errorf("the agent reports %q", text)
	}
}

func TestAnUnadvertisedModeOrValueIsInvalidArgumentNamingTheAllowedOnes(t *testing.T) {
	h, sess := startModes(t)
	ctx := context.Background()
	_, err := h.client.SetSessionMode(ctx, &acpgatev1.SetSessionModeRequest{SessionId: sess.GetId(), ModeId: "yolo"})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `"ask", "code"`) {
		t.Errorf("an unknown mode: %v", err)
	}
	_, err = h.client.SetSessionConfigOption(ctx, &acpgatev1.SetSessionConfigOptionRequest{SessionId: sess.GetId(), OptionId: "model", Value: "huge"})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `"small", "large"`) {
		t.Errorf("an unknown value: %v", err)
	}
	_, err = h.client.SetSessionConfigOption(ctx, &acpgatev1.SetSessionConfigOptionRequest{SessionId: sess.GetId(), OptionId: "temperature", Value: "1"})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `"model"`) {
		t.Errorf("an unknown option: %v", err)
	}
}

func TestAnAgentWithoutModesOrOptionsGivesCapabilityNotSupported(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	sess := createSession(t, h, "test")
	if len(sess.GetModes()) != 0 || len(sess.GetConfigOptions()) != 0 {
		t.Errorf("a session of an agent without settings shows %v, %v", sess.GetModes(), sess.GetConfigOptions())
	}
	_, err := h.client.SetSessionMode(ctx, &acpgatev1.SetSessionModeRequest{SessionId: sess.GetId(), ModeId: "code"})
	checkCapabilityNotSupported(t, err, "session/set_mode")
	_, err = h.client.SetSessionConfigOption(ctx, &acpgatev1.SetSessionConfigOptionRequest{SessionId: sess.GetId(), OptionId: "model", Value: "large"})
	checkCapabilityNotSupported(t, err, "session/set_config_option")
}

func checkCapabilityNotSupported(t *testing.T, err error, primitive string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.FailedPrecondition {
		t.Fatalf("%s: %v, want FAILED_PRECONDITION", primitive, err)
	}
	for _, d := range st.Details() {
		if he, ok := d.(*acpgatev1.HarnessError); ok && he.GetCapabilityNotSupported().GetPrimitive() == primitive {
			return
		}
	}
	t.Errorf("%s: no capability_not_supported detail in %v", primitive, st.Details())
}

func TestCreateSessionSetsTheRequestedModeAndOptions(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	sess, err := h.client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "modes", ModeId: "code", ConfigOptions: map[string]string{"model": "large"}})
	if err != nil {
		t.Fatal(err)
	}
	if sess.GetCurrentModeId() != "code" || sess.GetConfigOptions()[0].GetCurrentValue() != "large" {
		t.Errorf("the new session shows mode %q and %v", sess.GetCurrentModeId(), sess.GetConfigOptions())
	}
	if text := answer(collectOK(t, h, sess.GetId(), "settings")); text != "mode:code model:large" {
		t.Errorf("the agent reports %q", text)
	}
}

func TestCreateSessionWithAnUnadvertisedModeFailsAndLeavesNoSession(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	_, err := h.client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "modes", ModeId: "yolo"})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `"ask", "code"`) {
		t.Fatalf("CreateSession with an unknown mode: %v", err)
	}
	_, err = h.client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "test", ModeId: "code"})
	checkCapabilityNotSupported(t, err, "session/set_mode")
	list, err := h.client.ListSessions(ctx, &acpgatev1.ListSessionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(list.GetSessions()); n != 0 {
		t.Errorf("%d sessions are left open", n)
	}
}

func TestSettingsTheAgentChangesItselfReachTheStreamAndTheSession(t *testing.T) {
	h, sess := startModes(t)
	ctx := context.Background()
	events := collectOK(t, h, sess.GetId(), "mode code\nmodel large")
	if mode, model := testutil.StreamedSettings(events); mode != "code" || model != "large" {
		t.Errorf("the stream carried mode %q and model %q", mode, model)
	}
	// The updates are read before the prompt's answer, so the session shows
	// them once the turn has ended.
	got, err := h.client.GetSession(ctx, &acpgatev1.GetSessionRequest{SessionId: sess.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetCurrentModeId() != "code" || got.GetConfigOptions()[0].GetCurrentValue() != "large" {
		t.Errorf("GetSession shows mode %q and options %v after the agent changed them", got.GetCurrentModeId(), got.GetConfigOptions())
	}
}
