package report

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/acpgate/acpgate/bench/internal/job"
)

// TurnsPoint is one N's results: per label, per round, one Result per turn.
type TurnsPoint struct {
	N    int                       `json:"n"`
	Runs map[string][][]job.Result `json:"runs"`
}

// TurnsResult is the turns section's: N simultaneous LLM-like turns, for
// each N in Points.
type TurnsResult struct {
	Rate   int          `json:"rate"`
	Chunks int          `json:"chunks"`
	Size   int          `json:"size"`
	Points []TurnsPoint `json:"points"`
	// GatewayHWM is the working tree's gateway's peak RSS over the section.
	GatewayHWM int64 `json:"gateway_hwm"`
}

// TurnsP99 is the median and the largest of the per-turn p99 latencies of
// the turns that completed (NaN when none did).
func TurnsP99(rs []job.Result) (med, worst float64) {
	v := oks(rs, p99)
	if len(v) == 0 {
		return math.NaN(), math.NaN()
	}
	return Median(v), slices.Max(v)
}

// TurnsScheduledP99 is the median per-turn p99 counted from the agent's
// schedule (job.Result.Scheduled) over the turns that completed and have
// one (NaN when none do).
func TurnsScheduledP99(rs []job.Result) float64 {
	v := slices.DeleteFunc(oks(rs, scheduledP99), math.IsNaN)
	if len(v) == 0 {
		return math.NaN()
	}
	return Median(v)
}

// TurnsFirst is the median and the largest time to first chunk of the
// turns that completed (NaN when none did): from the call (gateway) or the
// spawn (floor), so it shows what starting N agents at once costs the
// turns, which their chunks' latency, stamped by agents already running,
// does not.
func TurnsFirst(rs []job.Result) (med, last float64) {
	v := oks(rs, func(r job.Result) float64 { return float64(r.First) })
	if len(v) == 0 {
		return math.NaN(), math.NaN()
	}
	return Median(v), slices.Max(v)
}

// turnsRow is one N of the section's curve for one label: over the
// rounds, the median per-turn p99 and the worst per-turn p99, each as the
// median over the rounds and their range.
type turnsRow struct {
	N             int
	Median, Worst []float64 // one per round
	// Scheduled is, per round, the median per-turn p99 counted from the
	// agent's schedule.
	Scheduled []float64
	// FirstMedian and FirstLast are, per round, the median and the
	// largest time to first chunk.
	FirstMedian, FirstLast []float64
	Failed                 int // turns that did not complete
}

func (t *TurnsResult) rows(label string) []turnsRow {
	var out []turnsRow
	for _, pt := range t.Points {
		row := turnsRow{N: pt.N}
		for _, rs := range pt.Runs[label] {
			m, w := TurnsP99(rs)
			if !math.IsNaN(m) {
				row.Median = append(row.Median, m)
				row.Worst = append(row.Worst, w)
			}
			if m := TurnsScheduledP99(rs); !math.IsNaN(m) {
				row.Scheduled = append(row.Scheduled, m)
			}
			if m, l := TurnsFirst(rs); !math.IsNaN(m) {
				row.FirstMedian = append(row.FirstMedian, m)
				row.FirstLast = append(row.FirstLast, l)
			}
			row.Failed += len(rs) - len(oks(rs, p99))
		}
		out = append(out, row)
	}
	return out
}

// logBar draws v on a logarithmic scale from lo (no bar) to hi (width
// cells), so that a curve spanning three decades stays readable.
func logBar(v, lo, hi float64, width int) string {
	if math.IsNaN(v) || v <= lo || hi <= lo {
		return ""
	}
	f := math.Log(v/lo) / math.Log(hi/lo)
	return strings.Repeat("█", max(1, min(width, int(math.Round(f*float64(width))))))
}

