package translate

import (
	"encoding/json"
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
	modes, current, options, err := SessionSettings(json.RawMessage(sessionNewExample))
	if err != nil {
		t.Fatal(err)
	}
	got := describe(options)
	want := "mode:select=ask[ask,code] model:select=model-1[Fast/model-1,Strong/model-2] web:boolean=true[true,false]"
	if got != want {
		t.Errorf("options\n got %s\nwant %s", got, want)
	}
	if len(modes) != 2 || current != "ask" || modes[0].GetDescription() != "Request permission before making any changes" {
		t.Errorf("modes %v, current %q", modes, current)
	}
}

func TestAConfigOptionUpdateChangesTheSettingsAndBecomesAnEvent(t *testing.T) {
	params := `{"sessionId":"s","update":{"sessionUpdate":"config_option_update","configOptions":[
	  {"id":"model","name":"Model","type":"select","currentValue":"model-2","options":[{"value":"model-1","name":"Model 1"},{"value":"model-2","name":"Model 2"}]}]}}`
	_, u, err := Decode(json.RawMessage(params), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !u.Settings.HasOptions || describe(u.Settings.Options) != "model:select=model-2[model-1,model-2]" {
		t.Errorf("the update carries %v", u.Settings.Options)
	}
	if got := describe(u.Event.GetConfigOptions().GetOptions()); got != "model:select=model-2[model-1,model-2]" {
		t.Errorf("the event carries %s", got)
	}
	_, u, err = Decode(json.RawMessage(`{"sessionId":"s","update":{"sessionUpdate":"current_mode_update","currentModeId":"code"}}`), nil)
	if err != nil || u.Settings.Mode != "code" || u.Event.GetCurrentMode().GetModeId() != "code" {
		t.Errorf("current_mode_update: %v, %v", u, err)
	}
}
