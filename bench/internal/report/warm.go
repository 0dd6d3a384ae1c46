package report

import (
	"fmt"
	"slices"
	"time"
)

// WarmResult is the warm pool against a slow-starting agent: the time to
// first chunk warm, cold and on an open session, and a sustained rate.
type WarmResult struct {
	Delay time.Duration `json:"delay"`
	// Time to first chunk (ns) of one-shot turns taking a warm process,
	// of one-shot turns starting the agent cold, and of the same turn on
	// an open session.
	Warm []float64 `json:"warm"`
	Cold []float64 `json:"cold"`
	Open []float64 `json:"open"`
	// The sustained one-shot rate with warm: 4.
	Sustain WarmSustain `json:"sustain"`
}

// WarmSustain is one-shot turns run back to back from several clients on
// an agent kept warm by four.
type WarmSustain struct {
	Clients int           `json:"clients"`
	Wall    time.Duration `json:"wall"`
	Turns   int           `json:"turns"`
	Taken   int           `json:"taken"` // turns whose first chunk came before the agent could have started: a warm take
	Errors  int           `json:"errors"`
	TTFC    []float64     `json:"ttfc"`
}

func (r *Report) warmMD(w func(string, ...any)) {
	t := r.Warm
	if t == nil {
		return
	}
	w("## Warm pool: time to first chunk of a slow-starting agent\n\n")
	w("The test agent sleeping %s before it answers `initialize` (a stand-in for a slow-starting agent), behind one gateway (%d runs, each after the pool is full again). Warm: a one-shot `Prompt` on an agent with `warm: 2`, which takes a ready process and runs only `session/new`. Open session: the same turn on a session already open. Cold: a one-shot `Prompt` on the same agent without a pool.\n\n", t.Delay, len(t.Warm))
	w("| | median | min | max |\n|---|---|---|---|\n")
	for _, row := range []struct {
		name string
		v    []float64
	}{{"one-shot, warm (`warm: 2`)", t.Warm}, {"turn on an open session", t.Open}, {"one-shot, cold", t.Cold}} {
		if len(row.v) > 0 {
			w("| %s | %s | %s | %s |\n", row.name, FmtDurF(Median(row.v)), FmtDurF(slices.Min(row.v)), FmtDurF(slices.Max(row.v)))
		}
	}
	if len(t.Warm) > 0 {
		w("\nWarm one-shot minus open session: %s (median against median); cold / warm: %.0f×.\n\n",
			FmtDurF(Median(t.Warm)-Median(t.Open)), Median(t.Cold)/Median(t.Warm))
	}
	s := t.Sustain
	if s.Turns > 0 {
		w("Sustained: %d clients each running one-shot turns back to back on an agent with `warm: 4` (the same %s start-up) for %s: %d turns, **%.1f turns/s**, %d of them on a warm process (first chunk under half the start-up), first chunk median %s, %d errors. The pool refills at most 4 start-ups of one agent at a time, so with a %s start-up it supplies about 4 warm processes a second; turns beyond that start cold.\n\n",
			s.Clients, t.Delay, s.Wall.Round(time.Millisecond), s.Turns, float64(s.Turns)/s.Wall.Seconds(), s.Taken, FmtDurF(Median(s.TTFC)), s.Errors, t.Delay)
	}
}

// warmVerdict is the target: a warm one-shot turn's first chunk
// within 5 ms of the same turn on an open session.
func (r *Report) warmVerdict() verdict {
	v := verdict{Figure: "one-shot first chunk with `warm: 2` (1 s start-up) − open session, p50", Target: "≤ 5 ms (cold ≥ 1 s)"}
	t := r.Warm
	if t == nil || len(t.Warm) == 0 {
		return v
	}
	diff := Median(t.Warm) - Median(t.Open)
	v.Known = true
	v.Measured = fmt.Sprintf("%s (warm %s, open %s, cold %s)", FmtDurF(diff), FmtDurF(Median(t.Warm)), FmtDurF(Median(t.Open)), FmtDurF(Median(t.Cold)))
	v.Met = diff <= 5e6 && Median(t.Cold) >= float64(t.Delay)
	return v
}
