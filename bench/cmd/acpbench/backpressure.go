package main

import (
	"context"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/acpgate/acpgate/bench/internal/clients"
	"github.com/acpgate/acpgate/bench/internal/job"
	"github.com/acpgate/acpgate/bench/internal/proc"
	"github.com/acpgate/acpgate/bench/internal/report"
)

// backpressure reads a flood at bpReadRate chunks/s and samples the
// gateway's RSS every 100 ms.
func (d *driver) backpressure() error {
	for _, client := range []string{"gateway", job.GatewayStream} {
		res, err := d.backpressureRun(client)
		if err != nil {
			return err
		}
		if client == job.GatewayStream {
			d.rep.BackpressureOmit = res
		} else {
			d.rep.Backpressure = res
		}
	}
	return nil
}

// backpressureRun is one slow-client turn on a fresh gateway.
func (d *driver) backpressureRun(client string) (*report.BPResult, error) {
	g, err := d.gateway(gatewayConf{})
	if err != nil {
		return nil, err
	}
	defer d.stopGateway(g)
	ctx := context.Background()
	conn, gc, err := clients.DialGateway(ctx, g.addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	p := d.plan
	runtime.GC()
	time.Sleep(time.Second)
	base, err := proc.ReadMemory(g.pid())
	if err != nil {
		return nil, err
	}
	res := report.BPResult{N: p.bpN, Size: p.bpSize, ReadRate: p.bpReadRate, Base: base.RSS}
	var read atomic.Int64
	stop := sampleRSS(g.pid(), 100*time.Millisecond, read.Load)
	j := job.Job{Client: client, N: p.bpN, Size: p.bpSize, Latency: true, Timeout: 10 * time.Minute}
	s := clients.NewStream(j)
	tctx, cancel := context.WithTimeout(ctx, j.Timeout)
	clients.GatewayTurn(tctx, gc, j, s, p.bpReadRate, func(n int64) { read.Store(n) })
	cancel()
	res.Samples = stop()
	if m, err := proc.ReadMemory(g.pid()); err == nil {
		res.HWM = m.HWM
	}
	res.Result = clients.Merge(j, client, time.Since(s.Start), proc.CPUMark{}, []*clients.Stream{s})
	d.check("backpressure", res.Result)
	// How far ahead of the client the agent got: when the client read chunk
	// i, the agent had already sent every chunk stamped before that moment.
	k := 0
	for i := range s.Arrived {
		for k < len(s.Sent) && s.Sent[k] <= s.Arrived[i] {
			k++
		}
		res.MaxAhead = max(res.MaxAhead, k-(i+1))
	}
	if n := len(s.Sent); n > 0 {
		res.AgentSpan = time.Duration(s.Sent[n-1] - s.Sent[0])
		res.LastSent = s.Sent[n-1]
		res.ClientSpan = time.Duration(s.Arrived[n-1] - s.Arrived[0])
	}
	logf("   %s read %d chunks at %d/s in %s; RSS max %s over a base of %s; the agent was at most %d chunks ahead",
		client, res.Result.Chunks, p.bpReadRate, res.ClientSpan.Round(time.Millisecond), report.MiB(res.MaxRSS()), report.MiB(res.Base), res.MaxAhead)
	return &res, nil
}
