package report

import "github.com/acpgate/acpgate/bench/internal/job"

// naiveMD compares the gateway on the naive agent with the naive floor:
// throughput ratios and coalesced events on the floods, p99 over the
// floor's at the paced rates, run by run.
func (r *Report) naiveMD(w func(string, ...any)) {
	floor := job.OnNaive("floor")
	gws := job.WithBaseline([]string{job.OnNaive(job.Relay), job.OnNaive("gateway"), job.OnNaive(job.GatewayEach), job.OnNaive(job.GatewayStream)}, r.Baseline != "")
	var floods []ShapeResult
	for _, sr := range r.Throughput {
		if len(sr.Runs[floor]) > 0 {
			floods = append(floods, sr)
		}
	}
	if len(floods) == 0 && len(r.Paced) == 0 {
		return
	}
	w("## Against the naive floor\n\n")
	w("The naive agent (`acpbench agent`) writes each stamped `agent_message_chunk` line with a write of its own, as soon as it is due (unpaced: as fast as the pipe takes them), where the test agent stamps a whole burst into one buffer first; **floor/naive** reads it as the floor reads (a `bufio.Reader`, one `json.Unmarshal` per line), and the gateway runs the same agent. Ratios and differences are taken run by run (median, range).\n\n")
	if len(floods) > 0 {
		w("| flood | floor/naive chunks/s | client | chunks/s | / floor/naive | chunk events per run |\n|---|---|---|---|---|---|\n")
		for _, sr := range floods {
			fr := Median(oks(sr.Runs[floor], job.Result.Rate))
			for _, c := range gws {
				rs := sr.Runs[c]
				if len(rs) == 0 {
					continue
				}
				w("| %s × %s | %s | %s | %s | %s | %s |\n", FmtInt(float64(sr.Shape.N)), size(sr.Shape.Size), FmtInt(fr), c,
					mmm(oks(rs, job.Result.Rate), FmtInt), mmm(ratios(rs, sr.Runs[floor], job.Result.Rate), fmtRatio),
					mmm(oks(rs, func(x job.Result) float64 { return float64(x.Events) }), FmtInt))
			}
		}
		w("\n")
	}
	var paced []PacedResult
	for _, p := range r.Paced {
		if len(p.Runs[floor]) > 0 {
			paced = append(paced, p)
		}
	}
	if len(paced) > 0 {
		w("| pace | floor/naive p99 | client | p99 | p99 − floor/naive p99 |\n|---|---|---|---|---|\n")
		for _, p := range paced {
			for _, c := range gws {
				rs := p.Runs[c]
				if len(rs) == 0 {
					continue
				}
				w("| %s/s × %s | %s | %s | %s | %s |\n", FmtInt(float64(p.Rate)), size(p.Size), mmm(oks(p.Runs[floor], p99), FmtDurF), c,
					mmm(oks(rs, p99), FmtDurF), mmm(p99Diffs(rs, p.Runs[floor]), FmtDurF))
			}
		}
		w("\n")
		if len(paced[0].Runs[job.OnNaive(job.Relay)]) > 0 {
			w("%s\n\n", relayRow)
		}
	}
}
