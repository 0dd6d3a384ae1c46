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
	"strings"
	"time"

	"github.com/acpgate/acpgate/bench/internal/clients"
	"github.com/acpgate/acpgate/bench/internal/job"
	"github.com/acpgate/acpgate/bench/internal/report"
	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// driver runs the sections and collects what the report needs.
type driver struct {
	plan  plan
	smoke bool
	root  string // the repository
	dir   string // binaries, configuration, logs
	self  string
	gwBin string
	// launcher is acpgate-launcher, built beside gwBin.
	launcher string
	// baseBin is acpgate built from the -baseline revision; "" without one.
	baseBin string
	agent   string
	keep    bool // keep the working directory, stores included
	// gemini is the Gemini CLI binary the gemini section measures; empty:
	// the section is skipped.
	gemini string

	rep      report.Report
	failures []string
	logSeq   int

	only         map[string]bool // sections to run; all when empty
	quietWait    time.Duration
	retries      int
	interference report.Interference

	// besides, when a section sets it, is the CPU time so far of the
	// processes it runs beside the gateway a job measures (PostgreSQL,
	// another replica, a session's agent), which are the harness's own
	// load, not foreign: all of it but what attempt reads of g itself.
	besides func(g *gatewayProc) time.Duration
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
	baseline := fs.String("baseline", "", "also measure the throughput, paced, turns and ttfc sections on acpgate built from this git revision, side by side with the working tree's in the same run")
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
		if err := os.WriteFile(path, []byte(d.rep.Markdown()), 0o644); err != nil {
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
	fmt.Fprint(os.Stderr, d.rep.Summary())
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

// logf writes a line of the run's progress to stderr, beside the report.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "acpbench: "+format+"\n", args...)
}

func (d *driver) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	d.failures = append(d.failures, msg)
	logf("FAIL: %s", msg)
}

// section runs one section, turning its error into a failure.
func (d *driver) section(name string, f func() error) {
	if len(d.only) > 0 && !d.only[name] {
		return
	}
	logf("== %s", name)
	start := time.Now()
	if err := f(); err != nil {
		d.fail("%s: %v", name, err)
	}
	logf("   %s took %s", name, time.Since(start).Round(100*time.Millisecond))
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
	d.launcher = filepath.Join(d.dir, "acpgate-launcher")
	for _, b := range []struct{ out, pkg string }{{d.gwBin, "./cmd/acpgate"}, {d.launcher, "./cmd/acpgate-launcher"}, {d.agent, "./internal/testagent"}} {
		logf("building %s", b.pkg)
		if err := releaseBuild(d.root, b.out, b.pkg); err != nil {
			return err
		}
	}
	return nil
}

// releaseBuild builds pkg, in the module at dir, into out as `make release`
// and the container image build acpgate: static (CGO_ENABLED=0), with
// -trimpath, stripped. The measured binaries are the ones users run: a
// cgo build is linked dynamically, and its every start (the launcher's
// runs once per agent start) loads the C library first, about 1 ms on
// this machine.
func releaseBuild(dir, out, pkg string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
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
%s`, store, instrumentationConfig(c.otlpURL), stateLine, limits, job.FloodAgent, d.agent, job.NaiveAgent, d.self, c.agents)
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
	if r := d.job(g, job.Job{Client: "gateway", N: 100, Size: 64, Timeout: time.Minute}); r.Failed() {
		_ = g.stop()
		return nil, fmt.Errorf("warm-up turn: %s", r.Err)
	}
	return g, nil
}

// relay starts the relay (job.Relay), with a warm-up turn as gateway gives
// a gateway.
func (d *driver) relay() (*gatewayProc, error) {
	d.logSeq++
	g, err := startRelay(d.self, filepath.Join(d.dir, fmt.Sprintf("relay-%02d.log", d.logSeq)))
	if err != nil {
		return nil, err
	}
	if r := d.job(g, job.Job{Client: job.Relay, Naive: true, N: 100, Size: 64, Timeout: time.Minute}); r.Failed() {
		_ = g.stop()
		return nil, fmt.Errorf("the relay's warm-up turn: %s", r.Err)
	}
	return g, nil
}

// stopGateway stops g and, unless the run keeps its working directory,
// deletes its store: the floods journal gigabytes.
func (d *driver) stopGateway(g *gatewayProc) {
	if err := g.stop(); err != nil {
		d.fail("%v (log: %s)", err, g.logf.Name())
	}
	if !d.keep && g.stateDir != "" {
		if err := os.RemoveAll(g.stateDir); err != nil {
			d.fail("removing a gateway's state directory: %v", err)
		}
	}
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
	conn, client, err := clients.DialGateway(ctx, g.addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	return f(ctx, g, client)
}
