package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/acpgate/acpgate/bench/internal/clients"
	"github.com/acpgate/acpgate/bench/internal/job"
	"github.com/acpgate/acpgate/bench/internal/proc"
	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// The turn store's section: what journaling every turn to SQLite costs
// against keeping it in memory, what replaying a journal is worth, and
// what a watcher that never reads costs the gateway.

// storeResult is what the store section measured.
type storeResult struct {
	// Flood is the unpaced flood run by the gateway-stream client on a
	// sqlite gateway (Runs[GatewayStream]) and a memory gateway
	// (Runs[GatewayStreamMemory]), back to back; Runs[watch][i] replays
	// the sqlite turn of run i with WatchTurn.
	Flood shape                   `json:"flood"`
	Runs  map[string][]job.Result `json:"runs"`
	// Paced is gateway-stream at PacedRate on both stores, back to back.
	PacedRate int                     `json:"paced_rate"`
	PacedN    int                     `json:"paced_n"`
	Paced     map[string][]job.Result `json:"paced"`
	Stall     *stallResult            `json:"stall"`
	// StallControl is the same flood with nobody watching: what the flood
	// costs by itself.
	StallControl *stallResult `json:"stall_control"`
}

// stallResult is a flood watched by a client that never reads.
type stallResult struct {
	Watched      bool  `json:"watched"`
	N            int   `json:"n"`
	Size         int   `json:"size"`
	MaxTurnBytes int64 `json:"max_turn_bytes"`
	// Idle is the gateway's RSS before the turn; Peak the largest RSS
	// sampled (every 50 ms) from the call to the turn's end; HWM its
	// VmHWM at the end.
	Idle    int64      `json:"idle"`
	Peak    int64      `json:"peak"`
	HWM     int64      `json:"hwm"`
	Samples []bpSample `json:"samples"`
	// Bytes is the text the Prompt client received, in Turn.
	Bytes int64         `json:"bytes"`
	Turn  time.Duration `json:"turn"`
	// WatcherBytes is the text the stalled watcher then read, to the
	// terminal, in WatcherTime once it started reading.
	WatcherBytes int64         `json:"watcher_bytes"`
	WatcherTime  time.Duration `json:"watcher_time"`
	// Disk is the store's size on disk once the turn had ended.
	Disk int64  `json:"disk"`
	Err  string `json:"err,omitempty"`
}

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

func (s *stallResult) ok() bool {
	text := int64(s.N) * int64(s.Size)
	return s.Err == "" && s.Bytes == text && (!s.Watched || s.WatcherBytes == text)
}

