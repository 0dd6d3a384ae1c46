package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// plan is what a run measures: the full benchmark or the smoke.
type plan struct {
	runs int

	floods []shape // unpaced

	pacedRates   []int
	pacedSeconds float64
	pacedSize    int
	// llm is the LLM-like stream: a slow pace of small chunks, measured
	// after the paced rates and, many at once, by the turns section.
	llm pace
	// turnsN are the numbers of simultaneous LLM-like one-shot turns the
	// turns section measures, turnsRuns the rounds over them.
	turnsN    []int
	turnsRuns int
	// answer is the flood whose peak gateway RSS the answer section reads
	// with the default client (which gets the whole text in the outcome).
	answer shape

	breakRates   []int // paced rates to find where the peer breaks
	breakRuns    int
	breakSeconds float64

	ttfcRuns int

	warmRuns    int           // one-shot turns warm, cold and on an open session
	warmSustain time.Duration // how long the sustained one-shot rate runs

	geminiRuns int // Gemini CLI's one-shot turns warm, cold and on an open session

	concStreams, concN, concRuns int

	idleSessions int

	bpN, bpSize, bpReadRate int

	storeFlood        shape // gateway-stream on sqlite and on memory, then replayed
	storePacedRate    int
	stallN, stallSize int // the flood a watcher never reads

	instrFlood shape // gateway-stream with metrics and tracing on and off

	clusterTurns int // turns on a session per path (owner, forwarded) for the time to first chunk

	profile []shape // floods run through a profiling acpgate serve
}

type shape struct {
	Name    string `json:"name"`
	N       int    `json:"n"`
	Size    int    `json:"size"`
	Runs    int    `json:"runs"`
	Purpose string `json:"purpose"`
}

// pace is a paced turn's shape: n chunks of size bytes at rate chunks/s.
type pace struct{ rate, n, size int }

// burstRuns is how many times more often than a flood the short burst is
// measured. A burst turn lasts a few milliseconds, so one scheduling delay
// or page-cache miss moves it by half; over 5 runs its ratio to the floor
// ranged 0.29 – 0.87 in one report and its median moved by a third from
// one report to the next on the same code. 25 runs cost under a minute.
const burstRuns = 5

func fullPlan(runs int) plan {
	return plan{
		runs: runs,
		floods: []shape{
			{"64 B flood", 200_000, 64, runs, "many small chunks: per-chunk overhead"},
			{"64 KiB flood", 2_000, 64 << 10, runs, "few large chunks: bytes moved (128 MiB of text)"},
			{"1,000-chunk burst", 1_000, 64, burstRuns * runs, "a burst the SDK peer survives (its queue holds 1,024)"},
		},
		pacedRates:   []int{1_000, 20_000, 50_000, 100_000},
		pacedSeconds: 3,
		pacedSize:    64,
		llm:          pace{rate: 100, n: 300, size: 40},
		turnsN:       []int{1, 10, 25, 50, 100},
		turnsRuns:    3,
		answer:       shape{Name: "64 KiB flood", N: 2_000, Size: 64 << 10, Runs: 1},
		breakRates:   []int{25_000, 30_000, 35_000, 40_000, 45_000, 60_000, 80_000},
		breakRuns:    3,
		breakSeconds: 2,
		ttfcRuns:     20,
		warmRuns:     20, warmSustain: 20 * time.Second,
		geminiRuns:  20,
		concStreams: 200, concN: 1_000, concRuns: 3,
		idleSessions: 1_000,
		bpN:          2_500, bpSize: 64 << 10, bpReadRate: 100,
		storeFlood:     shape{"64 B flood", 200_000, 64, runs, "the store's cost per chunk"},
		storePacedRate: 20_000,
		stallN:         16_384, stallSize: 64 << 10, // 1 GiB
		instrFlood: shape{"64 B flood", 200_000, 64, runs, "the instrumentation's cost per chunk"},
		profile: []shape{
			{"64 B flood", 200_000, 64, 2, ""},
			{"64 KiB flood", 2_000, 64 << 10, 2, ""},
		},
		clusterTurns: 500,
	}
}

