package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/acpgate/acpgate/bench/internal/clients"
	"github.com/acpgate/acpgate/bench/internal/job"
	"github.com/acpgate/acpgate/bench/internal/proc"
	"github.com/acpgate/acpgate/bench/internal/report"
	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// The turn store's section: what journaling every turn to SQLite costs
// against keeping it in memory, what replaying a journal is worth, and
// what a watcher that never reads costs the gateway.

// diskUse is the bytes the files under dir take on disk.
func diskUse(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			if info, err := e.Info(); err == nil {
				if st, ok := info.Sys().(*syscall.Stat_t); ok {
					n += st.Blocks * 512
				}
			}
		}
		return nil
	})
	return n
}

func (d *driver) storeSection() error {
	p := d.plan
	sqlite, err := d.gateway(gatewayConf{store: "sqlite"})
	if err != nil {
		return err
	}
	memory, err := d.gateway(gatewayConf{store: "memory"})
	if err != nil {
		d.stopGateway(sqlite)
		return err
	}
	res := report.StoreResult{Flood: p.storeFlood, Runs: map[string][]job.Result{}, PacedRate: p.storePacedRate, Paced: map[string][]job.Result{}}
	res.PacedN = max(100, int(float64(p.storePacedRate)*p.pacedSeconds))
	on := map[string]*gatewayProc{job.GatewayStream: sqlite, job.GatewayStreamMemory: memory}
	order := func(rep int) []string { // alternate which store goes first
		if rep%2 == 0 {
			return []string{job.GatewayStream, job.GatewayStreamMemory}
		}
		return []string{job.GatewayStreamMemory, job.GatewayStream}
	}
	sh := p.storeFlood
	for rep := range sh.Runs {
		for _, c := range order(rep) {
			r := d.job(on[c], job.Job{Client: c, N: sh.N, Size: sh.Size, Timeout: 5 * time.Minute})
			d.check("store "+sh.Name, r)
			res.Runs[c] = append(res.Runs[c], r)
			logf("   %s run %d %-21s %s (%d events)", sh.Name, rep+1, c, brief(r, sh.N), r.Events)
		}
		live := res.Runs[job.GatewayStream][rep]
		if live.TurnID == "" {
			d.fail("store %s: the sqlite turn of run %d has no turn id (%s)", sh.Name, rep+1, live.Err)
			res.Runs[job.Watch] = append(res.Runs[job.Watch], job.Result{Client: job.Watch, Err: "no turn to replay"})
			continue
		}
		r := d.job(sqlite, job.Job{Client: job.Watch, TurnID: live.TurnID, N: sh.N, Size: sh.Size, Timeout: 5 * time.Minute})
		d.check("WatchTurn replay", r)
		res.Runs[job.Watch] = append(res.Runs[job.Watch], r)
		logf("   replay of run %d  %s (%d events); live %s chunks/s", rep+1, brief(r, sh.N), r.Events, report.FmtInt(live.Rate()))
	}
	for rep := range p.runs {
		for _, c := range order(rep) {
			r := d.job(on[c], job.Job{Client: c, N: res.PacedN, Size: p.pacedSize, Rate: p.storePacedRate, Latency: true, Timeout: 5 * time.Minute})
			d.check(fmt.Sprintf("store paced %d/s", p.storePacedRate), r)
			res.Paced[c] = append(res.Paced[c], r)
			logf("   %d/s run %d %-21s %s", p.storePacedRate, rep+1, c, brief(r, res.PacedN))
		}
	}
	d.stopGateway(sqlite)
	d.stopGateway(memory)
	d.rep.Store = &res
	return nil
}

// stallSection measures the stalled watcher (a section of its own, since it
// floods a gibibyte through the store).
func (d *driver) stallSection() error {
	if d.rep.Store == nil {
		d.rep.Store = &report.StoreResult{}
	}
	var err error
	if d.rep.Store.StallControl, err = d.stall(false); err != nil {
		return err
	}
	d.rep.Store.Stall, err = d.stall(true)
	return err
}

