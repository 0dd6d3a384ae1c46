package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acpgate/acpgate/internal/exitcode"
	"github.com/acpgate/acpgate/internal/testutil"
)

// A refused connection is most often a gateway that is not running, or one
// at another address: the CLI says both.
func TestARefusedConnectionAsksWhetherTheGatewayRunsThere(t *testing.T) {
	bin, _ := binaries(t)
	port, err := testutil.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "agents", "--addr", fmt.Sprintf("127.0.0.1:%d", port)).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "is `acpgate serve` running at that address? --addr (or ACPGATE_ADDR) names another") {
		t.Errorf("agents against a closed port: %v\n%s", err, out)
	}
}

// Whether running the prompt again may help is the first thing a person
// decides after a failed turn: the real binary says it under the error line.
func TestAFailedTurnSaysWhetherItIsRetryable(t *testing.T) {
	s := serve(t)
	bin, _ := binaries(t)
	for _, c := range []struct{ text, want string }{
		{"please refuse", "· not retryable: "},
		{"fail", "· "},
	} {
		out, err := exec.Command(bin, "prompt", "--addr", s.addr, "--agent", "demo", c.text).CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) || !strings.Contains(string(out), "retryable") {
			t.Errorf("prompt %q: %v\n%s", c.text, err, out)
		}
	}
}

// A misconfigured agent's command shows at start, not at the first session
// that fails to start.
func TestServeWarnsAtStartOfAnAgentWhoseCommandCannotBeFound(t *testing.T) {
	cfg := writeConfig(t, `
store: memory
agents:
  - name: present
    command: "${ACPGATE_E2E_AGENT}"
  - name: missing
    command: acpgate-no-such-agent-program
`)
	s := serve(t, "--config", cfg)
	log := s.log()
	if !strings.Contains(log, "an agent's command cannot be found") || !strings.Contains(log, "agent=missing") {
		t.Errorf("no warning about the missing command:\n%s", log)
	}
	if n := strings.Count(log, "an agent's command cannot be found"); n != 1 {
		t.Errorf("%d warnings for one missing command:\n%s", n, log)
	}
}

// Every flag of `serve -h` says what it does, the profiling ones included:
// a flag listed with no description reads as a mistake, and one left out
// is found only in the source.
func TestServeHelpDescribesEveryFlag(t *testing.T) {
	code, _, stderr := runCLI(t, "serve", "-h")
	if code != 0 {
		t.Errorf("serve -h exits %d, want 0", code)
	}
	lines := strings.Split(stderr, "\n")
	flags := 0
	for i, line := range lines {
		if !strings.HasPrefix(line, "  -") {
			continue
		}
		flags++
		if i+1 >= len(lines) || strings.TrimSpace(lines[i+1]) == "" || strings.HasPrefix(lines[i+1], "  -") {
			t.Errorf("serve -h lists %q with no description", strings.TrimSpace(line))
		}
	}
	for _, name := range []string{"-cpuprofile", "-allocprofile", "-trace"} {
		if !strings.Contains(stderr, "  "+name+" ") {
			t.Errorf("serve -h does not list %s", name)
		}
	}
	if flags == 0 {
		t.Fatalf("serve -h lists no flags:\n%s", stderr)
	}
}

// A second gateway on the same state directory cannot start; the error says
// the three ways to give it its own: --state-dir, XDG_STATE_HOME and
// `store: memory`. --state-dir overrides the default (startServe points
// XDG_STATE_HOME elsewhere).
func TestAStateDirectoryInUseNamesTheWaysToGiveTheGatewayItsOwn(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	cfg := writeConfig(t, e2eConfig)
	first := serve(t, "--config", cfg, "--state-dir", dir)
	if log := first.log(); !strings.Contains(log, "state_dir="+dir) {
		t.Errorf("the first gateway's store is not in --state-dir %s:\n%s", dir, log)
	}
	_, err := startServe(t, "--config", cfg, "--state-dir", dir)
	if err == nil {
		t.Fatal("a second gateway started on a state directory in use")
	}
	for _, want := range []string{"in use by another acpgate process", "--state-dir", "XDG_STATE_HOME", "store: memory"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the second gateway's error does not name %q:\n%v", want, err)
		}
	}
}