func smokePlan() plan {
	return plan{
		runs: 1,
		floods: []shape{
			{"64 B flood", 2_000, 64, 1, "many small chunks: per-chunk overhead"},
			{"64 KiB flood", 20, 64 << 10, 1, "few large chunks: bytes moved"},
			{"1,000-chunk burst", 100, 64, 1, "a burst the SDK peer survives"},
		},
		pacedRates:   []int{1_000, 20_000},
		pacedSeconds: 0.2,
		pacedSize:    64,
		llm:          pace{rate: 100, n: 20, size: 40},
		turnsN:       []int{1, 3},
		turnsRuns:    1,
		answer:       shape{Name: "64 KiB flood", N: 20, Size: 64 << 10, Runs: 1},
		breakRates:   []int{30_000},
		breakRuns:    1,
		breakSeconds: 0.2,
		ttfcRuns:     2,
		warmRuns:     2, warmSustain: 3 * time.Second,
		geminiRuns:  2,
		concStreams: 10, concN: 100, concRuns: 1,
		idleSessions: 20,
		bpN:          30, bpSize: 64 << 10, bpReadRate: 100,
		storeFlood:     shape{"64 B flood", 2_000, 64, 1, "the store's cost per chunk"},
		storePacedRate: 20_000,
		stallN:         256, stallSize: 64 << 10,
		instrFlood: shape{"64 B flood", 2_000, 64, 1, "the instrumentation's cost per chunk"},
		profile: []shape{
			{"64 B flood", 2_000, 64, 1, ""},
		},
		clusterTurns: 10,
	}
}

// driver runs the sections and collects what the report needs.
type driver struct {
	plan  plan
	smoke bool
	root  string // the repository
	dir   string // binaries, configuration, logs
	self  string
	gwBin string
	// baseBin is acpgate built from the -baseline revision; "" without one.
	baseBin string
	agent   string
	keep    bool // keep the working directory, stores included
	// gemini is the Gemini CLI binary the gemini section measures; empty:
	// the section is skipped.
	gemini string

	rep      report
	failures []string
	logSeq   int

	only         map[string]bool // sections to run; all when empty
	quietWait    time.Duration
	retries      int
	interference interference

	// besides, when a section sets it, is the CPU time so far of the
	// processes it runs beside the gateway a job measures (PostgreSQL,
	// another replica, a session's agent), which are the harness's own
	// load, not foreign: all of it but what attempt reads of g itself.
	besides func(g *gatewayProc) time.Duration
}

// interference counts what other processes on the machine did to the
// measurements.
type interference struct {
	Jobs      int           `json:"jobs"`      // measurements kept
	Repeated  int           `json:"repeated"`  // measurements run again because of foreign load
	Waited    time.Duration `json:"waited"`    // total time spent waiting for a quiet machine
	NotQuiet  int           `json:"not_quiet"` // measurements started without a quiet machine
	Foreign   []float64     `json:"foreign"`   // per kept measurement: foreign CPU, in cores
	Disturbed int           `json:"disturbed"` // kept measurements still above the threshold
	Threshold float64       `json:"threshold"` // cores
}

