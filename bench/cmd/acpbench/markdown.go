package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// verdicts of the targets, computed once for the report and the
// summary.
type verdict struct {
	Figure, Target, Measured string
	Met                      bool
	Known                    bool // false: not measured in this run
}

func (r *report) floodShape(name string) *shapeResult {
	for i := range r.Throughput {
		if r.Throughput[i].Shape.Name == name {
			return &r.Throughput[i]
		}
	}
	return nil
}

func lostOf(rs []Result) (lost, ooo, chunks int64) {
	for _, r := range rs {
		lost += r.Lost
		ooo += r.OutOfOrder
		chunks += r.Chunks
	}
	return
}

func (r *report) verdicts() []verdict {
	var out []verdict
	flood := func(name, client, target string, want float64) {
		who := "gateway"
		if client == gatewayStream {
			who = "gateway with `omit_outcome_text` and `coalesce_chunks`"
		}
		v := verdict{Figure: "unpaced flood, " + strings.TrimSuffix(name, " flood") + " chunks: " + who + " / floor", Target: target}
		if sr := r.floodShape(name); sr != nil {
			rat := ratios(sr.Runs[client], sr.Runs["floor"], Result.rate)
			lost, ooo, _ := lostOf(sr.Runs[client])
			errs := len(sr.Runs[client]) - len(oks(sr.Runs[client], Result.rate))
			v.Known = len(rat) > 0
			v.Measured = fmt.Sprintf("%s; %d lost, %d out of order, %d failed runs", mmm(rat, fmtRatio), lost, ooo, errs)
			v.Met = v.Known && median(rat) >= want && lost == 0 && ooo == 0 && errs == 0
		}
		out = append(out, v)
	}
	flood("64 B flood", "gateway", "≥ 0.5, zero loss", 0.5)
	flood("64 B flood", gatewayStream, "≥ 0.5, zero loss", 0.5)
	flood("64 KiB flood", "gateway", "≥ 0.7, zero loss", 0.7)
	flood("64 KiB flood", gatewayStream, "≥ 0.7, zero loss", 0.7)

	latency := func(client, who string) {
		lat := verdict{Figure: "paced 1,000 – 50,000 chunks/s: " + who + " p99 latency", Target: "≤ floor p99 + 1 ms, and ≤ peer p99"}
		var parts []string
		lat.Met = true
		for _, p := range r.Paced {
			if p.Rate > 50_000 {
				continue
			}
			g := median(oks(p.Runs[client], p99))
			f := median(oks(p.Runs["floor"], p99))
			pe := median(oks(p.Runs["peer"], p99))
			if math.IsNaN(g) || math.IsNaN(f) {
				lat.Met = false
				parts = append(parts, fmt.Sprintf("%s/s: no complete gateway or floor run", fmtInt(float64(p.Rate))))
				continue
			}
			lat.Known = true
			ok := g <= f+1e6 && (math.IsNaN(pe) || g <= pe)
			lat.Met = lat.Met && ok
			peer := "peer broke"
			if !math.IsNaN(pe) {
				peer = "peer " + fmtDurF(pe)
			}
			parts = append(parts, fmt.Sprintf("%s/s: %s (floor %s, %s)", fmtInt(float64(p.Rate)), fmtDurF(g), fmtDurF(f), peer))
		}
		lat.Measured = strings.Join(parts, "; ")
		out = append(out, lat)
	}
	latency("gateway", "gateway")
	latency(gatewayStream, "gateway with `omit_outcome_text` and `coalesce_chunks`")

	conc := verdict{Figure: "200 concurrent turns", Target: "zero lost or reordered chunks"}
	if c := r.Concurrency; c != nil {
		lost, ooo, chunks := lostOf(c.Runs["gateway"])
		errs := len(c.Runs["gateway"]) - len(oks(c.Runs["gateway"], Result.aggregate))
		conc.Figure = fmt.Sprintf("%d concurrent turns", c.Streams)
		conc.Known = len(c.Runs["gateway"]) > 0
		conc.Measured = fmt.Sprintf("%s chunks in %d runs: %d lost, %d out of order, %d failed runs", fmtInt(float64(chunks)), len(c.Runs["gateway"]), lost, ooo, errs)
		conc.Met = conc.Known && lost == 0 && ooo == 0 && errs == 0
	}
	out = append(out, conc)

	idle := verdict{Figure: "gateway RSS per idle session", Target: "≤ 256 KiB"}
	if i := r.Idle; i != nil && i.Opened > 0 {
		idle.Known = true
		idle.Measured = fmt.Sprintf("%s (%d sessions)", kib(i.perSession()), i.Opened)
		idle.Met = i.perSession() <= 256<<10 && i.Opened == i.Target
	}
	out = append(out, idle)

	bp := verdict{Figure: "slow client", Target: "gateway RSS bounded and stated; zero loss"}
	if b := r.Backpressure; b != nil {
		bp.Known = true
		if b.heldBack() {
			bp.Measured = fmt.Sprintf("agent held to ≤ %d chunks (%s) ahead of the client; ", b.MaxAhead, mib(int64(b.MaxAhead)*int64(b.Size)))
		} else {
			bp.Measured = fmt.Sprintf("the agent ran ahead of the client (sent in %s what the client read in %s), its events waiting in the turn's journal; ", fmtDurF(float64(b.AgentSpan)), fmtDurF(float64(b.ClientSpan)))
		}
		bp.Measured += fmt.Sprintf("RSS follows the text kept for the outcome: peak %s for %s of text (%.1f×); %d lost, %d out of order",
			mib(b.HWM), mib(int64(b.N)*int64(b.Size)), float64(b.HWM-b.Base)/float64(int64(b.N)*int64(b.Size)), b.Result.Lost, b.Result.OutOfOrder)
		// Bounded: the agent stays within a pipe's worth of the client
		// (64 KiB of pipe, a few frames in acpgate and gRPC's windows), or,
		// when the journal lets it run ahead, the gateway's memory does not
		// follow the client's lag: with the outcome's text omitted, the
		// peak stays within stallBound of the start.
		bp.Met = b.Result.ok()
		if o := r.BackpressureOmit; o != nil {
			ahead := fmt.Sprintf("agent ≤ %d chunks ahead", o.MaxAhead)
			if !o.heldBack() {
				ahead = "agent ran ahead"
			}
			bp.Measured += fmt.Sprintf("; with `omit_outcome_text` and `coalesce_chunks`: %s, peak RSS %s over a start of %s for the same text; %d lost, %d out of order",
				ahead, mib(o.HWM), mib(o.Base), o.Result.Lost, o.Result.OutOfOrder)
			bp.Met = bp.Met && o.Result.ok() && (o.heldBack() || o.HWM-o.Base <= stallBound)
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

func p99(r Result) float64 {
	if r.Lat == nil {
		return math.NaN()
	}
	return float64(r.Lat.P99)
}

func p50(r Result) float64 {
	if r.Lat == nil {
		return math.NaN()
	}
	return float64(r.Lat.P50)
}

func pmax(r Result) float64 {
	if r.Lat == nil {
		return math.NaN()
	}
	return float64(r.Lat.Max)
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
func (r *report) peerBreak() (survived, broke int) {
	type point struct{ rate, runs, completed int }
	var pts []point
	for _, p := range r.Paced {
		pts = append(pts, point{p.Rate, len(p.Runs["peer"]), len(oks(p.Runs["peer"], p99))})
	}
	for _, b := range r.Breaks {
		pts = append(pts, point{b.Rate, len(b.Runs), b.survived()})
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
func (r *report) peerAlwaysBreaks() int {
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
		note(b.Rate, b.survived())
	}
	slices.Sort(rates)
	always := 0
	for i := len(rates) - 1; i >= 0 && completed[rates[i]] == 0; i-- {
		always = rates[i]
	}
	return always
}

// headline is the few sentences the README quotes.
func (r *report) headline() string {
	var parts []string
	for _, name := range []string{"64 B flood", "64 KiB flood"} {
		sr := r.floodShape(name)
		if sr == nil {
			continue
		}
		g := sr.Runs["gateway"]
		parts = append(parts, fmt.Sprintf("%s chunks: %s chunks/s (%s MB/s), %s of the floor",
			strings.TrimSuffix(name, " flood"), fmtInt(median(oks(g, Result.rate))), fmt1(median(oks(g, Result.mbps))),
			fmtRatio(median(ratios(g, sr.Runs["floor"], Result.rate)))))
	}
	var b strings.Builder
	if len(parts) > 0 {
		b.WriteString("Unpaced floods through the gateway — " + strings.Join(parts, "; ") + ", with no chunk lost or reordered. ")
	}
	survived, broke := r.peerBreak()
	var peerBroke []string
	for _, sr := range r.Throughput {
		if rs := sr.Runs["peer"]; len(rs) > 0 && len(oks(rs, Result.rate)) < len(rs) {
			peerBroke = append(peerBroke, fmt.Sprintf("%s × %s", fmtInt(float64(sr.Shape.N)), size(sr.Shape.Size)))
		}
	}
	if len(peerBroke) > 0 {
		fmt.Fprintf(&b, "The acp-go-sdk v0.13.0 peer broke (`-32603`) on the unpaced floods of %s", strings.Join(peerBroke, " and "))
		if always := r.peerAlwaysBreaks(); broke > 0 && always == broke {
			fmt.Fprintf(&b, " and, paced, broke in every run from %s chunks/s", fmtInt(float64(broke)))
			if survived > 0 {
				fmt.Fprintf(&b, " (it completed every run at %s/s)", fmtInt(float64(survived)))
			}
		} else if broke > 0 {
			fmt.Fprintf(&b, " and, paced, broke in some runs from %s chunks/s", fmtInt(float64(broke)))
			if always > 0 {
				fmt.Fprintf(&b, " and in every run from %s/s", fmtInt(float64(always)))
			}
			if survived > 0 {
				fmt.Fprintf(&b, " (it completed every run at %s/s)", fmtInt(float64(survived)))
			}
		}
		b.WriteString(". ")
	}
	for _, p := range r.Paced {
		if p.Rate == 1_000 {
			fmt.Fprintf(&b, "At 1,000 chunks/s the gateway's p99 latency is %s against the floor's %s. ",
				fmtDurF(median(oks(p.Runs["gateway"], p99))), fmtDurF(median(oks(p.Runs["floor"], p99))))
		}
	}
	if i := r.Idle; i != nil && i.Opened > 0 {
		fmt.Fprintf(&b, "An idle session costs the gateway %s of RSS. ", kib(i.perSession()))
	}
	return strings.TrimSpace(b.String())
}

// summary is the short account printed at the end of a run.
func (r *report) summary() string {
	var b strings.Builder
	b.WriteString("acpbench: " + r.headline() + "\n")
	b.WriteString("acpbench: targets\n")
	for _, v := range r.verdicts() {
		fmt.Fprintf(&b, "  %-55s %-13s %s\n", v.Figure, strings.Trim(v.mark(), "*"), v.Measured)
	}
	return b.String()
}

// cpuPerChunk is the CPU microseconds a result spent per chunk: the client
// process's, plus the gateway's for gateway runs.
func cpuPerChunk(r Result) float64 {
	if r.Chunks == 0 {
		return math.NaN()
	}
	return float64(r.CPU+r.GatewayCPU) / 1e3 / float64(r.Chunks)
}

func gatewayCPUPerChunk(r Result) float64 {
	if r.Chunks == 0 {
		return math.NaN()
	}
	return float64(r.GatewayCPU) / 1e3 / float64(r.Chunks)
}

func fmtUs(x float64) string {
	if math.IsNaN(x) {
		return "—"
	}
	if x < 10 {
		return fmt.Sprintf("%.2f", x)
	}
	return fmt.Sprintf("%.1f", x)
}

// brokeNote describes the runs in which the peer broke.
func brokeNote(rs []Result) string {
	var broke []Result
	for _, r := range rs {
		if r.Broke {
			broke = append(broke, r)
		}
	}
	if len(broke) == 0 {
		return fmt.Sprintf("completed %d of %d", len(oks(rs, Result.rate)), len(rs))
	}
	var at []float64
	for _, r := range broke {
		at = append(at, float64(r.Chunks))
	}
	return fmt.Sprintf("**broke in %d of %d runs**, after %s chunks: `%s`", len(broke), len(rs), mmm(at, fmtInt), shortErr(broke[0].Err))
}

func shortErr(s string) string {
	s = strings.ReplaceAll(s, "`", "'")
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

func (r *report) markdown() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	m := r.Machine

	w("# acpgate benchmarks\n\n")
	w("Generated by `make bench` (`go -C bench run ./cmd/acpbench run`) on %s in %s. Do not edit by hand: rerun it.", m.Date, r.Duration.Round(time.Second))
	if r.Smoke {
		w(" **This is a smoke run (tiny shapes, one run each): its figures mean nothing.**")
	}
	w("\n\n")
	w("| machine | |\n|---|---|\n")
	w("| CPU | %s, %d cores |\n", m.CPU, m.Cores)
	w("| memory | %.1f GiB |\n", float64(m.Memory)/(1<<30))
	w("| OS | %s |\n", m.Kernel)
	w("| Go | %s |\n", m.Go)
	if m.Commit != "" {
		w("| acpgate | %s |\n", m.Commit)
	}
	if r.Baseline != "" {
		w("| baseline (throughput and paced sections, `-baseline`) | %s |\n", r.Baseline)
	}
	w("\nThe machine is shared and has %d cores for the agent, the gateway and the client together, so absolute figures drift between runs; every comparison is therefore a ratio of measurements taken back to back in the same run, reported as median (min – max) over the runs.", m.Cores)
	if in := r.Interference; in.Jobs > 0 {
		w(" Before each measurement the harness waits for the machine to be idle, and it measures the CPU that other processes take during it (the machine's busy time from `/proc/stat` less that of the client, its agents, acpgate and the agents acpgate reaped); a measurement during which others took more than %.1f of a core on average is repeated, up to twice, keeping the least disturbed attempt. In this run: %d measurements, %d repeated, foreign load median %.2f cores (max %.2f), %d still over the threshold",
			in.Threshold, in.Jobs, in.Repeated, median(in.Foreign), slices.Max(in.Foreign), in.Disturbed)
		if in.NotQuiet > 0 {
			w(", %d started on a machine that did not become idle", in.NotQuiet)
		}
		w(".")
	}
	w("\n\n")

	w("%s\n\n", r.headline())
	w("## Targets\n\n")
	w("| figure | target | measured | |\n|---|---|---|---|\n")
	for _, v := range r.verdicts() {
		w("| %s | %s | %s | %s |\n", v.Figure, v.Target, v.Measured, v.mark())
	}
	if len(r.Failures) > 0 {
		w("\n**Failures in this run:**\n\n")
		for _, f := range r.Failures {
			w("- %s\n", f)
		}
	}
	w("\n")

	r.methodMD(w)
	r.throughputMD(w)
	r.pacedMD(w)
	r.breaksMD(w)
	r.ttfcMD(w)
	r.warmMD(w)
	r.geminiMD(w)
	r.naiveMD(w)
	r.concMD(w)
	r.turnsMD(w)
	r.answerMD(w)
	r.idleMD(w)
	r.bpMD(w)
	r.storeMD(w)
	r.instrumentationMD(w)
	r.clusterMD(w)
	r.profileMD(w)
	ghzMD(w)
	w("## Reproducing\n\n")
	w("```sh\nmake bench          # everything, about %d minutes here; writes docs/benchmarks.md\nmake bench-smoke    # tiny shapes, one run each, fails on any lost chunk (CI runs it)\ngo -C bench run ./cmd/acpbench run -runs 3 -out /tmp/b.md -json /tmp/b.json -keep   # -sections throughput,paced,… for a part\ngo -C bench run ./cmd/acpbench report -json /tmp/b.json -out /tmp/b.md              # render raw results again\ngo -C bench run ./cmd/acpbench run -sections throughput,paced -baseline REV -out /tmp/b.md  # the floods and paced rates on acpgate built from git revision REV too, turn by turn beside this tree\n```\n\n", max(1, int(r.Duration.Round(time.Minute).Minutes())))
	w("The harness builds `acpgate` and the test agent from the working tree, runs each measurement in a fresh client process (`acpbench client -job …`), and starts a fresh `acpgate serve` (warmed up with one small turn) for each shape, each with a state directory of its own (a store's directory is locked by one gateway at a time) that is deleted when it stops. Sources: [`bench/cmd/acpbench`](../bench/cmd/acpbench), a Go module of its own (`bench/go.mod`); the flood is the test agent's `flood_timed` directive ([`internal/testagent`](../internal/testagent)).\n")
	return b.String()
}

func (r *report) methodMD(w func(string, ...any)) {
	w("## What is measured\n\n")
	w("One agent program, three ways of talking to it, in the same run:\n\n")
	w("- **floor** — the least a client can do with ACP: spawn the agent, write `initialize`, `session/new` and `session/prompt` by hand, split its stdout into lines with a `bufio.Reader`, decode each line with one `json.Unmarshal` into a struct shaped after ACP's schema (session id, update kind, message id, content type and text), count chunks. No queue, no dispatch. **floor-sdk** is the same reader decoding each update as acp-go-sdk's `SessionNotification`, whose union types decode in several passes: what the floor costs with the SDK's types.\n")
	w("- **peer** — what a team embedding the ACP SDK gets: acp-go-sdk v0.13.0's `NewClientSideConnection` driving the agent directly, its `SessionUpdate` handler counting chunks. v0.13.0 queues at most 1,024 notifications and closes the connection when its handler falls behind (`-32603`, *peer disconnected before response*); the harness records that as *broke* and compares with the peer only where it completes.\n")
	w("- **gateway** — a Go gRPC client calling one-shot `Prompt` on `acpgate serve` (its default store, `store: sqlite`, unless said otherwise) over loopback TCP (one connection, receive limit raised to 1 GiB because a completed turn's `outcome` carries the whole text, twice: `text` and `final_message`). Every event's `seq`, every chunk's index and the outcome's text (length and CRC-32C of the chunks' concatenation) are checked. **gateway-stream** is the same client consuming the stream as a stream, as a client that renders the chunks as they come would: it sets `omit_outcome_text` (the outcome then carries the text's length, checked against the chunks received, instead of a second copy of the answer — twice over, in `text` and `final_message`, when the turn has one message) and `coalesce_chunks` (chunks the gateway has already read when it sends come as one event; the client splits each back into the agent's chunks, checking and timing every one). It receives what the floor and the peer receive.\n\n")
	w("The agent is acpgate's test agent (`internal/testagent`) running the script `flood_timed N SIZE [RATE]`: N `agent_message_chunk` updates of SIZE bytes of text, each starting with its index and its send time (Unix nanoseconds, stamped as the line is written), then `end_turn`. Unpaced, the chunks go out as one buffered burst (about 800,000 chunks/s of 64 B here: the agent is never the bottleneck); paced, every wake-up (about 1 ms apart) writes the chunks then due, so pacing is exact on average and bursty at millisecond scale.\n\n")
	w("Definitions:\n\n")
	w("- **chunks/s** = chunks / turn time; the **turn** runs from the prompt (floor, peer: `session/prompt` written; gateway: the `started` event received, i.e. after the gateway has spawned the agent and opened the session) to the turn's ending received (the response; the gateway's `outcome`). **MB/s** is chunk text (10⁶ bytes) per second of turn. **first→last** is the chunk rate between the first and the last chunk, without the ending (the gateway's `outcome` carries the whole text again).\n")
	w("- **CPU µs/chunk**: the client process's CPU time (user + system, from `getrusage`), plus for the gateway the `acpgate` process's own CPU time over the run (from `/proc/PID/stat`, agents excluded), divided by chunks.\n")
	w("- **latency** = arrival minus send time of each chunk (one clock: same machine); arrival is when the client has the decoded chunk in hand.\n")
	w("- **RSS** is `VmRSS` / `VmHWM` of the `acpgate` process from `/proc/PID/status`; the agents are separate processes and are not counted.\n\n")
}

func (r *report) throughputMD(w func(string, ...any)) {
	if len(r.Throughput) == 0 {
		return
	}
	w("## Throughput: unpaced floods\n\n")
	for _, sr := range r.Throughput {
		sh := sr.Shape
		w("### %s: %s chunks × %s, %s\n\n", sh.Name, fmtInt(float64(sh.N)), size(sh.Size), sh.Purpose)
		w("| client | chunks/s | MB/s | turn | first→last chunks/s | CPU µs/chunk | runs |\n|---|---|---|---|---|---|---|\n")
		for _, c := range throughputClients(true) {
			rs := sr.Runs[c]
			if len(rs) == 0 {
				continue
			}
			cpu := mmm(oks(rs, cpuPerChunk), fmtUs)
			if viaGateway(c) {
				cpu += " (acpgate " + mmm(oks(rs, gatewayCPUPerChunk), fmtUs) + ")"
			}
			note := brokeNote(rs)
			if c != "peer" {
				lost, ooo, _ := lostOf(rs)
				note = fmt.Sprintf("completed %d of %d; %d lost, %d out of order", len(oks(rs, Result.rate)), len(rs), lost, ooo)
			}
			w("| %s | %s | %s | %s | %s | %s | %s |\n", c,
				mmm(oks(rs, Result.rate), fmtInt), mmm(oks(rs, Result.mbps), fmt1),
				mmm(oks(rs, func(r Result) float64 { return float64(r.Turn) }), fmtDurF),
				mmm(oks(rs, Result.streamRate), fmtInt), cpu, note)
		}
		w("\nRatios, run by run: gateway / floor **%s**; gateway / floor-sdk %s; ",
			mmm(ratios(sr.Runs["gateway"], sr.Runs["floor"], Result.rate), fmtRatio),
			mmm(ratios(sr.Runs["gateway"], sr.Runs["floor-sdk"], Result.rate), fmtRatio))
		if pr := ratios(sr.Runs["gateway"], sr.Runs["peer"], Result.rate); len(pr) > 0 {
			w("gateway / peer **%s** (runs the peer completed)", mmm(pr, fmtRatio))
		} else {
			w("gateway / peer: none (the peer completed no run)")
		}
		w("; first→last chunk rate, gateway / floor %s.", mmm(ratios(sr.Runs["gateway"], sr.Runs["floor"], Result.streamRate), fmtRatio))
		if om := ratios(sr.Runs[gatewayStream], sr.Runs["floor"], Result.rate); len(om) > 0 {
			w(" With `omit_outcome_text` and `coalesce_chunks`, gateway / floor **%s**.", mmm(om, fmtRatio))
		}
		if b := ratios(sr.Runs["gateway"], sr.Runs[onBaseline("gateway")], Result.rate); len(b) > 0 {
			w(" Against the baseline (%s), run by run, chunks/s: gateway / gateway%s **%s**; gateway-stream / gateway-stream%s **%s**; acpgate CPU per chunk, baseline / working tree: gateway %s, gateway-stream %s.",
				r.Baseline, baselineSuffix, mmm(b, fmtRatio), baselineSuffix,
				mmm(ratios(sr.Runs[gatewayStream], sr.Runs[onBaseline(gatewayStream)], Result.rate), fmtRatio),
				mmm(ratios(sr.Runs[onBaseline("gateway")], sr.Runs["gateway"], gatewayCPUPerChunk), fmtRatio),
				mmm(ratios(sr.Runs[onBaseline(gatewayStream)], sr.Runs[gatewayStream], gatewayCPUPerChunk), fmtRatio))
		}
		if sr.GatewayHWM > 0 {
			w(" acpgate's peak RSS over this shape's runs: %s.", mib(sr.GatewayHWM))
		}
		if text := int64(sh.N) * int64(sh.Size); text >= 64<<20 {
			w(" The gap between the turn and first→last rates is mostly the turn's ending: the gateway's `outcome` carries the text twice (`text` and `final_message`), %s in one message here.", mib(2*text))
		}
		w("\n\n")
	}
}

func (r *report) pacedMD(w func(string, ...any)) {
	if len(r.Paced) == 0 {
		return
	}
	w("## Latency at paced rates\n\n")
	p0 := r.Paced[0]
	w("Chunks of %s, each run lasting about %s; latency is arrival minus send per chunk. Each cell is the median over the runs, with the range of the per-run p99 in brackets.\n\n", size(p0.Size), fmtDurF(float64(p0.N)/float64(p0.Rate)*1e9))
	w("| rate | client | achieved chunks/s | p50 | p99 | max | runs |\n|---|---|---|---|---|---|---|\n")
	for _, p := range r.Paced {
		for _, c := range pacedClients(true) {
			rs := p.Runs[c]
			if len(rs) == 0 {
				continue
			}
			note := fmt.Sprintf("completed %d of %d", len(oks(rs, p99)), len(rs))
			if c == "peer" {
				note = brokeNote(rs)
			}
			label := c
			if c == floorLoaded {
				label = "floor + load"
				var cores []float64
				for _, x := range rs {
					var sum float64
					for _, l := range x.Load {
						sum += l
					}
					cores = append(cores, sum)
				}
				note += fmt.Sprintf("; load %s cores", mmm(cores, fmtRatio))
			}
			pace := fmtInt(float64(p.Rate)) + "/s"
			if p.Size != p0.Size {
				pace += " × " + size(p.Size)
			}
			w("| %s | %s | %s | %s | %s | %s | %s |\n", pace, label,
				mmm(oks(rs, Result.streamRate), fmtInt),
				fmtDurF(median(oks(rs, p50))), mmm(oks(rs, p99), fmtDurF), fmtDurF(median(oks(rs, pmax))), note)
		}
	}
	w("\n")
	for _, p := range r.Paced {
		diff := func(client string) []float64 { return p99Diffs(p.Runs[client], p.Runs["floor"]) }
		w("- %s/s: gateway p99 − floor p99, run by run: %s", fmtInt(float64(p.Rate)), mmm(diff("gateway"), fmtDurF))
		if d := diff(gatewayStream); len(d) > 0 {
			w("; gateway-stream p99 − floor p99: %s", mmm(d, fmtDurF))
		}
		for _, c := range []string{"gateway", gatewayStream} {
			if d := p99Diffs(p.Runs[c], p.Runs[onBaseline(c)]); len(d) > 0 {
				w("; %s p99 − %s p99 (%s): **%s**", c, onBaseline(c), r.Baseline, mmm(d, fmtDurF))
			}
		}
		w(".\n")
	}
	w("\n")
	if len(r.Paced) > 0 && len(r.Paced[0].Runs[floorLoaded]) > 0 {
		w("**floor + load** is a control, not a client: the floor again, with two busy-loop processes beside it (1 ms cycles) burning what acpgate and the gateway's client burned in the same repetition. The gateway's chunks pass through two processes more than the floor's, on the same two cores; this row shows what that much competition for the CPU alone does to the floor's latency.\n\n")
	}
	r.hopsMD(w)
}

// hopsMD splits the gateway's latency at the event's time, which the
// gateway stamps as it journals the event.
func (r *report) hopsMD(w func(string, ...any)) {
	hop := func(rs []Result, get func(Result) *Latency, pick func(*Latency) int64) []float64 {
		var out []float64
		for _, x := range rs {
			if l := get(x); x.ok() && l != nil {
				out = append(out, float64(pick(l)))
			}
		}
		return out
	}
	to := func(r Result) *Latency { return r.ToGateway }
	from := func(r Result) *Latency { return r.FromGateway }
	p50of := func(l *Latency) int64 { return l.P50 }
	p99of := func(l *Latency) int64 { return l.P99 }
	rows := 0
	for _, p := range r.Paced {
		if len(hop(p.Runs["gateway"], to, p99of)) > 0 {
			rows++
		}
	}
	if rows == 0 {
		return
	}
	w("Where the gateway's latency goes: each chunk event's `time` is stamped by the gateway as it journals the event (numbered and encoded once, before any stream can send it), which splits the latency into agent → gateway (the agent's pipe, reading, decoding and translating the update, the turn's queue) and gateway → client (the stream's read of the journal, HTTP/2 over loopback TCP, the client's decoding). One clock: all three processes run on this machine. Medians over the runs, per-run p99 range in brackets.\n\n")
	w("| rate | client | agent → gateway p50 | agent → gateway p99 | gateway → client p50 | gateway → client p99 | floor p99 (agent → client) |\n|---|---|---|---|---|---|---|\n")
	for _, p := range r.Paced {
		for _, c := range []string{"gateway", gatewayStream} {
			gs := p.Runs[c]
			if len(hop(gs, to, p99of)) == 0 {
				continue
			}
			w("| %s/s | %s | %s | %s | %s | %s | %s |\n", fmtInt(float64(p.Rate)), c,
				fmtDurF(median(hop(gs, to, p50of))), mmm(hop(gs, to, p99of), fmtDurF),
				fmtDurF(median(hop(gs, from, p50of))), mmm(hop(gs, from, p99of), fmtDurF),
				fmtDurF(median(oks(p.Runs["floor"], p99))))
		}
	}
	w("\n")
}

func (r *report) breaksMD(w func(string, ...any)) {
	if len(r.Breaks) == 0 && len(r.Throughput) == 0 {
		return
	}
	w("## Where the SDK peer breaks\n\n")
	w("| load | peer completed | chunks handled before the break |\n|---|---|---|\n")
	for _, sr := range r.Throughput {
		rs := sr.Runs["peer"]
		w("| unpaced, %s × %s | %d of %d | %s |\n", fmtInt(float64(sr.Shape.N)), size(sr.Shape.Size), len(oks(rs, Result.rate)), len(rs), brokenAt(rs))
	}
	for _, p := range r.Paced {
		rs := p.Runs["peer"]
		w("| paced %s/s, %s × %s | %d of %d | %s |\n", fmtInt(float64(p.Rate)), fmtInt(float64(p.N)), size(p.Size), len(oks(rs, p99)), len(rs), brokenAt(rs))
	}
	for _, br := range r.Breaks {
		w("| paced %s/s, %s × 64 B | %d of %d | %s |\n", fmtInt(float64(br.Rate)), fmtInt(float64(br.N)), br.survived(), len(br.Runs), brokenAt(br.Runs))
	}
	w("\nThe gateway reads the agent's stdout as fast as it can journal the events (its clients read the journal at their own pace, so a slow one does not slow the agent; a store slower than the agent does, through the pipe) and completed every one of these loads without loss.\n\n")
}

func brokenAt(rs []Result) string {
	var at []float64
	for _, r := range rs {
		if r.Broke {
			at = append(at, float64(r.Chunks))
		}
	}
	if len(at) == 0 {
		return "—"
	}
	return mmm(at, fmtInt)
}

func (r *report) ttfcMD(w func(string, ...any)) {
	t := r.TTFC
	if t == nil {
		return
	}
	w("## Time to first chunk\n\n")
	w("A one-chunk turn, from a cold agent each time (%d runs). Direct clients: from spawning the agent to the first chunk in hand. Gateway: from the `Prompt` call (gRPC connection already open) to the first chunk; the gateway spawns the agent, handshakes and opens the session inside that time.\n\n", len(t.Runs["floor"]))
	w("| | median | min | max |\n|---|---|---|---|\n")
	row := func(name string, v []float64) {
		if len(v) == 0 {
			return
		}
		w("| %s | %s | %s | %s |\n", name, fmtDurF(median(v)), fmtDurF(slices.Min(v)), fmtDurF(slices.Max(v)))
	}
	get := func(c string, f func(Result) int64) []float64 {
		return oks(t.Runs[c], func(r Result) float64 { return float64(f(r)) })
	}
	row("agent start-up: spawn → `initialize` answered (floor)", get("floor", func(r Result) int64 { return r.Startup }))
	row("floor: spawn → first chunk", get("floor", func(r Result) int64 { return r.First }))
	row("peer: spawn → first chunk", get("peer", func(r Result) int64 { return r.First }))
	row("gateway: call → `started` (agent spawned, session open)", get("gateway", func(r Result) int64 { return r.Startup }))
	row("gateway: call → first chunk", get("gateway", func(r Result) int64 { return r.First }))
	g := median(get("gateway", func(r Result) int64 { return r.First }))
	f := median(get("floor", func(r Result) int64 { return r.First }))
	w("\nThe gateway adds %s to the first chunk (median against median).\n\n", fmtDurF(g-f))
}

func (r *report) concMD(w func(string, ...any)) {
	c := r.Concurrency
	if c == nil {
		return
	}
	w("## Concurrency: %d turns at once\n\n", c.Streams)
	w("%d concurrent one-shot turns of %s unpaced chunks of %s each, every turn with its own agent process (the direct clients run theirs from one process, a goroutine per agent). Aggregate chunks/s = all chunks / wall time from the first call to the last ending, agent start-up included.\n\n", c.Streams, fmtInt(float64(c.N)), size(c.Size))
	w("| client | aggregate chunks/s | wall | chunks received | lost | out of order | runs |\n|---|---|---|---|---|---|---|\n")
	for _, cl := range []string{"floor", "peer", "gateway"} {
		rs := c.Runs[cl]
		if len(rs) == 0 {
			continue
		}
		lost, ooo, chunks := lostOf(rs)
		note := fmt.Sprintf("completed %d of %d", len(oks(rs, Result.aggregate)), len(rs))
		if cl == "peer" {
			note = brokeNote(rs)
		}
		w("| %s | %s | %s | %s | %d | %d | %s |\n", cl, mmm(oks(rs, Result.aggregate), fmtInt),
			mmm(oks(rs, func(r Result) float64 { return float64(r.Wall) }), fmtDurF), fmtInt(float64(chunks)), lost, ooo, note)
	}
	w("\nRatio gateway / floor, run by run: **%s**.", mmm(ratios(c.Runs["gateway"], c.Runs["floor"], Result.aggregate), fmtRatio))
	if c.GatewayHWM > 0 {
		w(" acpgate's peak RSS: %s.", mib(c.GatewayHWM))
	}
	w(" Every stream's chunks arrived complete and in order, and every `outcome` text equalled its chunks' concatenation, unless the table says otherwise.\n\n")
}

func (r *report) idleMD(w func(string, ...any)) {
	i := r.Idle
	if i == nil {
		return
	}
	w("## Idle sessions\n\n")
	w("%s `CreateSession` calls (8 at a time) on a fresh gateway, after 10 sessions opened and closed as a warm-up; RSS read 3 s after the last one.\n\n", fmtInt(float64(i.Target)))
	w("| | |\n|---|---|\n")
	w("| sessions open (`ListSessions`) | %s |\n", fmtInt(float64(i.Listed)))
	if i.Errors > 0 {
		w("| failed `CreateSession` calls | %d, first: `%s` |\n", i.Errors, shortErr(i.FirstError))
	}
	w("| acpgate RSS before → after | %s → %s |\n", mib(i.Before), mib(i.After))
	w("| **acpgate RSS per idle session** | **%s** |\n", kib(i.perSession()))
	w("| time to open them | %s (%s per session, 8 in parallel) |\n", fmtDurF(float64(i.CreateTime)), fmtDurF(float64(i.CreateTime)/float64(max(1, i.Opened))))
	w("| time to close them | %s |\n", fmtDurF(float64(i.CloseTime)))
	w("| acpgate RSS after closing them all | %s |\n", mib(i.Closed))
	if i.Agents > 0 {
		w("| the agents (separate processes, not counted above) | %s processes, %s in all, %s each |\n", fmtInt(float64(i.Agents)), mib(i.AgentsRSS), kib(i.AgentsRSS/int64(i.Agents)))
	}
	w("\n")
}

func (r *report) bpMD(w func(string, ...any)) {
	b := r.Backpressure
	if b == nil {
		return
	}
	defer r.bpOmitMD(w)
	res := b.Result
	text := int64(b.N) * int64(b.Size)
	w("## Backpressure: a client reading %d chunks/s\n\n", b.ReadRate)
	w("One turn of %s unpaced chunks of %s (%s of text) read by a gRPC client that takes at most %d chunks/s; acpgate's RSS sampled every 100 ms.\n\n", fmtInt(float64(b.N)), size(b.Size), mib(text), b.ReadRate)
	w("| | |\n|---|---|\n")
	w("| chunks received | %s of %s; %d lost, %d out of order%s |\n", fmtInt(float64(res.Chunks)), fmtInt(float64(b.N)), res.Lost, res.OutOfOrder, errSuffix(res))
	w("| client read time (first → last chunk) | %s |\n", fmtDurF(float64(b.ClientSpan)))
	w("| agent send time (first → last chunk) | %s |\n", fmtDurF(float64(b.AgentSpan)))
	w("| most chunks the agent was ever ahead of the client | %d (%s): pipe, acpgate (its journal included) and gRPC buffers together |\n", b.MaxAhead, mib(int64(b.MaxAhead)*int64(b.Size)))
	w("| acpgate RSS at start | %s |\n", mib(b.Base))
	w("| acpgate RSS, max while the agent was sending | %s |\n", mib(b.maxRSS()))
	w("| max of (RSS − start − text read so far), while the agent was sending | %s |\n", mib(b.maxExcess()))
	w("| acpgate peak RSS (VmHWM, includes building and sending the outcome) | %s |\n", mib(b.HWM))
	w("| (peak − start) / text of the turn | %.1f× |\n", float64(b.HWM-b.Base)/float64(text))
	if b.heldBack() {
		w("\n**The bound.** The agent is held back by the pipe: it was never more than %d chunks (%s) ahead of the client, and took %s to send what the client read in %s. So what acpgate buffers for a slow client is bounded by a few chunks, whatever the client's speed. ",
			b.MaxAhead, mib(int64(b.MaxAhead)*int64(b.Size)), fmtDurF(float64(b.AgentSpan)), fmtDurF(float64(b.ClientSpan)))
	} else {
		w("\n**The bound.** The agent is not held back by the client: the turn runs on its own and journals its events in the store, and the client's stream reads the journal at the client's pace (the recent events from memory, older ones from the store). The agent sent everything in %s, the client read it in %s, up to %d chunks (%s) behind the agent. ",
			fmtDurF(float64(b.AgentSpan)), fmtDurF(float64(b.ClientSpan)), b.MaxAhead, mib(int64(b.MaxAhead)*int64(b.Size)))
	}
	w("What grows is the text acpgate keeps to put in the `outcome` (every chunk's text, by design), and it costs more than the text: RSS reached %s while the agent sent its %s, and %s (%.1f× the text) once the outcome was built and sent. The memory follows the length of the answer, not the speed of the client.\n\n",
		mib(b.maxRSS()), mib(text), mib(b.HWM), float64(b.HWM-b.Base)/float64(text))
	if len(b.Samples) > 0 {
		w("| time | chunks read | text read | acpgate RSS |\n|---|---|---|---|\n")
		step := max(1, len(b.Samples)/10)
		for k := 0; k < len(b.Samples); k += step {
			if k+step >= len(b.Samples) {
				k = len(b.Samples) - 1 // end on the last sample
			}
			s := b.Samples[k]
			w("| %s | %s | %s | %s |\n", fmtDurF(float64(s.At.Round(100*time.Millisecond))), fmtInt(float64(s.Read)), mib(s.Read*int64(b.Size)), mib(s.RSS))
		}
		w("\n")
	}
}

// bpOmitMD is the slow client again, asking the outcome to omit the text.
func (r *report) bpOmitMD(w func(string, ...any)) {
	b := r.BackpressureOmit
	if b == nil {
		return
	}
	res := b.Result
	text := int64(b.N) * int64(b.Size)
	w("### The same client with `omit_outcome_text` and `coalesce_chunks`\n\n")
	w("The client keeps the chunks itself and asks the outcome for the text's length only, so acpgate keeps just the beginning of the answer a failure's partial output needs (about 1 MiB by default) and counts the rest.\n\n")
	w("| | |\n|---|---|\n")
	w("| chunks received | %s of %s; %d lost, %d out of order%s |\n", fmtInt(float64(res.Chunks)), fmtInt(float64(b.N)), res.Lost, res.OutOfOrder, errSuffix(res))
	w("| most chunks the agent was ever ahead of the client | %d (%s) |\n", b.MaxAhead, mib(int64(b.MaxAhead)*int64(b.Size)))
	w("| acpgate RSS at start | %s |\n", mib(b.Base))
	w("| acpgate RSS, max while the agent was sending | %s |\n", mib(b.maxRSS()))
	w("| acpgate peak RSS (VmHWM) | %s |\n", mib(b.HWM))
	w("| (peak − start) / text of the turn | %.2f× |\n\n", float64(b.HWM-b.Base)/float64(text))
	w("%s of text streamed through a gateway whose RSS peaked %s above where it started.\n\n", mib(text), mib(b.HWM-b.Base))
}

func errSuffix(r Result) string {
	if r.Err == "" {
		return ""
	}
	return "; error: " + shortErr(r.Err)
}

func ghzMD(w func(string, ...any)) {
	w("## Load testing with ghz\n\n")
	w("For users who know [ghz](https://github.com/bojand/ghz): with `go run ./cmd/acpgate serve` running (the built-in demo agent, which paces its chunks 30 ms apart), this runs 2,000 one-shot `Prompt` turns, 50 at a time, each spawning a demo agent. The server has reflection, so no proto files are needed:\n\n")
	w("```sh\nghz --insecure --call acpgate.v1.AgentGateway.Prompt \\\n    -d '{\"agent\":\"demo\",\"text\":\"hello\"}' \\\n    -n 2000 -c 50 127.0.0.1:7070\n```\n\n")
	w("Or from the proto files: `ghz --insecure --proto proto/acpgate/v1/gateway.proto --import-paths proto --call acpgate.v1.AgentGateway.Prompt -d '{\"agent\":\"demo\",\"text\":\"hello\"}' -n 2000 -c 50 127.0.0.1:7070`. Keep `-c` at or under `limits.max_sessions` (256 by default): each concurrent one-shot turn holds a session, and one over the limit fails with `RESOURCE_EXHAUSTED`. ghz measures whole streams (call to status), so its latencies are turn times, dominated by the demo agent's pacing and start-up.\n\n")
}

func (r *report) profileMD(w func(string, ...any)) {
	if len(r.Profiles) == 0 {
		return
	}
	w("## Where acpgate spends its time\n\n")
	w("The profiles come from `acpgate serve` itself, the binary measured above, run with its profiling flags `--cpuprofile` and `--allocprofile` (see `acpgate serve -h`): CPU from start to exit, allocations written after the clean shutdown that SIGTERM starts. Each profile covers a fresh gateway's warm-up turn and the runs below; `go tool pprof -top` of each, with the header lines dropped.\n\n")
	for _, p := range r.Profiles {
		w("### %s: %s chunks × %s, %d runs (%s chunks/s in them)\n\n", p.Shape.Name, fmtInt(float64(p.Shape.N)), size(p.Shape.Size), len(p.Runs), mmm(oks(p.Runs, Result.rate), fmtInt))
		w("<details><summary>CPU, flat</summary>\n\n```\n%s\n```\n\n</details>\n\n", p.CPU)
		w("<details><summary>CPU, cumulative</summary>\n\n```\n%s\n```\n\n</details>\n\n", p.CPUCum)
		w("<details><summary>allocated bytes</summary>\n\n```\n%s\n```\n\n</details>\n\n", p.Allocs)
	}
}
