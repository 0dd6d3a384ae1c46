package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/acpgate/acpgate/bench/internal/job"
	"github.com/acpgate/acpgate/bench/internal/proc"
)

// The turns section measures what users' load looks like: many agents
// streaming slowly at once, not one flood. N simultaneous one-shot turns,
// each an LLM-like stream (plan.llm), one client process per turn (as N
// users' clients would be: no turn shares a client's heap, scheduler or
// connection with another), on the naive agent, for the floor and for the
// gateway in the same rounds. Every turn's latency (arrival minus the
// agent's send stamp) has its own p99; the section reports, per N, the
// median and the worst of those per-turn p99s.

// turnsClients is the section's clients, in the order each round runs them.
func turnsClients(baseline bool) []string {
	return job.WithBaseline([]string{job.OnNaive("floor"), job.OnNaive("gateway")}, baseline)
}

// turnsPoint is one N's results: per label, per round, one Result per turn.
type turnsPoint struct {
	N    int                       `json:"n"`
	Runs map[string][][]job.Result `json:"runs"`
}

type turnsResult struct {
	Rate   int          `json:"rate"`
	Chunks int          `json:"chunks"`
	Size   int          `json:"size"`
	Points []turnsPoint `json:"points"`
	// GatewayHWM is the working tree's gateway's peak RSS over the section.
	GatewayHWM int64 `json:"gateway_hwm"`
}

// turnsStartMargin is how long after the driver starts a round's client
// processes their turns start (StartAt): time for N processes to start and
// connect on a loaded machine, so that the turns do start together.
func turnsStartMargin(n int) time.Duration { return time.Second + time.Duration(n)*30*time.Millisecond }

func (d *driver) turnsSection() error {
	g, err := d.gateway(gatewayConf{})
	if err != nil {
		return err
	}
	defer d.stopGateway(g)
	base, err := d.startBaseline(g)
	if err != nil {
		return err
	}
	if base != nil {
		defer d.stopGateway(base)
	}
	p := d.plan
	res := turnsResult{Rate: p.llm.rate, Chunks: p.llm.n, Size: p.llm.size}
	for _, n := range p.turnsN {
		res.Points = append(res.Points, turnsPoint{N: n, Runs: map[string][][]job.Result{}})
	}
	for round := range p.turnsRuns {
		for i := range res.Points {
			pt := &res.Points[i]
			for _, c := range turnsClients(base != nil) {
				j := job.ForLabel(c, p.llm.n, p.llm.size)
				j.Rate, j.Latency, j.Timeout = p.llm.rate, true, 2*time.Minute
				rs := d.simultaneous(gatewayFor(c, g, base), j, pt.N)
				for _, r := range rs {
					d.check(fmt.Sprintf("%d simultaneous turns", pt.N), r)
				}
				pt.Runs[c] = append(pt.Runs[c], rs)
				med, worst := turnsP99(rs)
				d.logf("   %3d turns round %d %-22s per-turn p99 median %s, worst %s", pt.N, round+1, c, fmtDurF(med), fmtDurF(worst))
			}
		}
	}
	if m, err := proc.ReadMemory(g.pid()); err == nil {
		res.GatewayHWM = m.HWM
	}
	d.rep.Turns = &res
	return nil
}

// simultaneous runs n client processes of j at once, their turns starting
// together (StartAt), and returns each one's result. It waits for a quiet
// machine first; unlike job, it does not repeat a disturbed measurement
// (the repetitions are the section's rounds).
func (d *driver) simultaneous(g *gatewayProc, j job.Job, n int) []job.Result {
	d.waitQuiet()
	j.Agent = d.agent
	if g != nil {
		j.Addr = g.addr
	}
	j.StartAt = time.Now().Add(turnsStartMargin(n)).UnixNano()
	spec := mustJSON(j)
	out := make([]job.Result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), j.Timeout+turnsStartMargin(n)+30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, d.self, "client", "-job", spec)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			b, err := cmd.Output()
			r := job.Result{Client: j.Client}
			if err != nil {
				r.Err = fmt.Sprintf("acpbench client: %v: %s", err, strings.TrimSpace(stderr.String()))
			} else if err := json.Unmarshal(b, &r); err != nil {
				r.Err = fmt.Sprintf("acpbench client printed %q: %v", b, err)
			}
			out[i] = r
		})
	}
	wg.Wait()
	d.interference.Jobs++
	return out
}

// turnsP99 is the median and the largest of the per-turn p99 latencies of
// the turns that completed (NaN when none did).
func turnsP99(rs []job.Result) (med, worst float64) {
	v := oks(rs, p99)
	if len(v) == 0 {
		return math.NaN(), math.NaN()
	}
	return median(v), slices.Max(v)
}

// turnsRow is one N of the section's curve for one label: over the
// rounds, the median per-turn p99 and the worst per-turn p99, each as the
// median over the rounds and their range.
type turnsRow struct {
	N             int
	Median, Worst []float64 // one per round
	Failed        int       // turns that did not complete
}

