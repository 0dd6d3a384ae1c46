package acp

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// The session/new answer of ACP's session-config-options page, with a
// boolean option, a grouped select and an option of a type ACP does not
// define added, and its session-modes page's modes.
const sessionNewExample = `{
  "sessionId": "sess_abc123def456",
  "modes": {
    "currentModeId": "ask",
    "availableModes": [
      {"id": "ask", "name": "Ask", "description": "Request permission before making any changes"},
      {"id": "code", "name": "Code"}
    ]
  },
  "configOptions": [
    {"id": "mode", "name": "Session Mode", "description": "Controls how the agent requests permission",
     "category": "mode", "type": "select", "currentValue": "ask",
     "options": [
       {"value": "ask", "name": "Ask", "description": "Request permission before making any changes"},
       {"value": "code", "name": "Code", "description": "Write and modify code with full tool access"}]},
    {"id": "model", "name": "Model", "category": "model", "type": "select", "currentValue": "model-1",
     "options": [
       {"group": "fast", "name": "Fast", "options": [{"value": "model-1", "name": "Model 1"}]},
       {"group": "strong", "name": "Strong", "options": [{"value": "model-2", "name": "Model 2"}]}]},
    {"id": "web", "name": "Web search", "type": "boolean", "currentValue": true},
    {"id": "ratio", "name": "A later type", "type": "slider", "currentValue": 0.5}
  ]
}`

// describe renders options compactly: id=current[values] per option.
func describe(opts []*acpgatev1.ConfigOption) string {
	var out []string
	for _, o := range opts {
		var values []string
		for _, v := range o.GetValues() {
			value := v.GetValue()
			if v.GetGroup() != "" {
				value = v.GetGroup() + "/" + value
			}
			values = append(values, value)
		}
		out = append(out, o.GetId()+":"+o.GetType()+"="+o.GetCurrentValue()+"["+strings.Join(values, ",")+"]")
	}
	return strings.Join(out, " ")
}

func TestTheSchemasSessionSettingsDecodeWithGroupsFlattenedAndUnknownTypesIgnored(t *testing.T) {
	var w wireSettings
	if err := json.Unmarshal([]byte(sessionNewExample), &w); err != nil {
		t.Fatal(err)
	}
	got := describe(optionsProto(w.ConfigOptions))
	want := "mode:select=ask[ask,code] model:select=model-1[Fast/model-1,Strong/model-2] web:boolean=true[true,false]"
	if got != want {
		t.Errorf("options\n got %s\nwant %s", got, want)
	}
	if len(w.Modes.AvailableModes) != 2 || w.Modes.CurrentModeID != "ask" {
		t.Errorf("modes %+v", w.Modes)
	}
}

func TestAConfigOptionUpdateChangesTheSettingsAndBecomesAnEvent(t *testing.T) {
	params := `{"sessionId":"s","update":{"sessionUpdate":"config_option_update","configOptions":[
	  {"id":"model","name":"Model","type":"select","currentValue":"model-2","options":[{"value":"model-1","name":"Model 1"},{"value":"model-2","name":"Model 2"}]}]}}`
	_, u, err := decodeUpdate(json.RawMessage(params), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !u.settings.hasOptions || describe(u.settings.options) != "model:select=model-2[model-1,model-2]" {
		t.Errorf("the update carries %v", u.settings.options)
	}
	if got := describe(u.event.GetConfigOptions().GetOptions()); got != "model:select=model-2[model-1,model-2]" {
		t.Errorf("the event carries %s", got)
	}
	_, u, err = decodeUpdate(json.RawMessage(`{"sessionId":"s","update":{"sessionUpdate":"current_mode_update","currentModeId":"code"}}`), nil)
	if err != nil || u.settings.mode != "code" || u.event.GetCurrentMode().GetModeId() != "code" {
		t.Errorf("current_mode_update: %v, %v", u, err)
	}
}

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
	s.adoptSettings(json.RawMessage(sessionNewExample))
	s.setID("s1")
	if got := s.Settings().CurrentMode; got != "code" {
		t.Errorf("the session's mode is %q, want the update's code", got)
	}
}
