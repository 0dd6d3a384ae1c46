package config

import (
	"strings"
	"testing"
)

func TestQuotasAndAuditAreReadWithTheirDefaults(t *testing.T) {
	c, err := Parse([]byte(agentYAML), "c.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Quotas.For("anyone") != (Quota{}) || !c.Audit.Enabled || c.Audit.IncludeText {
		t.Errorf("defaults: quotas %+v, audit %+v", c.Quotas, c.Audit)
	}
	c, err = Parse([]byte(agentYAML+`quotas:
  default: {concurrent_turns: 1, open_sessions: 2, turns_per_minute: 3}
  principals:
    alice: {turns_per_minute: 60}
audit: {enabled: false, include_text: true}
`), "c.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Quotas.For(""); got != (Quota{ConcurrentTurns: 1, OpenSessions: 2, TurnsPerMinute: 3}) {
		t.Errorf("the anonymous caller's quota is %+v", got)
	}
	if got := c.Quotas.For("alice"); got != (Quota{TurnsPerMinute: 60}) {
		t.Errorf("alice's quota is %+v, want hers alone (not merged with default)", got)
	}
	if c.Audit.Enabled || !c.Audit.IncludeText {
		t.Errorf("audit %+v", c.Audit)
	}
}

func TestQuotaSettingsAreValidatedStrictly(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"quotas: {default: {concurent_turns: 1}}\n", `unknown key "concurent_turns" in quotas.default`},
		{"quotas: {default: {open_sessions: -1}}\n", "quotas.default.open_sessions: must be 0 (no limit) or positive, got -1"},
		{"quotas: {principals: {bob: {turns_per_minute: -2}}}\n", `quotas.principals "bob".turns_per_minute: must be 0`},
		{"quotas: {principals: {bob: {turns_per_minute: lots}}}\n", `quotas.principals "bob".turns_per_minute: expected a whole number`},
		{"audit: {enabled: yes please}\n", "audit.enabled: expected true or false"},
		{"audit: {text: true}\n", `unknown key "text" in audit`},
	} {
		_, err := Parse([]byte(agentYAML+tc.yaml), "c.yaml", nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
