package report

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/acpgate/acpgate/bench/internal/job"
)

// StoreResult is what the store section measured.
type StoreResult struct {
	// Flood is the unpaced flood run by the gateway-stream client on a
	// sqlite gateway (Runs[GatewayStream]) and a memory gateway
	// (Runs[GatewayStreamMemory]), back to back; Runs[watch][i] replays
	// the sqlite turn of run i with WatchTurn.
	Flood Shape                   `json:"flood"`
	Runs  map[string][]job.Result `json:"runs"`
	// Paced is gateway-stream at PacedRate on both stores, back to back.
	PacedRate int                     `json:"paced_rate"`
	PacedN    int                     `json:"paced_n"`
	Paced     map[string][]job.Result `json:"paced"`
	Stall     *StallResult            `json:"stall"`
	// StallControl is the same flood with nobody watching: what the flood
	// costs by itself.
	StallControl *StallResult `json:"stall_control"`
}

// StallResult is a flood watched by a client that never reads.
type StallResult struct {
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
	Samples []BPSample `json:"samples"`
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

func (s *StallResult) ok() bool {
	text := int64(s.N) * int64(s.Size)
	return s.Err == "" && s.Bytes == text && (!s.Watched || s.WatcherBytes == text)
}

// stallBound is how far above its idle RSS the gateway may go while a
// watcher stalls: the bound.
const stallBound = 64 << 20

// storeVerdicts are the store's targets.
func (r *Report) storeVerdicts() []verdict {
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
			paced.Figure = fmt.Sprintf("paced %s chunks/s, gateway-stream: p99 latency with `store: sqlite`", FmtInt(float64(st.PacedRate)))
		}
		replay.Figure = fmt.Sprintf("`WatchTurn` replay of a finished %s-chunk turn (sqlite), from `after_seq` 0 / the turn's live rate", FmtInt(float64(st.Flood.N)))
		sq, mem, wa := st.Runs[job.GatewayStream], st.Runs[job.GatewayStreamMemory], st.Runs[job.Watch]
		if rat := ratios(sq, mem, job.Result.Rate); len(rat) > 0 {
			lost, ooo, _ := lostOf(append(slices.Clone(sq), mem...))
			errs := len(sq) + len(mem) - len(oks(sq, job.Result.Rate)) - len(oks(mem, job.Result.Rate))
			flood.Known = true
			flood.Measured = fmt.Sprintf("%s; %d lost, %d out of order, %d failed runs", mmm(rat, fmtRatio), lost, ooo, errs)
			flood.Met = Median(rat) >= 0.85 && lost == 0 && ooo == 0 && errs == 0
		}
		s, m := Median(oks(st.Paced[job.GatewayStream], p99)), Median(oks(st.Paced[job.GatewayStreamMemory], p99))
		if !math.IsNaN(s) && !math.IsNaN(m) {
			paced.Known = true
			paced.Measured = fmt.Sprintf("sqlite %s, memory %s (sqlite − memory, run by run: %s)", FmtDurF(s), FmtDurF(m), mmm(p99Diffs(st.Paced[job.GatewayStream], st.Paced[job.GatewayStreamMemory]), FmtDurF))
			paced.Met = s <= m+0.5e6 && len(oks(st.Paced[job.GatewayStream], p99)) == len(st.Paced[job.GatewayStream])
		}
		if rat := ratios(wa, sq, job.Result.Rate); len(rat) > 0 {
			lost, ooo, _ := lostOf(wa)
			errs := len(wa) - len(oks(wa, job.Result.Rate))
			replay.Known = true
			replay.Measured = fmt.Sprintf("%s (replay %s chunks/s, live %s); %d lost, %d out of order, %d failed runs",
				mmm(rat, fmtRatio), FmtInt(Median(oks(wa, job.Result.Rate))), FmtInt(Median(oks(sq, job.Result.Rate))), lost, ooo, errs)
			replay.Met = Median(rat) >= 1 && lost == 0 && ooo == 0 && errs == 0
		}
		if x := st.Stall; x != nil && x.Peak > 0 {
			stall.Figure = fmt.Sprintf("a `WatchTurn` client that never reads, during a %s flood (sqlite)", MiB(int64(x.N)*int64(x.Size)))
			stall.Known = true
			stall.Measured = fmt.Sprintf("idle %s, peak %s sampled (+%s), VmHWM %s; the watcher then read all %s", MiB(x.Idle), MiB(x.Peak), MiB(x.Peak-x.Idle), MiB(x.HWM), MiB(x.WatcherBytes))
			if x.Err != "" {
				stall.Measured += "; error: " + shortErr(x.Err)
			}
			stall.Met = x.ok() && x.Peak-x.Idle <= stallBound
			if c := st.StallControl; c != nil && c.Peak > 0 {
				stall.Measured += fmt.Sprintf("; control, nobody watching: peak +%s", MiB(c.Peak-c.Idle))
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
			mmm(oks(rs, job.Result.Rate), FmtInt), mmm(oks(rs, job.Result.MBps), fmt1),
			mmm(oks(rs, func(r job.Result) float64 { return float64(r.Turn) }), FmtDurF),
			mmm(oks(rs, func(r job.Result) float64 { return float64(r.Events) }), FmtInt),
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
		w("| %s | %s | %s | %s | %s | completed %d of %d |\n", c.label, mmm(oks(rs, job.Result.StreamRate), FmtInt),
			FmtDurF(Median(oks(rs, p50))), mmm(oks(rs, p99), FmtDurF), FmtDurF(Median(oks(rs, pmax))), len(oks(rs, p99)), len(rs))
	}
}

func (r *Report) storeMD(w func(string, ...any)) {
	st := r.Store
	if st == nil {
		return
	}
	w("## The turn store\n\n")
	w("Every turn's events are journaled in the gateway's store (`store: sqlite`, the default, a file in `state_dir`; or `store: memory`), and every stream — `Prompt` and `WatchTurn` alike — reads the turn's journal, each event encoded once. The sections above ran on the default, `store: sqlite`, each gateway with a state directory of its own. Here the gateway-stream client runs on two gateways started side by side, one per store, alternating which goes first in each repetition.\n\n")
	sh := st.Flood
	w("### %s chunks × %s, unpaced\n\n", FmtInt(float64(sh.N)), size(sh.Size))
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
		w("### Paced %s chunks/s, %s × %s\n\n", FmtInt(float64(st.PacedRate)), FmtInt(float64(st.PacedN)), size(r.pacedSize()))
		pacedTable(w, st.Paced, []labelled{{job.GatewayStream, "`store: sqlite`"}, {job.GatewayStreamMemory, "`store: memory`"}})
		w("\nsqlite p99 − memory p99, run by run: %s.\n\n", mmm(p99Diffs(st.Paced[job.GatewayStream], st.Paced[job.GatewayStreamMemory]), FmtDurF))
	}

	if x := st.Stall; x != nil {
		text := int64(x.N) * int64(x.Size)
		w("### A watcher that never reads\n\n")
		w("One turn of the test agent's `flood %d %d` (%s of text) on a gateway with `store: sqlite` and `limits.max_turn_bytes: %d` (a chunk event carries its text twice, so the journal is about twice the text and the default 1 GiB, or 2 GiB, would cancel the turn), read to the end by a gateway-stream `Prompt` client. When the turn starts, a second client, on a connection of fixed 64 KiB flow-control windows (`grpc.WithInitialWindowSize`, `grpc.WithInitialConnWindowSize`), calls `WatchTurn` from `after_seq` 0 and never calls `Recv`, so the gateway's sender for it stalls as soon as the windows are full. acpgate's RSS is sampled every 50 ms from the call to the turn's end.\n\n", x.N, x.Size, MiB(text), x.MaxTurnBytes)
		w("| | |\n|---|---|\n")
		w("| text the `Prompt` client received | %s of %s, in %s |\n", MiB(x.Bytes), MiB(text), FmtDurF(float64(x.Turn)))
		w("| acpgate RSS, idle (before the call) | %s |\n", MiB(x.Idle))
		w("| acpgate RSS, peak sampled during the flood | %s (+%s) |\n", MiB(x.Peak), MiB(x.Peak-x.Idle))
		w("| acpgate VmHWM at the turn's end | %s |\n", MiB(x.HWM))
		if c := st.StallControl; c != nil && c.Peak > 0 {
			w("| control: the same flood on a fresh gateway, nobody watching | idle %s, peak sampled %s (+%s), VmHWM %s, in %s |\n", MiB(c.Idle), MiB(c.Peak), MiB(c.Peak-c.Idle), MiB(c.HWM), FmtDurF(float64(c.Turn)))
		}
		w("| the watcher, reading once the turn had ended | %s in %s |\n", MiB(x.WatcherBytes), FmtDurF(float64(x.WatcherTime)))
		if x.Disk > 0 {
			w("| the store on disk after the turn | %s (a chunk event carries its text twice: `text` and `content`) |\n", MiB(x.Disk))
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
				w("| %s | %s | %s |\n", FmtDurF(float64(s.At.Round(10*time.Millisecond))), MiB(s.Read), MiB(s.RSS))
			}
			w("\n")
		}
	}
}

// pacedSize is the paced sections' chunk size.
func (r *Report) pacedSize() int {
	if len(r.Paced) > 0 {
		return r.Paced[0].Size
	}
	return 64
}