func (t *turnsResult) rows(label string) []turnsRow {
	var out []turnsRow
	for _, pt := range t.Points {
		row := turnsRow{N: pt.N}
		for _, rs := range pt.Runs[label] {
			m, w := turnsP99(rs)
			if !math.IsNaN(m) {
				row.Median = append(row.Median, m)
				row.Worst = append(row.Worst, w)
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
func (t *turnsResult) turnsPlot(labels []string) string {
	const width = 50
	lo, hi := math.Inf(1), 0.0
	for _, l := range labels {
		for _, row := range t.rows(l) {
			if len(row.Median) > 0 {
				m := median(row.Median)
				lo, hi = min(lo, m), max(hi, m)
			}
		}
	}
	if hi == 0 {
		return ""
	}
	lo /= 2 // the smallest value still gets a bar
	var b strings.Builder
	fmt.Fprintf(&b, "median per-turn p99, log scale (%s … %s)\n", fmtDurF(lo), fmtDurF(hi))
	labelWidth := 0
	for _, l := range labels {
		labelWidth = max(labelWidth, len(l))
	}
	for i, pt := range t.Points {
		for _, l := range labels {
			rows := t.rows(l)
			m := math.NaN()
			if len(rows[i].Median) > 0 {
				m = median(rows[i].Median)
			}
			fmt.Fprintf(&b, "N=%-4d %-*s |%-*s %s\n", pt.N, labelWidth, l, width, logBar(m, lo, hi, width), fmtDurF(m))
		}
	}
	return b.String()
}

func (r *report) turnsMD(w func(string, ...any)) {
	t := r.Turns
	if t == nil || len(t.Points) == 0 {
		return
	}
	labels := turnsClients(r.Baseline != "")
	w("## Simultaneous LLM-like turns\n\n")
	w("N one-shot turns at once, each an LLM-like stream (%d chunks of %s at %d chunks/s), one client process per turn, started together; the agent is the naive one (one write per chunk) behind the floor and behind the gateway alike. Latency is arrival minus the agent's send stamp; each turn has its own p99, and each cell is, over the rounds, the median (range) of the **median** and of the **worst** per-turn p99.\n\n",
		t.Chunks, size(t.Size), t.Rate)
	w("| N | client | median per-turn p99 | worst per-turn p99 | median − floor's | failed turns |\n|---|---|---|---|---|---|\n")
	floor := t.rows(job.OnNaive("floor"))
	for i := range t.Points {
		for _, l := range labels {
			row := t.rows(l)[i]
			over := "—"
			if l != job.OnNaive("floor") && len(floor[i].Median) > 0 && len(row.Median) > 0 {
				over = fmtDurF(median(row.Median) - median(floor[i].Median))
			}
			w("| %d | %s | %s | %s | %s | %d |\n", row.N, l, mmm(row.Median, fmtDurF), mmm(row.Worst, fmtDurF), over, row.Failed)
		}
	}
	w("\n```\n%s```\n\n", t.turnsPlot(labels))
	if t.GatewayHWM > 0 {
		w("The gateway's peak RSS over the section: %s.\n\n", mib(t.GatewayHWM))
	}
}

// answerResult is the default client reading one large answer: the
// gateway's peak RSS against the answer's size.
type answerResult struct {
	N      int        `json:"n"`
	Size   int        `json:"size"`
	Base   int64      `json:"base"` // RSS before the turn
	HWM    int64      `json:"hwm"`  // peak RSS, the warm-up turn and this one
	Result job.Result `json:"result"`
}

// answerSection reads one large answer with the default client (whose
// outcome carries the whole text) on a fresh gateway, and keeps the
// gateway's peak RSS.
func (d *driver) answerSection() error {
	g, err := d.gateway(gatewayConf{})
	if err != nil {
		return err
	}
	defer d.stopGateway(g)
	a := d.plan.answer
	before, err := proc.ReadMemory(g.pid())
	if err != nil {
		return err
	}
	res := answerResult{N: a.N, Size: a.Size, Base: before.RSS}
	res.Result = d.job(g, job.Job{Client: "gateway", N: a.N, Size: a.Size, Timeout: 5 * time.Minute})
	d.check("answer", res.Result)
	after, err := proc.ReadMemory(g.pid())
	if err != nil {
		return err
	}
	res.HWM = after.HWM
	d.logf("   %s answer: peak RSS %s (%.2f× the answer), from %s", mib(int64(a.N)*int64(a.Size)), mib(res.HWM),
		float64(res.HWM)/float64(int64(a.N)*int64(a.Size)), mib(res.Base))
	d.rep.Answer = &res
	return nil
}

func (r *report) answerMD(w func(string, ...any)) {
	a := r.Answer
	if a == nil {
		return
	}
	text := int64(a.N) * int64(a.Size)
	w("## One large answer, default client\n\n")
	w("A fresh gateway, one one-shot turn of %s × %s (%s of text) read by the default client, whose outcome carries the whole text: peak RSS (`VmHWM`) **%s, %.2f× the answer** (RSS before the turn: %s)%s.\n\n",
		fmtInt(float64(a.N)), size(a.Size), mib(text), mib(a.HWM), float64(a.HWM)/float64(text), mib(a.Base), errSuffix(a.Result))
}
