package realagents

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// agent is one real ACP agent as the tests run it: how the gateway starts
// it against the stand-in model, and what it is known to do.
type agent struct {
	name string
	// bin is the program under node_modules/.bin; args its arguments.
	bin  string
	args []string
	// auth is the auth_method the gateway calls, if any.
	auth string
	// gemini: the agent talks to the Gemini API stand-in, not fakemodel.
	gemini bool
	// fs is the agent's fs block; empty: both on.
	fs string
	// mode is the mode CreateSession asks for; empty: the agent's own.
	mode string
	// asks: a write (or command) in that mode reaches the client as a
	// permission request. rejectEnds: a rejected request still ends the
	// turn (claude-agent-acp 0.23.1's does not here; docs/agents.md).
	asks, rejectEnds bool
	// lateAfterCancel: the agent answers the prompt after a cancel with an
	// empty end_turn and stays a turn late (claude-agent-acp 0.23.1).
	lateAfterCancel bool
	// unverifiedPermission: the permission path could not be exercised.
	unverifiedPermission bool
	// setup writes the agent's own settings under home and returns the
	// environment (beyond PATH and HOME) that points it at the model.
	setup func(t *testing.T, home, modelURL string) map[string]string
}

// writeFile writes content to home/rel, making its directories.
func writeFile(t *testing.T, home, rel, content string) {
	t.Helper()
	p := filepath.Join(home, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

var agents = []agent{
	{
		name: "gemini", bin: "gemini", args: []string{"--acp"}, auth: "gemini-api-key", gemini: true,
		// With fs/read_text_file served, Gemini CLI 0.61.0 cannot create a
		// file: it does not recognise any error answer as "not found".
		fs: "{read: false, write: false}", asks: true, rejectEnds: true,
		setup: func(t *testing.T, home, url string) map[string]string {
			writeFile(t, home, ".gemini/settings.json", `{
  "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
  "privacy": {"usageStatisticsEnabled": false}
}
`)
			return map[string]string{"GEMINI_API_KEY": "stand-in", "GOOGLE_GEMINI_BASE_URL": url}
		},
	},
	{
		name: "qwen", bin: "qwen", args: []string{"--acp"}, auth: "openai",
		asks: true, rejectEnds: true,
		setup: func(t *testing.T, home, url string) map[string]string {
			writeFile(t, home, ".qwen/settings.json", `{
  "security": {"auth": {"selectedType": "openai"}},
  "general": {"disableAutoUpdate": true},
  "privacy": {"usageStatisticsEnabled": false}
}
`)
			return map[string]string{"OPENAI_API_KEY": "stand-in", "OPENAI_BASE_URL": url + "/v1", "OPENAI_MODEL": "stand-in"}
		},
	},
	{
		name: "opencode", bin: "opencode", args: []string{"acp"}, asks: true, rejectEnds: true,
		setup: func(t *testing.T, home, url string) map[string]string {
			writeFile(t, home, ".config/opencode/opencode.json", fmt.Sprintf(`{
  "$schema": "https://opencode.ai/config.json",
  "autoupdate": false,
  "share": "disabled",
  "model": "standin/stand-in",
  "small_model": "standin/stand-in",
  "permission": {"edit": "ask", "bash": "ask"},
  "provider": {
    "standin": {
      "npm": "@ai-sdk/openai-compatible",
      "name": "Stand-in",
      "options": {"baseURL": %q, "apiKey": "stand-in"},
      "models": {"stand-in": {"name": "Stand-in"}}
    }
  }
}
`, url+"/v1"))
			return map[string]string{"OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1"}
		},
	},
	{
		name: "codex", bin: "codex-acp",
		// Its exec_command runs in codex's Linux sandbox first and asks only
		// when the sandbox refuses; here the sandbox cannot start (no
		// bubblewrap), so the command fails without a request: unverified
		// (docs/agents.md).
		unverifiedPermission: true,
		setup: func(t *testing.T, home, url string) map[string]string {
			writeFile(t, home, ".codex/config.toml", fmt.Sprintf(`model = "stand-in"
model_provider = "standin"

[model_providers.standin]
name = "Stand-in"
base_url = %q
wire_api = "responses"
`, url+"/v1"))
			return map[string]string{"CODEX_HOME": filepath.Join(home, ".codex")}
		},
	},
	{
		name: "claude", bin: "claude-agent-acp", asks: true, lateAfterCancel: true,
		setup: func(t *testing.T, home, url string) map[string]string {
			return map[string]string{"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": "stand-in", "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
		},
	},
}

// config is the gateway configuration running a with the model at url,
// HOME at home and its sessions in workspace.
func (a agent) config(t *testing.T, bin, url, home, workspace, policy string) string {
	env := a.setup(t, home, url)
	cfg := fmt.Sprintf(`store: memory
agents:
  - name: %s
    command: %q
    args: %q
    inherit_env: [PATH]
    workspace: %q
    permission_policy: %s
    permission_timeout: 1m
    fs: %s
    turn_timeout: 2m
    cancel_grace: 10s
    handshake_timeout: 90s
    env:
      HOME: %q
`, a.name, bin, a.args, workspace, policy, a.fsBlock(), home)
	for k, v := range env {
		cfg += fmt.Sprintf("      %s: %q\n", k, v)
	}
	if a.auth != "" {
		cfg += "    auth_method: " + a.auth + "\n"
	}
	return cfg
}

func (a agent) fsBlock() string {
	if a.fs == "" {
		return "{read: true, write: true}"
	}
	return a.fs
}
