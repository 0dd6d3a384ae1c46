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
	"slices"
	"strings"
	"time"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"

	"github.com/acpgate/acpgate/bench/internal/fakegemini"
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

type geminiResult struct {
	// Skipped says why the section did not run; the rest is then empty.
	Skipped string `json:"skipped,omitempty"`
	Version string `json:"version"` // `gemini --version`
	Node    string `json:"node"`    // `node --version`
	// Time to first chunk (ns) of one-shot turns taking a warm process, of
	// the same turn on an open session, and of one-shot turns starting
	// Gemini CLI cold.
	Warm []float64 `json:"warm"`
	Open []float64 `json:"open"`
	Cold []float64 `json:"cold"`
	// Startup is the warm agent's last start-up (spawn to authenticated),
	// as ListAgents reported it at the end.
	Startup time.Duration `json:"startup"`
	// Model is what the stand-in model API answered: every turn must
	// have reached it.
	Model fakegemini.Counts `json:"model"`
}

func (d *driver) geminiSection() error {
	if d.gemini == "" {
		d.rep.Gemini = &geminiResult{Skipped: "no Gemini CLI given (-gemini PATH or " + geminiEnv + "=PATH)"}
		d.logf("   gemini: skipped: %s", d.rep.Gemini.Skipped)
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
	res := geminiResult{}
	if res.Version, err = geminiVersion(bin, home); err != nil {
		return err
	}
	res.Node = nodeVersion()
	d.logf("   Gemini CLI %s (Node %s), model API stand-in at http://%s", res.Version, res.Node, ln.Addr())
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
		d.logf("   gemini: Gemini CLI made %d requests the stand-in does not serve", res.Model.Unknown)
	}
	d.logf("   gemini: first chunk p50 warm %s, open session %s, cold %s; last start-up %s",
		fmtDurF(median(res.Warm)), fmtDurF(median(res.Open)), fmtDurF(median(res.Cold)), res.Startup.Round(time.Millisecond))
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

// quantile is the p-quantile of v, the same way summarize takes it.
func quantile(v []float64, p float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func (r *report) geminiMD(w func(string, ...any)) {
	g := r.Gemini
	if g == nil {
		return
	}
	w("## Gemini CLI: time to first chunk, cold and warm\n\n")
	if g.Skipped != "" {
		w("Not measured in this run: %s. See [`bench/README.md`](../bench/README.md).\n\n", g.Skipped)
		return
	}
	w("Gemini CLI %s (`gemini --acp`, Node %s) behind one gateway, answering from a stand-in for its model API served by the harness (`bench/internal/fakegemini`: a fixed one-chunk answer at once), with an isolated `HOME` (%d runs, each after the pool is full again and each turn on a quiet machine, as far as the machine became quiet: see above; with 20 runs, p99 is the slowest). Warm: a one-shot `Prompt` on an agent with `warm: 2`, which takes a started, initialized and authenticated process and runs only `session/new`. Open session: the same prompt on a session already open. Cold: a one-shot `Prompt` on the same agent without a pool, which starts Node and Gemini CLI first.\n\n",
		g.Version, g.Node, len(g.Warm))
	if len(g.Warm) == 0 {
		return
	}
	w("| | p50 | p99 | min | max |\n|---|---|---|---|---|\n")
	for _, row := range []struct {
		name string
		v    []float64
	}{{"one-shot, warm (`warm: 2`)", g.Warm}, {"turn on an open session", g.Open}, {"one-shot, cold", g.Cold}} {
		w("| %s | %s | %s | %s | %s |\n", row.name, fmtDurF(median(row.v)), fmtDurF(quantile(row.v, 0.99)), fmtDurF(slices.Min(row.v)), fmtDurF(slices.Max(row.v)))
	}
	w("\nCold / warm: %.1f×; warm minus open session: %s (medians). The warm agent's last start-up (spawn to authenticated, from `ListAgents`): %s. The model API stand-in answered %d streamed and %d other generate requests.\n\n",
		median(g.Cold)/median(g.Warm), fmtDurF(median(g.Warm)-median(g.Open)), fmtDurF(float64(g.Startup)), g.Model.Stream, g.Model.Generate)
}

// nodeVersion is `node --version`, or "?".
func nodeVersion() string {
	out, err := exec.Command("node", "--version").Output()
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(out))
}
