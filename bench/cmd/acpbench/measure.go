package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/acpgate/acpgate/bench/internal/job"
	"github.com/acpgate/acpgate/bench/internal/proc"
	"github.com/acpgate/acpgate/bench/internal/report"
)

// foreignThreshold is the foreign load (cores, on average over a
// measurement) above which a measurement is repeated.
const foreignThreshold = 0.2

// job runs one measurement in a process of its own. It first waits for the
// machine to be quiet, and repeats the measurement (up to d.retries times)
// when other processes used more than foreignThreshold cores during it,
// keeping the least disturbed attempt.
func (d *driver) job(g *gatewayProc, j job.Job) job.Result {
	d.interference.Threshold = foreignThreshold
	var best job.Result
	for attempt := 0; ; attempt++ {
		d.waitQuiet()
		r := d.attempt(g, j)
		if attempt == 0 || r.Foreign < best.Foreign {
			best = r
		}
		limit := foreignThreshold*float64(r.Wall) + float64(50*time.Millisecond)
		if float64(r.Foreign) <= limit || attempt >= d.retries || r.Err != "" && !r.Broke {
			break
		}
		d.interference.Repeated++
		logf("   (other processes used %.2f cores during that %s measurement: repeating it)", r.ForeignCores(), j.Client)
	}
	d.interference.Jobs++
	d.interference.Foreign = append(d.interference.Foreign, best.ForeignCores())
	if float64(best.Foreign) > foreignThreshold*float64(best.Wall)+float64(50*time.Millisecond) {
		d.interference.Disturbed++
	}
	return best
}

// waitQuiet waits until the machine's busy CPU over 300 ms is under a tenth
// of a core (the harness's own processes are idle between measurements),
// or d.quietWait has passed.
func (d *driver) waitQuiet() {
	if d.quietWait <= 0 {
		return
	}
	start := time.Now()
	for {
		b0, err := proc.ReadSysBusy()
		if err != nil {
			return
		}
		time.Sleep(300 * time.Millisecond)
		b1, _ := proc.ReadSysBusy()
		if float64(b1-b0) < 0.1*float64(300*time.Millisecond) {
			break
		}
		if time.Since(start) > d.quietWait {
			d.interference.NotQuiet++
			break
		}
	}
	if w := time.Since(start) - 300*time.Millisecond; w > 100*time.Millisecond {
		d.interference.Waited += w
	}
}

// attempt runs the client process once and measures the CPU that other
// processes used meanwhile: the machine's busy time less the client's
// (with its agents), the gateway's (with the agents it reaped) and the
// driver's own.
func (d *driver) attempt(g *gatewayProc, j job.Job) job.Result {
	j.Agent = d.agent
	if g != nil {
		j.Addr = g.addr
		j.GatewayPID = g.pid()
	}
	if j.Timeout == 0 {
		j.Timeout = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), j.Timeout+30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, d.self, "client", "-job", mustJSON(j))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	var gw0 time.Duration
	if g != nil {
		gw0, _ = proc.ReadTreeCPU(g.pid())
	}
	self0 := proc.SelfCPU()
	var besides0 time.Duration
	if d.besides != nil {
		besides0 = d.besides(g)
	}
	sys0, _ := proc.ReadSysBusy()
	start := time.Now()
	out, err := cmd.Output()
	wall := time.Since(start)
	if g != nil {
		// The gateway reaps a one-shot turn's agent just after the turn;
		// wait for that, so that the agent's CPU is counted as ours.
		for deadline := time.Now().Add(2 * time.Second); len(proc.Children(g.pid())) > 0 && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
	}
	sys1, _ := proc.ReadSysBusy()
	ours := proc.SelfCPU() - self0
	if cmd.ProcessState != nil {
		ours += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	if g != nil {
		gw1, _ := proc.ReadTreeCPU(g.pid())
		ours += gw1 - gw0
	}
	if d.besides != nil {
		ours += d.besides(g) - besides0
	}
	r := job.Result{Client: j.Client}
	if err != nil {
		r.Err = fmt.Sprintf("acpbench client: %v: %s", err, strings.TrimSpace(stderr.String()))
	} else if err := json.Unmarshal(out, &r); err != nil {
		r.Err = fmt.Sprintf("acpbench client printed %q: %v", out, err)
	}
	r.Foreign = max(0, int64(sys1-sys0-ours))
	if r.Wall == 0 {
		r.Wall = int64(wall)
	}
	return r
}

// check records a failure when a result lost, reordered or errored — except
// the peer breaking, which is what it is expected to do under floods.
func (d *driver) check(what string, r job.Result) {
	if r.Client == "peer" && r.Broke {
		return
	}
	if r.Failed() {
		d.fail("%s, %s: lost %d, out of order %d, error: %s", what, r.Client, r.Lost, r.OutOfOrder, r.Err)
	}
}

// brief is a one-line account of a result for the progress log.
func brief(r job.Result, n int) string {
	switch {
	case r.Broke:
		return fmt.Sprintf("broke after %d chunks: %s", r.Chunks, r.Err)
	case r.Err != "":
		return "error: " + r.Err
	}
	s := fmt.Sprintf("%d/%d chunks", r.Chunks, n)
	if r.Turn > 0 {
		s += fmt.Sprintf(", %s chunks/s", report.FmtInt(r.Rate()))
	} else if r.Streams > 1 {
		s += fmt.Sprintf(", %s chunks/s aggregate", report.FmtInt(float64(r.Chunks)/time.Duration(r.Wall).Seconds()))
	}
	if r.Lat != nil {
		s += fmt.Sprintf(", latency p50 %s p99 %s", report.FmtDur(r.Lat.P50), report.FmtDur(r.Lat.P99))
	}
	return s
}

// mustJSON is v as JSON; v is a Job or a Result, which always encode.
func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