func runDriver(args []string) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	smoke := fs.Bool("smoke", false, "tiny shapes, one run each: check that every client and section works and that no chunk is lost (for CI)")
	runs := fs.Int("runs", 5, "repetitions of each throughput and latency measurement")
	out := fs.String("out", "", "write the report (Markdown) here; default the repository's docs/benchmarks.md, none with -smoke")
	rawOut := fs.String("json", "", "also write every raw result here, as JSON")
	keep := fs.Bool("keep", false, "keep the working directory (binaries, configuration, gateway logs, profiles)")
	only := fs.String("sections", "", "run only these sections (comma-separated: throughput,paced,breaks,ttfc,warm,gemini,concurrency,turns,answer,idle,backpressure,store,stall,instrumentation,cluster,profiles)")
	quiet := fs.Duration("quiet", 30*time.Second, "before each measurement, wait up to this long for other processes to leave the CPU idle")
	gemini := fs.String("gemini", os.Getenv(geminiEnv), "the Gemini CLI binary the gemini section measures (default $"+geminiEnv+"); without one the section is skipped")
	retries := fs.Int("retries", 2, "repeat a measurement up to this many times when other processes used the CPU during it")
	baseline := fs.String("baseline", "", "also measure the throughput and paced sections on acpgate built from this git revision, side by side with the working tree's in the same run")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *smoke {
		// CI machines are busy by nature: the smoke checks correctness,
		// not speed, so it neither waits for quiet nor repeats.
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["quiet"] {
			*quiet = 0
		}
		if !set["retries"] {
			*retries = 0
		}
	}
	d := &driver{smoke: *smoke, keep: *keep, gemini: *gemini, quietWait: *quiet, retries: *retries, only: map[string]bool{}}
	for _, name := range strings.Split(*only, ",") {
		if name = strings.TrimSpace(name); name != "" {
			d.only[name] = true
		}
	}
	if *smoke {
		d.plan = smokePlan()
	} else {
		d.plan = fullPlan(max(1, *runs))
	}
	if err := d.setup(); err != nil {
		fmt.Fprintln(os.Stderr, "acpbench:", err)
		return 1
	}
	if *out == "" && !*smoke {
		*out = filepath.Join(d.root, "docs", "benchmarks.md")
	}
	if *keep {
		fmt.Fprintln(os.Stderr, "acpbench: working directory", d.dir)
	} else {
		defer os.RemoveAll(d.dir)
	}
	if *baseline != "" {
		if err := d.buildBaseline(*baseline); err != nil {
			fmt.Fprintln(os.Stderr, "acpbench:", err)
			return 1
		}
	}
	began := time.Now()
	d.rep.Machine = machineFacts(d.root)
	d.rep.Smoke = d.smoke
	d.section("throughput", d.throughput)
	d.section("paced", d.paced)
	d.section("breaks", d.breakScan)
	d.section("ttfc", d.ttfc)
	d.section("warm", d.warmSection)
	d.section("gemini", d.geminiSection)
	d.section("concurrency", d.concurrency)
	d.section("turns", d.turnsSection)
	d.section("answer", d.answerSection)
	d.section("idle", d.idle)
	d.section("backpressure", d.backpressure)
	d.section("store", d.storeSection)
	d.section("stall", d.stallSection)
	d.section("instrumentation", d.instrumentationSection)
	d.section("cluster", d.clusterSection)
	d.section("profiles", d.profiles)
	d.rep.Interference = d.interference
	d.rep.Duration = time.Since(began)
	d.rep.Failures = d.failures

	if *out != "" {
		path := *out
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "acpbench:", err)
			return 1
		}
		if err := os.WriteFile(path, []byte(d.rep.markdown()), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "acpbench:", err)
			return 1
		}
		fmt.Fprintln(os.Stderr, "acpbench: wrote", path)
	}
	if *rawOut != "" {
		b, _ := json.MarshalIndent(d.rep, "", "  ")
		if err := os.WriteFile(*rawOut, b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "acpbench:", err)
			return 1
		}
	}
	fmt.Fprint(os.Stderr, d.rep.summary())
	if len(d.failures) > 0 {
		fmt.Fprintf(os.Stderr, "acpbench: %d failure(s):\n", len(d.failures))
		for _, f := range d.failures {
			fmt.Fprintln(os.Stderr, "  -", f)
		}
		return 1
	}
	fmt.Fprintf(os.Stderr, "acpbench: done in %s, no chunk lost or reordered\n", time.Since(began).Round(time.Second))
	return 0
}

func (d *driver) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "acpbench: "+format+"\n", args...)
}

func (d *driver) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	d.failures = append(d.failures, msg)
	d.logf("FAIL: %s", msg)
}

// section runs one section, turning its error into a failure.
func (d *driver) section(name string, f func() error) {
	if len(d.only) > 0 && !d.only[name] {
		return
	}
	d.logf("== %s", name)
	start := time.Now()
	if err := f(); err != nil {
		d.fail("%s: %v", name, err)
	}
	d.logf("   %s took %s", name, time.Since(start).Round(100*time.Millisecond))
}

