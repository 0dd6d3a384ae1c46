package config

import (
	"fmt"
	"os"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/acpgate/acpgate/internal/webhook"
)

// Webhooks is where the endings of turns may be announced: a Prompt's
// notify_url, or an agent's (Agent.NotifyURL), is POSTed the turn when it
// ends, signed with the secret in SecretFile. Only URLs under
// AllowedURLPrefixes are accepted: a caller may not make the gateway
// send requests to hosts the operator did not choose. The zero value
// allows no notification at all.
type Webhooks struct {
	// AllowedURLPrefixes are the prefixes a notification URL must start
	// with, in the form MCP.AllowedURLPrefixes has (see CheckURLPrefix).
	AllowedURLPrefixes []string
	// SecretFile holds the key notifications are signed with, in the
	// Standard Webhooks form ("whsec_" and the base64 of 24 or more
	// random bytes). Required with AllowedURLPrefixes.
	SecretFile string
	// RetryHorizon is how long after a turn's ending its notification is
	// retried before it is given up; 0 means webhook.DefaultHorizon (a
	// receiver down for less than a day still gets every notification).
	RetryHorizon time.Duration
}

// Horizon is RetryHorizon, or its default.
func (w Webhooks) Horizon() time.Duration {
	if w.RetryHorizon > 0 {
		return w.RetryHorizon
	}
	return webhook.DefaultHorizon
}

// Enabled reports whether any notification URL is allowed.
func (w Webhooks) Enabled() bool { return len(w.AllowedURLPrefixes) > 0 }

// Allows reports whether url starts with one of the allowed prefixes.
func (w Webhooks) Allows(url string) bool {
	for _, p := range w.AllowedURLPrefixes {
		if strings.HasPrefix(url, p) {
			return true
		}
	}
	return false
}

// webhooks decodes the webhooks block.
func (d *decoder) webhooks(n *yaml.Node, w *Webhooks) {
	f := field{"webhooks", "webhooks"}
	d.fields(n, f, "in webhooks", map[string]func(*yaml.Node){
		"allowed_url_prefixes": d.listInto(&w.AllowedURLPrefixes, f.child("allowed_url_prefixes"), false),
		"secret_file":          d.stringInto(&w.SecretFile, f.child("secret_file"), true),
		"retry_horizon":        d.durationInto(&w.RetryHorizon, f.child("retry_horizon")),
	})
}

// webhooks checks the webhooks block and the agents' notify_url against
// it.
func (v *checker) webhooks(c *Config) {
	w := c.Webhooks
	for i, prefix := range w.AllowedURLPrefixes {
		path := fmt.Sprintf("webhooks.allowed_url_prefixes[%d]", i)
		if err := CheckURLPrefix(prefix); err != nil {
			v.add(path, "%s: %v", path, err)
		}
	}
	for i, a := range c.Agents {
		if a.NotifyURL != "" && !w.Allows(a.NotifyURL) {
			v.add(fmt.Sprintf("agents[%d].notify_url", i), "%s: notify_url %q must start with one of webhooks.allowed_url_prefixes %q", agentLabel(a.Name, i), a.NotifyURL, w.AllowedURLPrefixes)
		}
	}
	if w.RetryHorizon < 0 {
		v.add("webhooks.retry_horizon", "webhooks.retry_horizon: %v must not be negative", w.RetryHorizon)
	}
	switch {
	case !w.Enabled():
		return
	case w.SecretFile == "":
		v.add("webhooks.secret_file", "webhooks.secret_file is required with webhooks.allowed_url_prefixes: notifications are signed with it so that a receiver can tell they are the gateway's")
	default:
		v.readable("webhooks.secret_file", w.SecretFile)
		if b, err := os.ReadFile(w.SecretFile); err == nil {
			if _, err := webhook.ParseSecret(string(b)); err != nil {
				v.add("webhooks.secret_file", "webhooks.secret_file: %s: %v", w.SecretFile, err)
			}
		}
	}
}
