package main

import (
	"fmt"
	"time"

	"github.com/acpgate/acpgate/bench/internal/job"
	"github.com/acpgate/acpgate/bench/internal/proc"
	"github.com/acpgate/acpgate/bench/internal/report"
)

// The sections that measure agents' streams through the gateway against
// the floors: floods (throughput), paced rates, the rates at which the
// SDK peer breaks, the time to first chunk, and many streams at once.

// throughput runs each flood through every client, on a fresh gateway a
// flood.
func (d *driver) throughput() error {
	clients := report.ThroughputClients(d.baseBin != "")
	for _, sh := range d.plan.floods {
		g, err := d.gateway(gatewayConf{})
		if err != nil {
			return err
		}
		base, err := d.startBaseline(g)
		if err != nil {
			return err
		}
		sr := report.ShapeResult{Shape: sh, Runs: map[string][]job.Result{}}
		for rep := range sh.Runs {
			for _, c := range clients {
				j := job.ForLabel(c, sh.N, sh.Size)
				j.Timeout = 5 * time.Minute
				r := d.job(serverFor(c, servers{own: g, base: base}), j)
				r.Client = c
				d.check(sh.Name, r)
				sr.Runs[c] = append(sr.Runs[c], r)
				logf("   %s run %d %-9s %s", sh.Name, rep+1, c, brief(r, sh.N))
			}
		}
		if m, err := proc.ReadMemory(g.pid()); err == nil {
			sr.GatewayHWM = m.HWM
			sr.GatewayRSS = m.RSS
		}
		d.stopGateway(g)
		if base != nil {
			d.stopGateway(base)
		}
		d.rep.Throughput = append(d.rep.Throughput, sr)
	}
	return nil
}

// paced runs each paced rate, and the LLM-like pace, through every client.
func (d *driver) paced() error {
	clients := report.PacedClients(d.baseBin != "")
	var paces []pace
	for _, rate := range d.plan.pacedRates {
		paces = append(paces, pace{rate, max(100, int(float64(rate)*d.plan.pacedSeconds)), d.plan.pacedSize})
	}
	paces = append(paces, d.plan.llm)
	relay, err := d.relay()
	if err != nil {
		return err
	}
	defer d.stopGateway(relay)
	for _, pc := range paces {
		rate, n, size := pc.rate, pc.n, pc.size
		g, err := d.gateway(gatewayConf{})
		if err != nil {
			return err
		}
		base, err := d.startBaseline(g)
		if err != nil {
			return err
		}
		pr := report.PacedResult{Rate: rate, N: n, Size: size, Runs: map[string][]job.Result{}}
		for rep := range d.plan.runs {
			for _, c := range clients {
				j := job.ForLabel(c, n, size)
				j.Rate, j.Latency, j.Timeout = rate, true, 5*time.Minute
				if c == job.FloorLoaded {
					// What acpgate and the gateway's client burned in this
					// repetition, as two busy loops beside the floor.
					gr := pr.Runs["gateway"][rep]
					if !gr.OK() || gr.Turn <= 0 {
						continue
					}
					j.Load = []float64{float64(gr.GatewayCPU) / float64(gr.Turn), float64(gr.CPU) / float64(gr.Turn)}
				}
				r := d.job(serverFor(c, servers{own: g, base: base, relay: relay}), j)
				r.Client = c
				d.check(fmt.Sprintf("paced %d/s", rate), r)
				pr.Runs[c] = append(pr.Runs[c], r)
				logf("   %d/s run %d %-7s %s", rate, rep+1, c, brief(r, n))
			}
		}
		d.stopGateway(g)
		if base != nil {
			d.stopGateway(base)
		}
		d.rep.Paced = append(d.rep.Paced, pr)
	}
	return nil
}

// breakScan finds the rates at which the SDK peer breaks under a flood.
func (d *driver) breakScan() error {
	for _, rate := range d.plan.breakRates {
		n := max(100, int(float64(rate)*d.plan.breakSeconds))
		br := report.BreakResult{Rate: rate, N: n}
		for range d.plan.breakRuns {
			r := d.job(nil, job.Job{Client: "peer", N: n, Size: 64, Rate: rate, Timeout: 2 * time.Minute})
			d.check(fmt.Sprintf("peer at %d/s", rate), r)
			br.Runs = append(br.Runs, r)
		}
		logf("   peer at %d/s: survived %d of %d", rate, br.Survived(), len(br.Runs))
		d.rep.Breaks = append(d.rep.Breaks, br)
	}
	return nil
}

// ttfc measures the time to the first chunk of a one-chunk turn; with a
// baseline, its gateway's turn follows the working tree's in each run.
func (d *driver) ttfc() error {
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
	t := report.TTFCResult{Runs: map[string][]job.Result{}}
	for range d.plan.ttfcRuns {
		for _, c := range report.TTFCClients(base != nil) {
			r := d.job(serverFor(c, servers{own: g, base: base}), job.Job{Client: job.ClientOf(c), N: 1, Size: 64, Launcher: d.launcher, Timeout: time.Minute})
			d.check("time to first chunk", r)
			t.Runs[c] = append(t.Runs[c], r)
		}
	}
	d.rep.TTFC = &t
	return nil
}

// concurrency runs many streams at once through each client.
func (d *driver) concurrency() error {
	g, err := d.gateway(gatewayConf{})
	if err != nil {
		return err
	}
	defer d.stopGateway(g)
	p := d.plan
	c := report.ConcResult{Streams: p.concStreams, N: p.concN, Size: 64, Runs: map[string][]job.Result{}}
	for rep := range p.concRuns {
		for _, client := range []string{"floor", "peer", "gateway"} {
			var gw *gatewayProc
			if client == "gateway" {
				gw = g
			}
			r := d.job(gw, job.Job{Client: client, N: p.concN, Size: 64, Streams: p.concStreams, Timeout: 10 * time.Minute})
			d.check("concurrency", r)
			c.Runs[client] = append(c.Runs[client], r)
			logf("   %d streams run %d %-7s %s", p.concStreams, rep+1, client, brief(r, p.concN*p.concStreams))
		}
	}
	if m, err := proc.ReadMemory(g.pid()); err == nil {
		c.GatewayHWM = m.HWM
	}
	d.rep.Concurrency = &c
	return nil
}