// turnsPlot is the p99 growth from 1 to the most turns as text: one line
// per N and label, the median per-turn p99 on a log scale.
func (t *TurnsResult) turnsPlot(labels []string) string {
	const width = 50
	lo, hi := math.Inf(1), 0.0
	for _, l := range labels {
		for _, row := range t.rows(l) {
			if len(row.Median) > 0 {
				m := Median(row.Median)
				lo, hi = min(lo, m), max(hi, m)
			}
		}
	}
	if hi == 0 {
		return ""
	}
	lo /= 2 // the smallest value still gets a bar
	var b strings.Builder
	fmt.Fprintf(&b, "median per-turn p99, log scale (%s … %s)\n", FmtDurF(lo), FmtDurF(hi))
	labelWidth := 0
	for _, l := range labels {
		labelWidth = max(labelWidth, len(l))
	}
	for i, pt := range t.Points {
		for _, l := range labels {
			rows := t.rows(l)
			m := math.NaN()
			if len(rows[i].Median) > 0 {
				m = Median(rows[i].Median)
			}
			fmt.Fprintf(&b, "N=%-4d %-*s |%-*s %s\n", pt.N, labelWidth, l, width, logBar(m, lo, hi, width), FmtDurF(m))
		}
	}
	return b.String()
}

func (r *Report) turnsMD(w func(string, ...any)) {
	t := r.Turns
	if t == nil || len(t.Points) == 0 {
		return
	}
	labels := TurnsClients(r.Baseline != "")
	w("## Simultaneous LLM-like turns\n\n")
	w("N one-shot turns at once, each an LLM-like stream (%d chunks of %s at %d chunks/s), one client process per turn, started together; the agent is the naive one (one write per chunk) behind the floor and behind the gateway alike. Latency is arrival minus the agent's send stamp; each turn has its own p99, and each cell is, over the rounds, the median (range) of the **median** and of the **worst** per-turn p99. *From the schedule* counts each chunk from when the agent meant to send it (its first chunk's stamp plus i / rate, less its least lateness) instead of its stamp: it also holds what the chunk waited in the agent, which a busy CPU, or an agent below the gateway's priority, puts before the stamp. The first chunk is timed from the call (gateway, relay) or the spawn (floor), so it holds what starting N agents at once costs: the turns' median and their last. A round runs the clients one after another, each round starting one client further on than the round before. %s\n\n",
		t.Chunks, size(t.Size), t.Rate, relayRow)
	w("| N | client | median per-turn p99 | worst per-turn p99 | median − floor's | median per-turn p99, from the schedule | first chunk: median / last | failed turns |\n|---|---|---|---|---|---|---|---|\n")
	floor := t.rows(job.OnNaive("floor"))
	for i := range t.Points {
		for _, l := range labels {
			row := t.rows(l)[i]
			over := "—"
			if l != job.OnNaive("floor") && len(floor[i].Median) > 0 && len(row.Median) > 0 {
				over = FmtDurF(Median(row.Median) - Median(floor[i].Median))
			}
			first := "—"
			if len(row.FirstMedian) > 0 {
				first = FmtDurF(Median(row.FirstMedian)) + " / " + FmtDurF(Median(row.FirstLast))
			}
			sched := "—"
			if len(row.Scheduled) > 0 {
				sched = mmm(row.Scheduled, FmtDurF)
			}
			w("| %d | %s | %s | %s | %s | %s | %s | %d |\n", row.N, l, mmm(row.Median, FmtDurF), mmm(row.Worst, FmtDurF), over, sched, first, row.Failed)
		}
	}
	w("\n```\n%s```\n\n", t.turnsPlot(labels))
	if t.GatewayHWM > 0 {
		w("The gateway's peak RSS over the section: %s.\n\n", MiB(t.GatewayHWM))
	}
}

// AnswerResult is the default client reading one large answer: the
// gateway's peak RSS against the answer's size.
type AnswerResult struct {
	N      int        `json:"n"`
	Size   int        `json:"size"`
	Base   int64      `json:"base"` // RSS before the turn
	HWM    int64      `json:"hwm"`  // peak RSS, the warm-up turn and this one
	Result job.Result `json:"result"`
}

func (r *Report) answerMD(w func(string, ...any)) {
	a := r.Answer
	if a == nil {
		return
	}
	text := int64(a.N) * int64(a.Size)
	w("## One large answer, default client\n\n")
	w("A fresh gateway, one one-shot turn of %s × %s (%s of text) read by the default client, whose outcome carries the whole text: peak RSS (`VmHWM`) **%s, %.2f× the answer** (RSS before the turn: %s)%s.\n\n",
		FmtInt(float64(a.N)), size(a.Size), MiB(text), MiB(a.HWM), float64(a.HWM)/float64(text), MiB(a.Base), errSuffix(a.Result))
}
