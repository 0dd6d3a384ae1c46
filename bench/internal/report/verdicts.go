package report

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/acpgate/acpgate/bench/internal/job"
)

// verdicts of the targets, computed once for the report and the
// summary.
type verdict struct {
	Figure, Target, Measured string
	Met                      bool
	Known                    bool // false: not measured in this run
}

func (r *Report) floodShape(name string) *ShapeResult {
	for i := range r.Throughput {
		if r.Throughput[i].Shape.Name == name {
			return &r.Throughput[i]
		}
	}
	return nil
}

func (r *Report) verdicts() []verdict {
	var out []verdict
	flood := func(name, client, target string, want float64) {
		who := "gateway"
		if client == job.GatewayStream {
			who = "gateway with `omit_outcome_text`"
		}
		v := verdict{Figure: "unpaced flood, " + strings.TrimSuffix(name, " flood") + " chunks: " + who + " / floor", Target: target}
		if sr := r.floodShape(name); sr != nil {
			rat := ratios(sr.Runs[client], sr.Runs["floor"], job.Result.Rate)
			lost, ooo, _ := lostOf(sr.Runs[client])
			errs := len(sr.Runs[client]) - len(oks(sr.Runs[client], job.Result.Rate))
			v.Known = len(rat) > 0
			v.Measured = fmt.Sprintf("%s; %d lost, %d out of order, %d failed runs", mmm(rat, fmtRatio), lost, ooo, errs)
			v.Met = v.Known && Median(rat) >= want && lost == 0 && ooo == 0 && errs == 0
		}
		out = append(out, v)
	}
	flood("64 B flood", "gateway", "≥ 0.5, zero loss", 0.5)
	flood("64 B flood", job.GatewayStream, "≥ 0.5, zero loss", 0.5)
	flood("64 KiB flood", "gateway", "≥ 0.7, zero loss", 0.7)
	flood("64 KiB flood", job.GatewayStream, "≥ 0.7, zero loss", 0.7)

	latency := func(client, who string) {
		lat := verdict{Figure: "paced 1,000 – 50,000 chunks/s: " + who + " p99 latency", Target: "≤ floor p99 + 1 ms, and ≤ peer p99"}
		var parts []string
		lat.Met = true
		for _, p := range r.Paced {
			if p.Rate > 50_000 {
				continue
			}
			g := Median(oks(p.Runs[client], p99))
			f := Median(oks(p.Runs["floor"], p99))
			pe := Median(oks(p.Runs["peer"], p99))
			if math.IsNaN(g) || math.IsNaN(f) {
				lat.Met = false
				parts = append(parts, fmt.Sprintf("%s/s: no complete gateway or floor run", FmtInt(float64(p.Rate))))
				continue
			}
			lat.Known = true
			ok := g <= f+1e6 && (math.IsNaN(pe) || g <= pe)
			lat.Met = lat.Met && ok
			peer := "peer broke"
			if !math.IsNaN(pe) {
				peer = "peer " + FmtDurF(pe)
			}
			parts = append(parts, fmt.Sprintf("%s/s: %s (floor %s, %s)", FmtInt(float64(p.Rate)), FmtDurF(g), FmtDurF(f), peer))
		}
		lat.Measured = strings.Join(parts, "; ")
		out = append(out, lat)
	}
	latency("gateway", "gateway")
	latency(job.GatewayStream, "gateway with `omit_outcome_text`")

	conc := verdict{Figure: "200 concurrent turns", Target: "zero lost or reordered chunks"}
	if c := r.Concurrency; c != nil {
		lost, ooo, chunks := lostOf(c.Runs["gateway"])
		errs := len(c.Runs["gateway"]) - len(oks(c.Runs["gateway"], job.Result.Aggregate))
		conc.Figure = fmt.Sprintf("%d concurrent turns", c.Streams)
		conc.Known = len(c.Runs["gateway"]) > 0
		conc.Measured = fmt.Sprintf("%s chunks in %d runs: %d lost, %d out of order, %d failed runs", FmtInt(float64(chunks)), len(c.Runs["gateway"]), lost, ooo, errs)
		conc.Met = conc.Known && lost == 0 && ooo == 0 && errs == 0
	}
	out = append(out, conc)

	idle := verdict{Figure: "gateway RSS per idle session", Target: "≤ 256 KiB"}
	if i := r.Idle; i != nil && i.Opened > 0 {
		idle.Known = true
		idle.Measured = fmt.Sprintf("%s (%d sessions)", KiB(i.PerSession()), i.Opened)
		idle.Met = i.PerSession() <= 256<<10 && i.Opened == i.Target
	}
	out = append(out, idle)

	bp := verdict{Figure: "slow client", Target: "gateway RSS bounded and stated; zero loss"}
	if b := r.Backpressure; b != nil {
		bp.Known = true
		if b.heldBack() {
			bp.Measured = fmt.Sprintf("agent held to ≤ %d chunks (%s) ahead of the client; ", b.MaxAhead, MiB(int64(b.MaxAhead)*int64(b.Size)))
		} else {
			bp.Measured = fmt.Sprintf("the agent ran ahead of the client (sent in %s what the client read in %s), its events waiting in the turn's journal; ", FmtDurF(float64(b.AgentSpan)), FmtDurF(float64(b.ClientSpan)))
		}
		bp.Measured += fmt.Sprintf("RSS follows the text kept for the outcome: peak %s for %s of text (%.1f×); %d lost, %d out of order",
			MiB(b.HWM), MiB(int64(b.N)*int64(b.Size)), float64(b.HWM-b.Base)/float64(int64(b.N)*int64(b.Size)), b.Result.Lost, b.Result.OutOfOrder)
		// Bounded: the agent stays within a pipe's worth of the client
		// (64 KiB of pipe, a few frames in acpgate and gRPC's windows), or,
		// when the journal lets it run ahead, the gateway's memory does not
		// follow the client's lag: with the outcome's text omitted, the
		// peak stays within stallBound of the start.
		bp.Met = b.Result.OK()
		if o := r.BackpressureOmit; o != nil {
			ahead := fmt.Sprintf("agent ≤ %d chunks ahead", o.MaxAhead)
			if !o.heldBack() {
				ahead = "agent ran ahead"
			}
			bp.Measured += fmt.Sprintf("; with `omit_outcome_text`: %s, peak RSS %s over a start of %s for the same text; %d lost, %d out of order",
				ahead, MiB(o.HWM), MiB(o.Base), o.Result.Lost, o.Result.OutOfOrder)
			bp.Met = bp.Met && o.Result.OK() && (o.heldBack() || o.HWM-o.Base <= stallBound)
		} else {
			bp.Met = bp.Met && b.heldBack()
		}
	}
	out = append(out, bp)
	out = append(out, r.storeVerdicts()...)
	out = append(out, r.warmVerdict())
	out = append(out, r.instrumentationVerdicts()...)
	return append(out, r.clusterVerdicts()...)
}