// setup finds the repository and builds acpgate and the test agent from it.
// The harness is a module of its own (bench/), so it looks upwards for the
// product module's go.mod and builds there: the test agent is under
// internal/, which only the product module may build.
func (d *driver) setup() error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.Contains(b, []byte("module github.com/acpgate/acpgate\n")) {
			d.root = dir
			break
		}
		if filepath.Dir(dir) == dir {
			return errors.New("run acpbench inside the acpgate repository (no go.mod of github.com/acpgate/acpgate above " + wd + ")")
		}
	}
	if d.self, err = os.Executable(); err != nil {
		return err
	}
	if d.dir, err = os.MkdirTemp("", "acpbench-"); err != nil {
		return err
	}
	d.gwBin = filepath.Join(d.dir, "acpgate")
	d.agent = filepath.Join(d.dir, "testagent")
	// The launcher beside acpgate, as a release and the image ship it.
	launcher := filepath.Join(d.dir, "acpgate-launcher")
	for _, b := range []struct{ out, pkg string }{{d.gwBin, "./cmd/acpgate"}, {launcher, "./cmd/acpgate-launcher"}, {d.agent, "./internal/testagent"}} {
		d.logf("building %s", b.pkg)
		cmd := exec.Command("go", "build", "-o", b.out, b.pkg)
		cmd.Dir = d.root
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %v\n%s", b.pkg, err, out)
		}
	}
	return nil
}

// gatewayConf is what a gateway's configuration varies in.
type gatewayConf struct {
	store        string // "sqlite" or "memory"; empty: the gateway's default (sqlite)
	maxTurnBytes int64  // limits.max_turn_bytes; 0: the gateway's default
	otlpURL      string // metrics on, and tracing to this OTLP/HTTP URL; "": both off
	agents       string // YAML of more agents, after the flood agent
	more         string // top-level YAML after the store (its postgres block, a cluster block)
	bin          string // the acpgate binary; "": the working tree's
	noStateDir   bool   // leave state_dir out (a baseline's trees may not know it)
}

// config is the configuration of one gateway, whose store (if it keeps one
// on disk) lives in stateDir.
func (d *driver) config(c gatewayConf, stateDir string) string {
	limits := fmt.Sprintf("max_sessions: %d, max_prompt_bytes: 1048576, max_frame_bytes: 16777216", max(1200, d.plan.idleSessions+200))
	if c.maxTurnBytes > 0 {
		limits += fmt.Sprintf(", max_turn_bytes: %d", c.maxTurnBytes)
	}
	store := ""
	if c.store != "" {
		store = "store: " + c.store + "\n"
	}
	store += c.more
	stateLine := fmt.Sprintf("state_dir: %q\n", stateDir)
	if c.noStateDir {
		stateLine = ""
	}
	return fmt.Sprintf(`# acpbench: the test agent behind the gateway.
listen: 127.0.0.1:0
shutdown_grace: 10s
%s%s%slimits: {%s}
agents:
  - name: %s
    description: acpgate's test agent (flood_timed)
    command: %q
    args: [--unique-sessions]
    turn_timeout: 30m
    idle_timeout: 30m
  - name: %s
    description: the naive floor's agent (one write per chunk)
    command: %q
    args: [agent]
    turn_timeout: 30m
    idle_timeout: 30m
%s`, store, instrumentationConfig(c.otlpURL), stateLine, limits, floodAgent, d.agent, naiveAgent, d.self, c.agents)
}

