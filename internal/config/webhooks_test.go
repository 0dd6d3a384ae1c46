package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWebhooksNeedASecretInTheConventionsFormAndAgentsTargetsUnderThePrefixes(t *testing.T) {
	dir := t.TempDir()
	good, short := filepath.Join(dir, "good"), filepath.Join(dir, "short")
	if err := os.WriteFile(good, []byte("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw4jwIuPaRx4U=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(short, []byte("whsec_c2hvcnQ="), 0o600); err != nil {
		t.Fatal(err)
	}
	agents := `
agents:
  - name: a
    command: /bin/sh
    notify_url: https://hooks.example.com/a/turns
  - name: b
    command: /bin/sh
    notify_url: https://elsewhere.example.com/hooks/
`
	for _, c := range []struct {
		name, webhooks string
		want           []string // substrings of the error; none: valid
	}{
		{"valid", "webhooks:\n  allowed_url_prefixes: [https://hooks.example.com/a/, https://elsewhere.example.com/]\n  secret_file: " + good + "\n  retry_horizon: 1h\n", nil},
		{"no secret", "webhooks:\n  allowed_url_prefixes: [https://hooks.example.com/a/, https://elsewhere.example.com/]\n",
			[]string{"webhooks.secret_file is required"}},
		{"a short key", "webhooks:\n  allowed_url_prefixes: [https://hooks.example.com/a/, https://elsewhere.example.com/]\n  secret_file: " + short + "\n",
			[]string{"webhooks.secret_file: " + short + ": the webhook secret's key is 5 bytes"}},
		{"a target outside the prefixes, and a prefix without its final slash", "webhooks:\n  allowed_url_prefixes: [https://hooks.example.com/a/, https://other.example.com]\n  secret_file: " + good + "\n",
			[]string{`webhooks.allowed_url_prefixes[1]: "https://other.example.com" must end with "/"`, `agent "b": notify_url "https://elsewhere.example.com/hooks/" must start with one of webhooks.allowed_url_prefixes`}},
		{"targets without webhooks", "",
			[]string{`agent "a": notify_url`, `agent "b": notify_url`}},
		{"a negative horizon", "webhooks:\n  allowed_url_prefixes: [https://hooks.example.com/a/, https://elsewhere.example.com/]\n  secret_file: " + good + "\n  retry_horizon: -1s\n",
			[]string{"webhooks.retry_horizon: -1s must not be negative"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Parse([]byte(c.webhooks+agents), "config.yaml", envOf(nil))
			if len(c.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if cfg.Webhooks.Horizon().String() != "1h0m0s" || cfg.Agents[0].NotifyURL != "https://hooks.example.com/a/turns" {
					t.Errorf("parsed %+v, agent a's notify_url %q", cfg.Webhooks, cfg.Agents[0].NotifyURL)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q:\n%v", w, err)
				}
			}
		})
	}
}
