package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/acpgate/acpgate/bench/internal/job"
	"github.com/acpgate/acpgate/bench/internal/proc"
	"github.com/acpgate/acpgate/bench/internal/report"
)

// The turns section measures what users' load looks like: many agents
// streaming slowly at once, not one flood. N simultaneous one-shot turns,
// each an LLM-like stream (plan.llm), one client process per turn (as N
// users' clients would be: no turn shares a client's heap, scheduler or
// connection with another), on the naive agent, for the floor and for the
// gateway in the same rounds. Every turn's latency (arrival minus the
// agent's send stamp) has its own p99; the section reports, per N, the
// median and the worst of those per-turn p99s.

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
	relay, err := d.relay()
	if err != nil {
		return err
	}
	defer d.stopGateway(relay)
	p := d.plan
	res := report.TurnsResult{Rate: p.llm.rate, Chunks: p.llm.n, Size: p.llm.size}
	for _, n := range p.turnsN {
		res.Points = append(res.Points, report.TurnsPoint{N: n, Runs: map[string][][]job.Result{}})
	}
	for round := range p.turnsRuns {
		for i := range res.Points {
			pt := &res.Points[i]
			for _, c := range report.TurnsOrder(round, base != nil) {
				j := job.ForLabel(c, p.llm.n, p.llm.size)
				j.Rate, j.Latency, j.Timeout = p.llm.rate, true, 2*time.Minute
				rs := d.simultaneous(serverFor(c, servers{own: g, base: base, relay: relay}), j, pt.N)
				for _, r := range rs {
					d.check(fmt.Sprintf("%d simultaneous turns", pt.N), r)
				}
				pt.Runs[c] = append(pt.Runs[c], rs)
				med, worst := report.TurnsP99(rs)
				first, last := report.TurnsFirst(rs)
				logf("   %3d turns round %d %-22s per-turn p99 median %s, worst %s; first chunk median %s, last %s", pt.N, round+1, c, report.FmtDurF(med), report.FmtDurF(worst), report.FmtDurF(first), report.FmtDurF(last))
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
	res := report.AnswerResult{N: a.N, Size: a.Size, Base: before.RSS}
	res.Result = d.job(g, job.Job{Client: "gateway", N: a.N, Size: a.Size, Timeout: 5 * time.Minute})
	d.check("answer", res.Result)
	after, err := proc.ReadMemory(g.pid())
	if err != nil {
		return err
	}
	res.HWM = after.HWM
	logf("   %s answer: peak RSS %s (%.2f× the answer), from %s", report.MiB(int64(a.N)*int64(a.Size)), report.MiB(res.HWM),
		float64(res.HWM)/float64(int64(a.N)*int64(a.Size)), report.MiB(res.Base))
	d.rep.Answer = &res
	return nil
}