// gateway starts a fresh acpgate serve configured by c, with extra flags if
// any, and warms it up with one small turn. Every gateway gets a state
// directory of its own: a store's directory is locked by one gateway at a
// time, and one gateway's journals must not weigh on the next one's
// figures.
func (d *driver) gateway(c gatewayConf, extra ...string) (*gatewayProc, error) {
	d.logSeq++
	name := filepath.Join(d.dir, fmt.Sprintf("gateway-%02d", d.logSeq))
	stateDir := name + ".state"
	if err := os.Mkdir(stateDir, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(name+".yaml", []byte(d.config(c, stateDir)), 0o644); err != nil {
		return nil, err
	}
	bin := d.gwBin
	if c.bin != "" {
		bin = c.bin
	}
	g, err := startGateway(bin, name+".yaml", name+".log", stateDir, extra...)
	if err != nil {
		return nil, err
	}
	if r := d.job(g, Job{Client: "gateway", N: 100, Size: 64, Timeout: time.Minute}); r.failed() {
		_ = g.stop()
		return nil, fmt.Errorf("warm-up turn: %s", r.Err)
	}
	return g, nil
}

// stopGateway stops g and, unless the run keeps its working directory,
// deletes its store: the floods journal gigabytes.
func (d *driver) stopGateway(g *gatewayProc) {
	if err := g.stop(); err != nil {
		d.fail("%v (log: %s)", err, g.logf.Name())
	}
	if !d.keep {
		if err := os.RemoveAll(g.stateDir); err != nil {
			d.fail("removing a gateway's state directory: %v", err)
		}
	}
}

// foreignThreshold is the foreign load (cores, on average over a
// measurement) above which a measurement is repeated.
const foreignThreshold = 0.2

// job runs one measurement in a process of its own. It first waits for the
// machine to be quiet, and repeats the measurement (up to d.retries times)
// when other processes used more than foreignThreshold cores during it,
// keeping the least disturbed attempt.
func (d *driver) job(g *gatewayProc, j Job) Result {
	d.interference.Threshold = foreignThreshold
	var best Result
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
		d.logf("   (other processes used %.2f cores during that %s measurement: repeating it)", r.foreignCores(), j.Client)
	}
	d.interference.Jobs++
	d.interference.Foreign = append(d.interference.Foreign, best.foreignCores())
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
		b0, err := readSysBusy()
		if err != nil {
			return
		}
		time.Sleep(300 * time.Millisecond)
		b1, _ := readSysBusy()
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

func (r Result) foreignCores() float64 {
	if r.Wall <= 0 {
		return 0
	}
	return float64(r.Foreign) / float64(r.Wall)
}

// attempt runs the client process once and measures the CPU that other
// processes used meanwhile: the machine's busy time less the client's
// (with its agents), the gateway's (with the agents it reaped) and the
// driver's own.
func (d *driver) attempt(g *gatewayProc, j Job) Result {
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
		gw0, _ = readTreeCPU(g.pid())
	}
	self0 := selfCPU()
	var besides0 time.Duration
	if d.besides != nil {
		besides0 = d.besides(g)
	}
	sys0, _ := readSysBusy()
	start := time.Now()
	out, err := cmd.Output()
	wall := time.Since(start)
	if g != nil {
		// The gateway reaps a one-shot turn's agent just after the turn;
		// wait for that, so that the agent's CPU is counted as ours.
		for deadline := time.Now().Add(2 * time.Second); len(children(g.pid())) > 0 && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
	}
	sys1, _ := readSysBusy()
	ours := selfCPU() - self0
	if cmd.ProcessState != nil {
		ours += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	if g != nil {
		gw1, _ := readTreeCPU(g.pid())
		ours += gw1 - gw0
	}
	if d.besides != nil {
		ours += d.besides(g) - besides0
	}
	r := Result{Client: j.Client}
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
func (d *driver) check(what string, r Result) {
	if r.Client == "peer" && r.Broke {
		return
	}
	if r.failed() {
		d.fail("%s, %s: lost %d, out of order %d, error: %s", what, r.Client, r.Lost, r.OutOfOrder, r.Err)
	}
}

// ---- sections ----

func (d *driver) throughput() error {
	clients := throughputClients(d.baseBin != "")
	for _, sh := range d.plan.floods {
		g, err := d.gateway(gatewayConf{})
		if err != nil {
			return err
		}
		base, err := d.startBaseline(g)
		if err != nil {
			return err
		}
		sr := shapeResult{Shape: sh, Runs: map[string][]Result{}}
		for rep := range sh.Runs {
			for _, c := range clients {
				j := labelJob(c, sh.N, sh.Size)
				j.Timeout = 5 * time.Minute
				r := d.job(gatewayFor(c, g, base), j)
				r.Client = c
				d.check(sh.Name, r)
				sr.Runs[c] = append(sr.Runs[c], r)
				d.logf("   %s run %d %-9s %s", sh.Name, rep+1, c, r.brief(sh.N))
			}
		}
		if m, err := readMemory(g.pid()); err == nil {
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

func (d *driver) paced() error {
	clients := pacedClients(d.baseBin != "")
	var paces []pace
	for _, rate := range d.plan.pacedRates {
		paces = append(paces, pace{rate, max(100, int(float64(rate)*d.plan.pacedSeconds)), d.plan.pacedSize})
	}
	paces = append(paces, d.plan.llm)
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
		pr := pacedResult{Rate: rate, N: n, Size: size, Runs: map[string][]Result{}}
		for rep := range d.plan.runs {
			for _, c := range clients {
				j := labelJob(c, n, size)
				j.Rate, j.Latency, j.Timeout = rate, true, 5*time.Minute
				if c == floorLoaded {
					// What acpgate and the gateway's client burned in this
					// repetition, as two busy loops beside the floor.
					gr := pr.Runs["gateway"][rep]
					if !gr.ok() || gr.Turn <= 0 {
						continue
					}
					j.Load = []float64{float64(gr.GatewayCPU) / float64(gr.Turn), float64(gr.CPU) / float64(gr.Turn)}
				}
				r := d.job(gatewayFor(c, g, base), j)
				r.Client = c
				d.check(fmt.Sprintf("paced %d/s", rate), r)
				pr.Runs[c] = append(pr.Runs[c], r)
				d.logf("   %d/s run %d %-7s %s", rate, rep+1, c, r.brief(n))
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

func (d *driver) breakScan() error {
	for _, rate := range d.plan.breakRates {
		n := max(100, int(float64(rate)*d.plan.breakSeconds))
		br := breakResult{Rate: rate, N: n}
		for range d.plan.breakRuns {
			r := d.job(nil, Job{Client: "peer", N: n, Size: 64, Rate: rate, Timeout: 2 * time.Minute})
			d.check(fmt.Sprintf("peer at %d/s", rate), r)
			br.Runs = append(br.Runs, r)
		}
		d.logf("   peer at %d/s: survived %d of %d", rate, br.survived(), len(br.Runs))
		d.rep.Breaks = append(d.rep.Breaks, br)
	}
	return nil
}

func (d *driver) ttfc() error {
	g, err := d.gateway(gatewayConf{})
	if err != nil {
		return err
	}
	defer d.stopGateway(g)
	t := ttfcResult{Runs: map[string][]Result{}}
	for range d.plan.ttfcRuns {
		for _, c := range []string{"floor", "peer", "gateway"} {
			var gw *gatewayProc
			if c == "gateway" {
				gw = g
			}
			r := d.job(gw, Job{Client: c, N: 1, Size: 64, Timeout: time.Minute})
			d.check("time to first chunk", r)
			t.Runs[c] = append(t.Runs[c], r)
		}
	}
	d.rep.TTFC = &t
	return nil
}

func (d *driver) concurrency() error {
	g, err := d.gateway(gatewayConf{})
	if err != nil {
		return err
	}
	defer d.stopGateway(g)
	p := d.plan
	c := concResult{Streams: p.concStreams, N: p.concN, Size: 64, Runs: map[string][]Result{}}
	for rep := range p.concRuns {
		for _, client := range []string{"floor", "peer", "gateway"} {
			var gw *gatewayProc
			if client == "gateway" {
				gw = g
			}
			r := d.job(gw, Job{Client: client, N: p.concN, Size: 64, Streams: p.concStreams, Timeout: 10 * time.Minute})
			d.check("concurrency", r)
			c.Runs[client] = append(c.Runs[client], r)
			d.logf("   %d streams run %d %-7s %s", p.concStreams, rep+1, client, r.brief(p.concN*p.concStreams))
		}
	}
	if m, err := readMemory(g.pid()); err == nil {
		c.GatewayHWM = m.HWM
	}
	d.rep.Concurrency = &c
	return nil
}

// idle opens idleSessions sessions through CreateSession and measures the
// gateway's RSS before and after (agents are separate processes).
func (d *driver) idle() error {
	return d.withGateway(gatewayConf{}, d.idleOn)
}

// withGateway starts a gateway configured by c, runs f with a client of
// it, and stops it.
func (d *driver) withGateway(c gatewayConf, f func(ctx context.Context, g *gatewayProc, client acpgatev1.AgentGatewayClient) error) error {
	g, err := d.gateway(c)
	if err != nil {
		return err
	}
	defer d.stopGateway(g)
	ctx := context.Background()
	conn, client, err := dialGateway(ctx, g.addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	return f(ctx, g, client)
}

func (d *driver) idleOn(ctx context.Context, g *gatewayProc, client acpgatev1.AgentGatewayClient) error {
	res := idleResult{Target: d.plan.idleSessions}
	// Warm-up: a few sessions opened and closed, so that one-time
	// allocations are not charged to the sessions measured.
	for range 10 {
		s, err := client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: floodAgent})
		if err != nil {
			return fmt.Errorf("warm-up CreateSession: %w", err)
		}
		if _, err := client.CloseSession(ctx, &acpgatev1.CloseSessionRequest{SessionId: s.GetId()}); err != nil {
			return fmt.Errorf("warm-up CloseSession: %w", err)
		}
	}
	time.Sleep(2 * time.Second)
	before, err := readMemory(g.pid())
	if err != nil {
		return err
	}
	res.Before = before.RSS

	var (
		mu     sync.Mutex
		ids    []string
		errs   []string
		next   atomic.Int64
		wg     sync.WaitGroup
		create = time.Now()
	)
	for range 8 {
		wg.Go(func() {
			for next.Add(1) <= int64(res.Target) {
				s, err := client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: floodAgent})
				mu.Lock()
				if err != nil {
					errs = append(errs, err.Error())
				} else {
					ids = append(ids, s.GetId())
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.CreateTime = time.Since(create)
	res.Opened = len(ids)
	if len(errs) > 0 {
		res.Errors = len(errs)
		res.FirstError = errs[0]
		d.fail("idle sessions: %d of %d CreateSession calls failed, first: %s", len(errs), res.Target, errs[0])
	}
	list, err := client.ListSessions(ctx, &acpgatev1.ListSessionsRequest{})
	if err != nil {
		return err
	}
	res.Listed = len(list.GetSessions())
	time.Sleep(3 * time.Second)
	after, err := readMemory(g.pid())
	if err != nil {
		return err
	}
	res.After = after.RSS
	var agents int64
	kids := children(g.pid())
	for _, pid := range kids {
		if m, err := readMemory(pid); err == nil {
			agents += m.RSS
		}
	}
	res.Agents = len(kids)
	res.AgentsRSS = agents

	closeStart := time.Now()
	next.Store(0)
	for range 8 {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(len(ids)) {
					return
				}
				if _, err := client.CloseSession(ctx, &acpgatev1.CloseSessionRequest{SessionId: ids[i]}); err != nil {
					mu.Lock()
					errs = append(errs, err.Error())
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	res.CloseTime = time.Since(closeStart)
	time.Sleep(2 * time.Second)
	if m, err := readMemory(g.pid()); err == nil {
		res.Closed = m.RSS
	}
	d.logf("   %d sessions: RSS %s → %s (%s per session); after closing: %s",
		res.Opened, mib(res.Before), mib(res.After), kib(res.perSession()), mib(res.Closed))
	d.rep.Idle = &res
	return nil
}

// backpressure reads a flood at bpReadRate chunks/s and samples the
// gateway's RSS every 100 ms.
func (d *driver) backpressure() error {
	for _, client := range []string{"gateway", gatewayStream} {
		res, err := d.backpressureRun(client)
		if err != nil {
			return err
		}
		if client == gatewayStream {
			d.rep.BackpressureOmit = res
		} else {
			d.rep.Backpressure = res
		}
	}
	return nil
}

// backpressureRun is one slow-client turn on a fresh gateway.
func (d *driver) backpressureRun(client string) (*bpResult, error) {
	g, err := d.gateway(gatewayConf{})
	if err != nil {
		return nil, err
	}
	defer d.stopGateway(g)
	ctx := context.Background()
	conn, gc, err := dialGateway(ctx, g.addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	p := d.plan
	runtime.GC()
	time.Sleep(time.Second)
	base, err := readMemory(g.pid())
	if err != nil {
		return nil, err
	}
	res := bpResult{N: p.bpN, Size: p.bpSize, ReadRate: p.bpReadRate, Base: base.RSS}
	var read atomic.Int64
	stop := sampleRSS(g.pid(), 100*time.Millisecond, read.Load)
	j := Job{Client: client, N: p.bpN, Size: p.bpSize, Latency: true, Timeout: 10 * time.Minute}
	s := newStream(j)
	tctx, cancel := context.WithTimeout(ctx, j.Timeout)
	gatewayTurn(tctx, gc, j, s, p.bpReadRate, func(n int64) { read.Store(n) })
	cancel()
	res.Samples = stop()
	if m, err := readMemory(g.pid()); err == nil {
		res.HWM = m.HWM
	}
	res.Result = merge(j, client, time.Since(s.t0), cpuMark{}, []*stream{s})
	d.check("backpressure", res.Result)
	// How far ahead of the client the agent got: when the client read chunk
	// i, the agent had already sent every chunk stamped before that moment.
	k := 0
	for i := range s.arrived {
		for k < len(s.sent) && s.sent[k] <= s.arrived[i] {
			k++
		}
		res.MaxAhead = max(res.MaxAhead, k-(i+1))
	}
	if n := len(s.sent); n > 0 {
		res.AgentSpan = time.Duration(s.sent[n-1] - s.sent[0])
		res.LastSent = s.sent[n-1]
		res.ClientSpan = time.Duration(s.arrived[n-1] - s.arrived[0])
	}
	d.logf("   %s read %d chunks at %d/s in %s; RSS max %s over a base of %s; the agent was at most %d chunks ahead",
		client, res.Result.Chunks, p.bpReadRate, res.ClientSpan.Round(time.Millisecond), mib(res.maxRSS()), mib(res.Base), res.MaxAhead)
	return &res, nil
}

// brief is a one-line account of a result for the progress log.
func (r Result) brief(n int) string {
	switch {
	case r.Broke:
		return fmt.Sprintf("broke after %d chunks: %s", r.Chunks, r.Err)
	case r.Err != "":
		return "error: " + r.Err
	}
	s := fmt.Sprintf("%d/%d chunks", r.Chunks, n)
	if r.Turn > 0 {
		s += fmt.Sprintf(", %s chunks/s", fmtInt(r.rate()))
	} else if r.Streams > 1 {
		s += fmt.Sprintf(", %s chunks/s aggregate", fmtInt(float64(r.Chunks)/time.Duration(r.Wall).Seconds()))
	}
	if r.Lat != nil {
		s += fmt.Sprintf(", latency p50 %s p99 %s", fmtDur(r.Lat.P50), fmtDur(r.Lat.P99))
	}
	return s
}

// profiles runs floods through acpgate serve with its profiling
// flags (CPU from start to exit, allocations written after the clean
// shutdown that SIGTERM starts) and keeps `go tool pprof -top` of each.
func (d *driver) profiles() error {
	for i, sh := range d.plan.profile {
		base := filepath.Join(d.dir, fmt.Sprintf("profile-%02d", i+1))
		g, err := d.gateway(gatewayConf{}, "--cpuprofile", base+".cpu.prof", "--allocprofile", base+".allocs.prof")
		if err != nil {
			return err
		}
		var runs []Result
		for range sh.Runs {
			r := d.job(g, Job{Client: "gateway", N: sh.N, Size: sh.Size, Timeout: 5 * time.Minute})
			d.check("profile "+sh.Name, r)
			runs = append(runs, r)
		}
		d.stopGateway(g)
		pr := profileResult{Shape: sh, Runs: runs}
		for _, p := range []struct {
			dst  *string
			args []string
			file string
		}{
			{&pr.CPU, []string{"-top", "-nodecount=25"}, base + ".cpu.prof"},
			{&pr.CPUCum, []string{"-top", "-cum", "-nodecount=25"}, base + ".cpu.prof"},
			{&pr.Allocs, []string{"-top", "-sample_index=alloc_space", "-nodecount=20"}, base + ".allocs.prof"},
		} {
			// pprof reads the symbols from the binary that wrote the profile.
			cmd := exec.Command("go", slices.Concat([]string{"tool", "pprof"}, p.args, []string{d.gwBin, p.file})...)
			cmd.Dir = d.root
			out, err := cmd.Output()
			if err != nil {
				return fmt.Errorf("go tool pprof %v %s: %v", p.args, filepath.Base(p.file), err)
			}
			*p.dst = trimPprof(string(out))
		}
		d.logf("   profiled %s: %d runs", sh.Name, len(runs))
		d.rep.Profiles = append(d.rep.Profiles, pr)
	}
	return nil
}

// trimPprof drops pprof's header lines that name local files.
func trimPprof(s string) string {
	var keep []string
	for _, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if strings.HasPrefix(line, "File:") || strings.HasPrefix(line, "Build ID:") || strings.HasPrefix(line, "Time:") {
			continue
		}
		keep = append(keep, line)
	}
	return strings.Join(keep, "\n")
}