func (v verdict) mark() string {
	switch {
	case !v.Known:
		return "not measured"
	case v.Met:
		return "**met**"
	default:
		return "**missed**"
	}
}

// peerBreak returns the lowest paced rate at which the peer broke at least
// once (0: never) and the highest rate below it at which it completed every
// run.
func (r *Report) peerBreak() (survived, broke int) {
	type point struct{ rate, runs, completed int }
	var pts []point
	for _, p := range r.Paced {
		pts = append(pts, point{p.Rate, len(p.Runs["peer"]), len(oks(p.Runs["peer"], p99))})
	}
	for _, b := range r.Breaks {
		pts = append(pts, point{b.Rate, len(b.Runs), b.Survived()})
	}
	for _, p := range pts {
		if p.completed < p.runs && (broke == 0 || p.rate < broke) {
			broke = p.rate
		}
	}
	for _, p := range pts {
		if p.runs > 0 && p.completed == p.runs && (broke == 0 || p.rate < broke) {
			survived = max(survived, p.rate)
		}
	}
	return survived, broke
}

// peerAlwaysBreaks returns the lowest paced rate from which the peer broke
// in every run at that rate and every higher rate measured (0: none).
func (r *Report) peerAlwaysBreaks() int {
	completed := map[int]int{} // rate -> runs completed
	var rates []int
	note := func(rate, n int) {
		if _, ok := completed[rate]; !ok {
			rates = append(rates, rate)
		}
		completed[rate] += n
	}
	for _, p := range r.Paced {
		note(p.Rate, len(oks(p.Runs["peer"], p99)))
	}
	for _, b := range r.Breaks {
		note(b.Rate, b.Survived())
	}
	slices.Sort(rates)
	always := 0
	for i := len(rates) - 1; i >= 0 && completed[rates[i]] == 0; i-- {
		always = rates[i]
	}
	return always
}