// stall floods stallN × stallSize into a turn on a sqlite gateway, read to
// the end by a gateway-stream Prompt client, while a WatchTurn client on a
// connection of small fixed flow-control windows opens the turn's stream
// and does not read it; the gateway's RSS is sampled every 50 ms. Then the
// watcher reads the whole turn, which must all be there.
// Without watch, nobody watches: the flood's own cost.
func (d *driver) stall(watch bool) (*report.StallResult, error) {
	p := d.plan
	text := int64(p.stallN) * int64(p.stallSize)
	// A chunk event carries its text twice (text, and content's text), so
	// the journal is a little over twice the text: at 2 GiB the 1 GiB flood
	// reaches limits.max_turn_bytes and its turn is cancelled.
	res := &report.StallResult{Watched: watch, N: p.stallN, Size: p.stallSize, MaxTurnBytes: max(4<<30, 4*text)}
	g, err := d.gateway(gatewayConf{store: "sqlite", maxTurnBytes: res.MaxTurnBytes})
	if err != nil {
		return res, err
	}
	defer d.stopGateway(g)
	// The journal goes to disk: its files under the state directory.
	var sfs syscall.Statfs_t
	if err := syscall.Statfs(g.stateDir, &sfs); err == nil {
		if need, free := 3*text+(1<<30), int64(sfs.Bavail)*sfs.Bsize; free < need {
			return res, fmt.Errorf("the stalled watcher's flood needs about %s of disk for its journal; %s is free", report.MiB(need), report.MiB(free))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	conn, client, err := clients.DialGateway(ctx, g.addr)
	if err != nil {
		return res, err
	}
	defer conn.Close()
	wconn, err := grpc.NewClient(g.addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		// Fixed and small, so that the unread stream really stalls the
		// gateway's sender (no BDP estimation growing them).
		grpc.WithInitialWindowSize(64<<10),
		grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		return res, err
	}
	defer wconn.Close()
	watcher := acpgatev1.NewAgentGatewayClient(wconn)
	if _, err := watcher.ListAgents(ctx, &acpgatev1.ListAgentsRequest{}, grpc.WaitForReady(true)); err != nil {
		return res, err
	}

	d.waitQuiet()
	time.Sleep(time.Second)
	idle, err := proc.ReadMemory(g.pid())
	if err != nil {
		return res, err
	}
	res.Idle = idle.RSS
	var read atomic.Int64
	stop := sampleRSS(g.pid(), 50*time.Millisecond, read.Load)
	sampled := func() {
		res.Samples = stop()
		for _, x := range res.Samples {
			res.Peak = max(res.Peak, x.RSS)
		}
	}
	fail := func(err error) (*report.StallResult, error) {
		sampled()
		res.Err = err.Error()
		return res, err
	}
	start := time.Now()
	st, err := client.Prompt(ctx, &acpgatev1.PromptRequest{Agent: job.FloodAgent, Text: fmt.Sprintf("flood %d %d\n", p.stallN, p.stallSize), OmitOutcomeText: true})
	if err != nil {
		return fail(err)
	}
	var (
		wst      acpgatev1.AgentGateway_WatchTurnClient
		terminal *acpgatev1.PromptEvent
	)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	var seq uint64
	for terminal == nil {
		ev, err := st.Recv()
		if err != nil {
			return fail(fmt.Errorf("the Prompt stream: %w", err))
		}
		if ev.GetHeartbeat() != nil {
			continue // not journaled: no seq
		}
		if seq++; ev.GetSeq() != seq {
			return fail(fmt.Errorf("the Prompt stream: event seq %d where %d was due, after %d bytes", ev.GetSeq(), seq, read.Load()))
		}
		switch e := ev.GetEvent().(type) {
		case *acpgatev1.PromptEvent_Started:
			if !watch {
				break
			}
			// The watcher opens its stream and never calls Recv.
			if wst, err = watcher.WatchTurn(wctx, &acpgatev1.WatchTurnRequest{TurnId: e.Started.GetTurnId()}); err != nil {
				return fail(fmt.Errorf("WatchTurn: %w", err))
			}
		case *acpgatev1.PromptEvent_AgentMessageChunk:
			read.Add(int64(len(e.AgentMessageChunk.GetText())))
		case *acpgatev1.PromptEvent_Outcome, *acpgatev1.PromptEvent_Error:
			terminal = ev
		}
	}
	res.Turn = time.Since(start)
	sampled()
	res.Bytes = read.Load()
	if m, err := proc.ReadMemory(g.pid()); err == nil {
		res.HWM = m.HWM
	}
	res.Disk = diskUse(g.stateDir)
	if o := terminal.GetOutcome(); o == nil || o.GetTextBytes() != uint64(text) || res.Bytes != text {
		res.Err = fmt.Sprintf("the flood's turn ended with %v after %d of %d bytes", terminal.GetEvent(), res.Bytes, text)
		return res, errors.New(res.Err)
	}
	if !watch {
		logf("   nobody watching: %s flooded in %s; gateway RSS idle %s, peak %s (+%s), VmHWM %s; store %s on disk",
			report.MiB(text), res.Turn.Round(time.Millisecond), report.MiB(res.Idle), report.MiB(res.Peak), report.MiB(res.Peak-res.Idle), report.MiB(res.HWM), report.MiB(res.Disk))
		return res, nil
	}
	if wst == nil {
		res.Err = "the turn had no started event"
		return res, errors.New(res.Err)
	}
	// Now the watcher reads: every byte must still be there.
	wstart := time.Now()
	seq = 0
	for {
		ev, err := wst.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			res.Err = fmt.Sprintf("the watcher, reading after the flood: %v", err)
			break
		}
		if ev.GetHeartbeat() != nil {
			continue
		}
		if seq++; ev.GetSeq() != seq {
			res.Err = fmt.Sprintf("the watcher got seq %d where %d was due", ev.GetSeq(), seq)
			break
		}
		res.WatcherBytes += int64(len(ev.GetAgentMessageChunk().GetText()))
	}
	res.WatcherTime = time.Since(wstart)
	if res.Err == "" && res.WatcherBytes != text {
		res.Err = fmt.Sprintf("the watcher read %d of %d bytes", res.WatcherBytes, text)
	}
	logf("   stalled watcher: %s flooded in %s; gateway RSS idle %s, peak %s (+%s), VmHWM %s; the watcher then read %s in %s",
		report.MiB(text), res.Turn.Round(time.Millisecond), report.MiB(res.Idle), report.MiB(res.Peak), report.MiB(res.Peak-res.Idle), report.MiB(res.HWM), report.MiB(res.WatcherBytes), res.WatcherTime.Round(time.Millisecond))
	if res.Err != "" {
		return res, errors.New(res.Err)
	}
	return res, nil
}
