package acp

import (
	"encoding/json"
	"log/slog"
	"testing"
)

// sessionNewAnswer answers session/new with two modes, the current one
// ask.
const sessionNewAnswer = `{"sessionId": "s1", "modes": {"currentModeId": "ask",
  "availableModes": [{"id": "ask", "name": "Ask"}, {"id": "code", "name": "Code"}]}}`

func TestAModeUpdateReadBeforeTheSessionsIDWasRecordedIsNotLost(t *testing.T) {
	c := &Conn{log: slog.New(slog.DiscardHandler)}
	s := c.newSession()
	c.attach(s)
	c.openingAs(s)
	// The agent answers session/new, then at once switches mode; the
	// reader handles the update before Open has recorded the id.
	if !c.notify("session/update", json.RawMessage(`{"sessionId":"s1","update":{"sessionUpdate":"current_mode_update","currentModeId":"code"}}`)) {
		t.Fatal("the update was refused")
	}
	s.settings.adopt(json.RawMessage(sessionNewAnswer), s.log)
	s.setID("s1")
	if got := s.Settings().CurrentMode; got != "code" {
		t.Errorf("the session's mode is %q, want the update's code", got)
	}
}