// A cwd the gateway cannot take says what it is relative to and that
// agents[].workspace sets it: without a workspace, every session starts in
// an empty temporary directory, so an absolute path (the caller's own
// directory, typically) cannot work.
func TestACwdOutsideAWorkspaceSaysThatAgentsWorkspaceSetsOne(t *testing.T) {
	ws := t.TempDir()
	s := serve(t, "--config", writeConfig(t, `
store: memory
agents:
  - name: bare
    command: "${ACPGATE_E2E_AGENT}"
  - name: rooted
    command: "${ACPGATE_E2E_AGENT}"
    workspace: `+ws+`
`))
	for _, c := range []struct {
		agent, cwd string
		want       []string
	}{
		{"bare", t.TempDir(), []string{"is absolute", "no workspace", "agents[].workspace"}},
		{"bare", "src", []string{"does not exist", "no workspace", "agents[].workspace"}},
		{"rooted", "/etc", []string{"is absolute", `agent "rooted"'s workspace`, "agents[].workspace"}},
		{"rooted", "../..", []string{"leaves", `agent "rooted"'s workspace`, "agents[].workspace"}},
	} {
		for _, cmd := range []string{"prompt", "open"} {
			args := []string{"--addr", s.addr, "--agent", c.agent, "--cwd", c.cwd}
			if cmd == "prompt" {
				args = append(args, "hello")
			}
			code, _, stderr := runCLI(t, cmd, args...)
			if code != exitcode.InvalidArgument {
				t.Errorf("%s --agent %s --cwd %s: exit %d, want %d; stderr %q", cmd, c.agent, c.cwd, code, exitcode.InvalidArgument, stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("%s --agent %s --cwd %s: stderr does not say %q:\n%s", cmd, c.agent, c.cwd, w, stderr)
				}
			}
			if strings.Contains(stderr, ws) {
				t.Errorf("%s --agent %s --cwd %s: stderr shows the workspace's path to the caller:\n%s", cmd, c.agent, c.cwd, stderr)
			}
		}
	}
}

// An unknown agent is most often a mistyped one: the CLI shows the
// gateway's suggestion of the nearest names and the agents there are.
func TestAnUnknownAgentSuggestsTheNearestNamesAndListsTheConfiguredOnes(t *testing.T) {
	s := serve(t, "--config", writeConfig(t, `
store: memory
agents:
  - name: gemini
    command: "${ACPGATE_E2E_AGENT}"
  - name: codex
    command: "${ACPGATE_E2E_AGENT}"
  - name: gemma
    command: "${ACPGATE_E2E_AGENT}"
`))
	for _, c := range []struct{ agent, suggestion string }{
		{"gemni", `(did you mean "gemini"?)`},
		{"gemix", `(did you mean "gemini" or "gemma"?)`},
		{"claude", ""},
	} {
		for _, cmd := range []string{"prompt", "open"} {
			args := []string{"--addr", s.addr, "--agent", c.agent}
			if cmd == "prompt" {
				args = append(args, "hello")
			}
			code, _, stderr := runCLI(t, cmd, args...)
			want := fmt.Sprintf("acpgate: NOT_FOUND: no agent named %q is configured", c.agent)
			if c.suggestion != "" {
				want += " " + c.suggestion
			}
			want += "; the agents you may use: gemini, codex, gemma\n"
			if code != exitcode.Rejected || stderr != want {
				t.Errorf("%s --agent %s: exit %d, stderr\n%q\nwant exit %d, stderr\n%q", cmd, c.agent, code, stderr, exitcode.Rejected, want)
			}
		}
	}
}
