package clientreq

import (
	"encoding/json"
	"strings"
	"testing"

	acpsdk "github.com/coder/acp-go-sdk"
)

// The form-mode example of ACP's elicitation documentation (schema v1,
// 1.7.0, docs/protocol/v1/elicitation.mdx), params only.
const schemaFormExample = `{
    "sessionId": "sess_abc123",
    "mode": "form",
    "message": "How should I approach this refactoring?",
    "requestedSchema": {
      "type": "object",
      "properties": {
        "strategy": {
          "type": "string",
          "enum": ["conservative", "balanced", "aggressive"]
        }
      },
      "required": ["strategy"]
    }
  }`

func TestTheSchemasFormExampleDecodesAsAnElicitationRequest(t *testing.T) {
	var req elicitationRequest
	if err := json.Unmarshal([]byte(schemaFormExample), &req); err != nil {
		t.Fatal(err)
	}
	if req.SessionID != "sess_abc123" || req.Mode != "form" || req.Message != "How should I approach this refactoring?" {
		t.Errorf("%+v", req)
	}
	var schema requestedSchema
	if err := json.Unmarshal(req.RequestedSchema, &schema); err != nil {
		t.Fatal(err)
	}
	if p := schema.Properties["strategy"]; p.Type != "string" || len(p.Enum) != 3 || len(schema.Required) != 1 {
		t.Errorf("%+v", schema)
	}
}

func TestAnswersEncodeAsTheSchemasElicitationActions(t *testing.T) {
	for _, c := range []struct {
		resp elicitationResponse
		want string
	}{
		{elicitationResponse{Action: "accept", Content: map[string]any{"strategy": "balanced"}}, `{"action":"accept","content":{"strategy":"balanced"}}`},
		{elicitationResponse{Action: "decline"}, `{"action":"decline"}`},
		{elicitationResponse{Action: "cancel"}, `{"action":"cancel"}`},
	} {
		b, err := json.Marshal(c.resp)
		if err != nil || string(b) != c.want {
			t.Errorf("%s, %v; want %s", b, err, c.want)
		}
	}
}

func TestOnlyTheAskPolicyAdvertisesFormElicitationAtInitialize(t *testing.T) {
	for mode, want := range map[ElicitationMode]string{ElicitAsk: `"elicitation":{"form":{}}`, ElicitDecline: ""} {
		b, err := json.Marshal(acpsdk.ClientCapabilities{Elicitation: ElicitationPolicy{Mode: mode}.Capabilities()})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(string(b), "elicitation"); got != (want != "") || (want != "" && !strings.Contains(string(b), want)) {
			t.Errorf("%s: %s", mode, b)
		}
	}
}
