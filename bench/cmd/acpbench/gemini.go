package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"

	"github.com/acpgate/acpgate/bench/internal/fakegemini"
	"github.com/acpgate/acpgate/bench/internal/report"
)

// The gemini section measures the real Gemini CLI (`gemini --acp`) behind
// the gateway, cold and with the warm pool, against a stand-in for its model
// API (bench/internal/fakegemini) served by the harness: the figures are the
// agent's own start-up and the gateway's, not a model's. It runs only when a
// Gemini CLI is given (-gemini, or ACPBENCH_GEMINI), since CI has none.

// geminiEnv names the environment variable that gives the Gemini CLI
// binary when -gemini does not.
const geminiEnv = "ACPBENCH_GEMINI"

// The gemini section's agents: Gemini CLI kept warm by two, and not kept
// warm (which also holds the open session).
const (
	geminiWarm = "gemini-warm"
	geminiCold = "gemini-cold"
)

func (d *driver) geminiSection() error {
	if d.gemini == "" {
		d.rep.Gemini = &report.GeminiResult{Skipped: "no Gemini CLI given (-gemini PATH or " + geminiEnv + "=PATH)"}
		logf("   gemini: skipped: %s", d.rep.Gemini.Skipped)
		return nil
	}
	// The gateway runs the agent from its own working directory and PATH:
	// name the binary absolutely.
	bin, err := exec.LookPath(d.gemini)
	if err == nil {
		bin, err = filepath.Abs(bin)
	}
	if err != nil {
		return fmt.Errorf("the Gemini CLI %q: %w", d.gemini, err)
	}
	model := fakegemini.New(fakegemini.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: model, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		_ = srv.Close()
		<-served
	}()
	home := filepath.Join(d.dir, "gemini-home")
	if err := geminiHome(home); err != nil {
		return err
	}
	res := report.GeminiResult{}
	if res.Version, err = geminiVersion(bin, home); err != nil {
		return err
	}
	res.Node = nodeVersion()
	logf("   Gemini CLI %s (Node %s), model API stand-in at http://%s", res.Version, res.Node, ln.Addr())
	conf := gatewayConf{agents: geminiAgent(geminiWarm, bin, home, ln.Addr().String(), 2) +
		geminiAgent(geminiCold, bin, home, ln.Addr().String(), 0)}
	err = d.withGateway(conf, func(ctx context.Context, _ *gatewayProc, client acpgatev1.AgentGatewayClient) error {
		var err error
		res.Warm, res.Open, res.Cold, err = d.compareStarts(ctx, client, starts{
			warm: geminiWarm, cold: geminiCold, pool: 2, runs: d.plan.geminiRuns, text: "Say hello.",
		})
		if err != nil {
			return err
		}
		resp, err := client.ListAgents(ctx, &acpgatev1.ListAgentsRequest{})
		if err != nil {
			return err
		}
		for _, a := range resp.GetAgents() {
			if a.GetName() == geminiWarm {
				res.Startup = a.GetLastStartupDuration().AsDuration()
			}
		}
		return nil
	})
	res.Model = model.Counts()
	d.rep.Gemini = &res
	if err != nil {
		return err
	}
	if turns := int64(3 * d.plan.geminiRuns); res.Model.Stream < turns {
		d.fail("gemini: %d turns but only %d streamed answers from the model API stand-in", turns, res.Model.Stream)
	}
	if res.Model.Unknown > 0 {
		logf("   gemini: Gemini CLI made %d requests the stand-in does not serve", res.Model.Unknown)
	}
	logf("   gemini: first chunk p50 warm %s, open session %s, cold %s; last start-up %s",
		report.FmtDurF(report.Median(res.Warm)), report.FmtDurF(report.Median(res.Open)), report.FmtDurF(report.Median(res.Cold)), res.Startup.Round(time.Millisecond))
	return nil
}

// geminiAgent is the YAML of one Gemini CLI agent talking to the stand-in
// model API at addr, with home as its HOME (its settings, and the sessions
// it keeps, stay there).
func geminiAgent(name, bin, home, addr string, warm int) string {
	return fmt.Sprintf(`  - name: %s
    command: %q
    args: [--acp]
    inherit_env: [PATH]
    env:
      HOME: %q
      GEMINI_API_KEY: acpbench-dummy-key
      GOOGLE_GEMINI_BASE_URL: "http://%s"
    auth_method: gemini-api-key
    permission_policy: reject
    turn_timeout: 1m
    warm: %d
`, name, bin, home, addr, warm)
}

// geminiSettings keeps Gemini CLI from reaching the network on its own:
// no usage statistics, no update check.
const geminiSettings = `{
  "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
  "privacy": {"usageStatisticsEnabled": false}
}
`

// geminiHome makes an isolated HOME for Gemini CLI, with geminiSettings.
func geminiHome(home string) error {
	dir := filepath.Join(home, ".gemini")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "settings.json"), []byte(geminiSettings), 0o600)
}

// geminiVersion runs `gemini --version` (within 30 s).
func geminiVersion(bin, home string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--version")
	cmd.Env = append(os.Environ(), "HOME="+home)
	out, err := cmd.Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(exit.Stderr)))
		}
		return "", fmt.Errorf("%s --version: %w", bin, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// nodeVersion is `node --version`, or "?".
func nodeVersion() string {
	out, err := exec.Command("node", "--version").Output()
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(out))
}