// headline is the few sentences the README quotes.
func (r *Report) headline() string {
	var parts []string
	for _, name := range []string{"64 B flood", "64 KiB flood"} {
		sr := r.floodShape(name)
		if sr == nil {
			continue
		}
		g := sr.Runs["gateway"]
		parts = append(parts, fmt.Sprintf("%s chunks: %s chunks/s (%s MB/s), %s of the floor",
			strings.TrimSuffix(name, " flood"), FmtInt(Median(oks(g, job.Result.Rate))), fmt1(Median(oks(g, job.Result.MBps))),
			fmtRatio(Median(ratios(g, sr.Runs["floor"], job.Result.Rate)))))
	}
	var b strings.Builder
	if len(parts) > 0 {
		b.WriteString("Unpaced floods through the gateway — " + strings.Join(parts, "; ") + ", with no chunk lost or reordered. ")
	}
	survived, broke := r.peerBreak()
	var peerBroke []string
	for _, sr := range r.Throughput {
		if rs := sr.Runs["peer"]; len(rs) > 0 && len(oks(rs, job.Result.Rate)) < len(rs) {
			peerBroke = append(peerBroke, fmt.Sprintf("%s × %s", FmtInt(float64(sr.Shape.N)), size(sr.Shape.Size)))
		}
	}
	if len(peerBroke) > 0 {
		fmt.Fprintf(&b, "The acp-go-sdk v0.13.0 peer broke (`-32603`) on the unpaced floods of %s", strings.Join(peerBroke, " and "))
		if always := r.peerAlwaysBreaks(); broke > 0 && always == broke {
			fmt.Fprintf(&b, " and, paced, broke in every run from %s chunks/s", FmtInt(float64(broke)))
			if survived > 0 {
				fmt.Fprintf(&b, " (it completed every run at %s/s)", FmtInt(float64(survived)))
			}
		} else if broke > 0 {
			fmt.Fprintf(&b, " and, paced, broke in some runs from %s chunks/s", FmtInt(float64(broke)))
			if always > 0 {
				fmt.Fprintf(&b, " and in every run from %s/s", FmtInt(float64(always)))
			}
			if survived > 0 {
				fmt.Fprintf(&b, " (it completed every run at %s/s)", FmtInt(float64(survived)))
			}
		}
		b.WriteString(". ")
	}
	for _, p := range r.Paced {
		if p.Rate == 1_000 {
			fmt.Fprintf(&b, "At 1,000 chunks/s the gateway's p99 latency is %s against the floor's %s. ",
				FmtDurF(Median(oks(p.Runs["gateway"], p99))), FmtDurF(Median(oks(p.Runs["floor"], p99))))
		}
	}
	if i := r.Idle; i != nil && i.Opened > 0 {
		fmt.Fprintf(&b, "An idle session costs the gateway %s of RSS. ", KiB(i.PerSession()))
	}
	return strings.TrimSpace(b.String())
}

// Summary is the short account printed at the end of a run.
func (r *Report) Summary() string {
	var b strings.Builder
	b.WriteString("acpbench: " + r.headline() + "\n")
	b.WriteString("acpbench: targets\n")
	for _, v := range r.verdicts() {
		fmt.Fprintf(&b, "  %-55s %-13s %s\n", v.Figure, strings.Trim(v.mark(), "*"), v.Measured)
	}
	return b.String()
}