// stallBound is how far above its idle RSS the gateway may go while a
// watcher stalls: the bound.
const stallBound = 64 << 20

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
	res := storeResult{Flood: p.storeFlood, Runs: map[string][]job.Result{}, PacedRate: p.storePacedRate, Paced: map[string][]job.Result{}}
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
			d.logf("   %s run %d %-21s %s (%d events)", sh.Name, rep+1, c, brief(r, sh.N), r.Events)
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
		d.logf("   replay of run %d  %s (%d events); live %s chunks/s", rep+1, brief(r, sh.N), r.Events, fmtInt(live.Rate()))
	}
	for rep := range p.runs {
		for _, c := range order(rep) {
			r := d.job(on[c], job.Job{Client: c, N: res.PacedN, Size: p.pacedSize, Rate: p.storePacedRate, Latency: true, Timeout: 5 * time.Minute})
			d.check(fmt.Sprintf("store paced %d/s", p.storePacedRate), r)
			res.Paced[c] = append(res.Paced[c], r)
			d.logf("   %d/s run %d %-21s %s", p.storePacedRate, rep+1, c, brief(r, res.PacedN))
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
		d.rep.Store = &storeResult{}
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
func (d *driver) stall(watch bool) (*stallResult, error) {
	p := d.plan
	text := int64(p.stallN) * int64(p.stallSize)
	// A chunk event carries its text twice (text, and content's text), so
	// the journal is a little over twice the text: at 2 GiB the 1 GiB flood
	// reaches limits.max_turn_bytes and its turn is cancelled.
	res := &stallResult{Watched: watch, N: p.stallN, Size: p.stallSize, MaxTurnBytes: max(4<<30, 4*text)}
	g, err := d.gateway(gatewayConf{store: "sqlite", maxTurnBytes: res.MaxTurnBytes})
	if err != nil {
		return res, err
	}
	defer d.stopGateway(g)
	// The journal goes to disk: its files under the state directory.
	var sfs syscall.Statfs_t
	if err := syscall.Statfs(g.stateDir, &sfs); err == nil {
		if need, free := 3*text+(1<<30), int64(sfs.Bavail)*sfs.Bsize; free < need {
			return res, fmt.Errorf("the stalled watcher's flood needs about %s of disk for its journal; %s is free", mib(need), mib(free))
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
	fail := func(err error) (*stallResult, error) {
		sampled()
		res.Err = err.Error()
		return res, err
	}
	start := time.Now()
	st, err := client.Prompt(ctx, &acpgatev1.PromptRequest{Agent: job.FloodAgent, Text: fmt.Sprintf("flood %d %d\n", p.stallN, p.stallSize), OmitOutcomeText: true, CoalesceChunks: true})
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
		d.logf("   nobody watching: %s flooded in %s; gateway RSS idle %s, peak %s (+%s), VmHWM %s; store %s on disk",
			mib(text), res.Turn.Round(time.Millisecond), mib(res.Idle), mib(res.Peak), mib(res.Peak-res.Idle), mib(res.HWM), mib(res.Disk))
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
	d.logf("   stalled watcher: %s flooded in %s; gateway RSS idle %s, peak %s (+%s), VmHWM %s; the watcher then read %s in %s",
		mib(text), res.Turn.Round(time.Millisecond), mib(res.Idle), mib(res.Peak), mib(res.Peak-res.Idle), mib(res.HWM), mib(res.WatcherBytes), res.WatcherTime.Round(time.Millisecond))
	if res.Err != "" {
		return res, errors.New(res.Err)
	}
	return res, nil
}

// storeVerdicts are the store's targets.
func (r *report) storeVerdicts() []verdict {
	st := r.Store
	sh := "64 B"
	if st != nil {
		sh = size(st.Flood.Size)
	}
	flood := verdict{Figure: "unpaced flood, " + sh + " chunks, gateway-stream: `store: sqlite` / `store: memory`", Target: "≥ 0.85, zero loss"}
	paced := verdict{Figure: "paced 20,000 chunks/s, gateway-stream: p99 latency with `store: sqlite`", Target: "≤ `store: memory` p99 + 0.5 ms"}
	replay := verdict{Figure: "`WatchTurn` replay of a finished 200,000-chunk turn (sqlite), from `after_seq` 0 / the turn's live rate", Target: "≥ 1, zero loss"}
	stall := verdict{Figure: "a `WatchTurn` client that never reads, during a 1 GiB flood (sqlite)", Target: "gateway RSS ≤ idle RSS + 64 MiB"}
	if st != nil {
		if st.PacedRate > 0 {
			paced.Figure = fmt.Sprintf("paced %s chunks/s, gateway-stream: p99 latency with `store: sqlite`", fmtInt(float64(st.PacedRate)))
		}
		replay.Figure = fmt.Sprintf("`WatchTurn` replay of a finished %s-chunk turn (sqlite), from `after_seq` 0 / the turn's live rate", fmtInt(float64(st.Flood.N)))
		sq, mem, wa := st.Runs[job.GatewayStream], st.Runs[job.GatewayStreamMemory], st.Runs[job.Watch]
		if rat := ratios(sq, mem, job.Result.Rate); len(rat) > 0 {
			lost, ooo, _ := lostOf(append(slices.Clone(sq), mem...))
			errs := len(sq) + len(mem) - len(oks(sq, job.Result.Rate)) - len(oks(mem, job.Result.Rate))
			flood.Known = true
			flood.Measured = fmt.Sprintf("%s; %d lost, %d out of order, %d failed runs", mmm(rat, fmtRatio), lost, ooo, errs)
			flood.Met = median(rat) >= 0.85 && lost == 0 && ooo == 0 && errs == 0
		}
		s, m := median(oks(st.Paced[job.GatewayStream], p99)), median(oks(st.Paced[job.GatewayStreamMemory], p99))
		if !math.IsNaN(s) && !math.IsNaN(m) {
			paced.Known = true
			paced.Measured = fmt.Sprintf("sqlite %s, memory %s (sqlite − memory, run by run: %s)", fmtDurF(s), fmtDurF(m), mmm(p99Diffs(st.Paced[job.GatewayStream], st.Paced[job.GatewayStreamMemory]), fmtDurF))
			paced.Met = s <= m+0.5e6 && len(oks(st.Paced[job.GatewayStream], p99)) == len(st.Paced[job.GatewayStream])
		}
		if rat := ratios(wa, sq, job.Result.Rate); len(rat) > 0 {
			lost, ooo, _ := lostOf(wa)
			errs := len(wa) - len(oks(wa, job.Result.Rate))
			replay.Known = true
			replay.Measured = fmt.Sprintf("%s (replay %s chunks/s, live %s); %d lost, %d out of order, %d failed runs",
				mmm(rat, fmtRatio), fmtInt(median(oks(wa, job.Result.Rate))), fmtInt(median(oks(sq, job.Result.Rate))), lost, ooo, errs)
			replay.Met = median(rat) >= 1 && lost == 0 && ooo == 0 && errs == 0
		}
		if x := st.Stall; x != nil && x.Peak > 0 {
			stall.Figure = fmt.Sprintf("a `WatchTurn` client that never reads, during a %s flood (sqlite)", mib(int64(x.N)*int64(x.Size)))
			stall.Known = true
			stall.Measured = fmt.Sprintf("idle %s, peak %s sampled (+%s), VmHWM %s; the watcher then read all %s", mib(x.Idle), mib(x.Peak), mib(x.Peak-x.Idle), mib(x.HWM), mib(x.WatcherBytes))
			if x.Err != "" {
				stall.Measured += "; error: " + shortErr(x.Err)
			}
			stall.Met = x.ok() && x.Peak-x.Idle <= stallBound
			if c := st.StallControl; c != nil && c.Peak > 0 {
				stall.Measured += fmt.Sprintf("; control, nobody watching: peak +%s", mib(c.Peak-c.Idle))
			}
		}
	}
	return []verdict{flood, paced, replay, stall}
}

// labelled names the runs of one row of a flood table.
type labelled struct{ key, label string }

// floodTable writes the table of unpaced floods whose runs are keyed by
// the rows' keys, the first column headed first; a row without runs is
// left out.
func floodTable(w func(string, ...any), first string, runs map[string][]job.Result, rows []labelled) {
	w("| %s | chunks/s | MB/s | turn | events | CPU µs/chunk | runs |\n|---|---|---|---|---|---|---|\n", first)
	for _, c := range rows {
		rs := runs[c.key]
		if len(rs) == 0 {
			continue
		}
		lost, ooo, _ := lostOf(rs)
		w("| %s | %s | %s | %s | %s | %s (acpgate %s) | completed %d of %d; %d lost, %d out of order |\n", c.label,
			mmm(oks(rs, job.Result.Rate), fmtInt), mmm(oks(rs, job.Result.MBps), fmt1),
			mmm(oks(rs, func(r job.Result) float64 { return float64(r.Turn) }), fmtDurF),
			mmm(oks(rs, func(r job.Result) float64 { return float64(r.Events) }), fmtInt),
			mmm(oks(rs, cpuPerChunk), fmtUs), mmm(oks(rs, gatewayCPUPerChunk), fmtUs),
			len(oks(rs, job.Result.Rate)), len(rs), lost, ooo)
	}
}

// pacedTable writes the table of paced runs, keyed by the rows' keys, one
// row per store.
func pacedTable(w func(string, ...any), runs map[string][]job.Result, rows []labelled) {
	w("| store | achieved chunks/s | p50 | p99 | max | runs |\n|---|---|---|---|---|---|\n")
	for _, c := range rows {
		rs := runs[c.key]
		w("| %s | %s | %s | %s | %s | completed %d of %d |\n", c.label, mmm(oks(rs, job.Result.StreamRate), fmtInt),
			fmtDurF(median(oks(rs, p50))), mmm(oks(rs, p99), fmtDurF), fmtDurF(median(oks(rs, pmax))), len(oks(rs, p99)), len(rs))
	}
}

// p99Diffs pairs run i of a and b and returns the differences of their p99.
func p99Diffs(a, b []job.Result) []float64 {
	var d []float64
	for i := range min(len(a), len(b)) {
		if a[i].OK() && b[i].OK() {
			d = append(d, p99(a[i])-p99(b[i]))
		}
	}
	return d
}

func (r *report) storeMD(w func(string, ...any)) {
	st := r.Store
	if st == nil {
		return
	}
	w("## The turn store\n\n")
	w("Every turn's events are journaled in the gateway's store (`store: sqlite`, the default, a file in `state_dir`; or `store: memory`), and every stream — `Prompt` and `WatchTurn` alike — reads the turn's journal, each event encoded once. The sections above ran on the default, `store: sqlite`, each gateway with a state directory of its own. Here the gateway-stream client runs on two gateways started side by side, one per store, alternating which goes first in each repetition.\n\n")
	sh := st.Flood
	w("### %s chunks × %s, unpaced\n\n", fmtInt(float64(sh.N)), size(sh.Size))
	floodTable(w, "client", st.Runs, []labelled{
		{job.GatewayStream, "gateway-stream, `store: sqlite`"},
		{job.GatewayStreamMemory, "gateway-stream, `store: memory`"},
		{job.Watch, "`WatchTurn` replay of the sqlite turn, `after_seq` 0"},
	})
	w("\nRatios, run by run: sqlite / memory **%s**; replay / the same turn live **%s**. ",
		mmm(ratios(st.Runs[job.GatewayStream], st.Runs[job.GatewayStreamMemory], job.Result.Rate), fmtRatio),
		mmm(ratios(st.Runs[job.Watch], st.Runs[job.GatewayStream], job.Result.Rate), fmtRatio))
	w("The replay's turn time runs from the `WatchTurn` call to its terminal, on a new connection; it reads what the live stream carried, byte for byte (the coalesced events, as many as in the *events* column), checked as the live stream is: every chunk's index and the outcome's text length.\n\n")

	if len(st.Paced) > 0 {
		w("### Paced %s chunks/s, %s × %s\n\n", fmtInt(float64(st.PacedRate)), fmtInt(float64(st.PacedN)), size(r.pacedSize()))
		pacedTable(w, st.Paced, []labelled{{job.GatewayStream, "`store: sqlite`"}, {job.GatewayStreamMemory, "`store: memory`"}})
		w("\nsqlite p99 − memory p99, run by run: %s.\n\n", mmm(p99Diffs(st.Paced[job.GatewayStream], st.Paced[job.GatewayStreamMemory]), fmtDurF))
	}

	if x := st.Stall; x != nil {
		text := int64(x.N) * int64(x.Size)
		w("### A watcher that never reads\n\n")
		w("One turn of the test agent's `flood %d %d` (%s of text) on a gateway with `store: sqlite` and `limits.max_turn_bytes: %d` (a chunk event carries its text twice, so the journal is about twice the text and the default 1 GiB, or 2 GiB, would cancel the turn), read to the end by a gateway-stream `Prompt` client. When the turn starts, a second client, on a connection of fixed 64 KiB flow-control windows (`grpc.WithInitialWindowSize`, `grpc.WithInitialConnWindowSize`), calls `WatchTurn` from `after_seq` 0 and never calls `Recv`, so the gateway's sender for it stalls as soon as the windows are full. acpgate's RSS is sampled every 50 ms from the call to the turn's end.\n\n", x.N, x.Size, mib(text), x.MaxTurnBytes)
		w("| | |\n|---|---|\n")
		w("| text the `Prompt` client received | %s of %s, in %s |\n", mib(x.Bytes), mib(text), fmtDurF(float64(x.Turn)))
		w("| acpgate RSS, idle (before the call) | %s |\n", mib(x.Idle))
		w("| acpgate RSS, peak sampled during the flood | %s (+%s) |\n", mib(x.Peak), mib(x.Peak-x.Idle))
		w("| acpgate VmHWM at the turn's end | %s |\n", mib(x.HWM))
		if c := st.StallControl; c != nil && c.Peak > 0 {
			w("| control: the same flood on a fresh gateway, nobody watching | idle %s, peak sampled %s (+%s), VmHWM %s, in %s |\n", mib(c.Idle), mib(c.Peak), mib(c.Peak-c.Idle), mib(c.HWM), fmtDurF(float64(c.Turn)))
		}
		w("| the watcher, reading once the turn had ended | %s in %s |\n", mib(x.WatcherBytes), fmtDurF(float64(x.WatcherTime)))
		if x.Disk > 0 {
			w("| the store on disk after the turn | %s (a chunk event carries its text twice: `text` and `content`) |\n", mib(x.Disk))
		}
		if x.Err != "" {
			w("| error | %s |\n", shortErr(x.Err))
		}
		w("\n")
		if len(x.Samples) > 0 {
			w("| time | text received by the `Prompt` client | acpgate RSS |\n|---|---|---|\n")
			step := max(1, len(x.Samples)/10)
			for k := 0; k < len(x.Samples); k += step {
				if k+step >= len(x.Samples) {
					k = len(x.Samples) - 1
				}
				s := x.Samples[k]
				w("| %s | %s | %s |\n", fmtDurF(float64(s.At.Round(10*time.Millisecond))), mib(s.Read), mib(s.RSS))
			}
			w("\n")
		}
	}
}

// pacedSize is the paced sections' chunk size.
func (r *report) pacedSize() int {
	if len(r.Paced) > 0 {
		return r.Paced[0].Size
	}
	return 64
}
