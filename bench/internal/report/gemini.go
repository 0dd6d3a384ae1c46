package report

import (
	"slices"
	"time"

	"github.com/acpgate/acpgate/bench/internal/fakegemini"
)

// GeminiResult is the real Gemini CLI behind the gateway: its time to
// first chunk cold, warm and on an open session.
type GeminiResult struct {
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

func (r *Report) geminiMD(w func(string, ...any)) {
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
		w("| %s | %s | %s | %s | %s |\n", row.name, FmtDurF(Median(row.v)), FmtDurF(quantile(row.v, 0.99)), FmtDurF(slices.Min(row.v)), FmtDurF(slices.Max(row.v)))
	}
	w("\nCold / warm: %.1f×; warm minus open session: %s (medians). The warm agent's last start-up (spawn to authenticated, from `ListAgents`): %s. The model API stand-in answered %d streamed and %d other generate requests.\n\n",
		Median(g.Cold)/Median(g.Warm), FmtDurF(Median(g.Warm)-Median(g.Open)), FmtDurF(float64(g.Startup)), g.Model.Stream, g.Model.Generate)
}
