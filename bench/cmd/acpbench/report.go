package main

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/acpgate/acpgate/bench/internal/job"
)

// report is everything a run measured.
type report struct {
	Smoke    bool          `json:"smoke"`
	Machine  machine       `json:"machine"`
	Duration time.Duration `json:"duration"`
	Failures []string      `json:"failures"`
	// Baseline is the revision whose acpgate the throughput section also
	// measured (-baseline), "" when none.
	Baseline string `json:"baseline,omitempty"`

	Throughput   []shapeResult `json:"throughput"`
	Paced        []pacedResult `json:"paced"`
	Breaks       []breakResult `json:"breaks"`
	TTFC         *ttfcResult   `json:"ttfc"`
	Warm         *warmResult   `json:"warm"`
	Gemini       *geminiResult `json:"gemini"`
	Concurrency  *concResult   `json:"concurrency"`
	Turns        *turnsResult  `json:"turns"`
	Answer       *answerResult `json:"answer"`
	Idle         *idleResult   `json:"idle"`
	Backpressure *bpResult     `json:"backpressure"`
	// BackpressureOmit is the same slow client with omit_outcome_text.
	BackpressureOmit *bpResult       `json:"backpressure_omit"`
	Store            *storeResult    `json:"store"`
	Instrumentation  *instrResult    `json:"instrumentation"`
	Cluster          *clusterResult  `json:"cluster"`
	Profiles         []profileResult `json:"profiles"`
	Interference     interference    `json:"interference"`
}

type profileResult struct {
	Shape  shape        `json:"shape"`
	Runs   []job.Result `json:"runs"`
	CPU    string       `json:"cpu"`
	CPUCum string       `json:"cpu_cum"`
	Allocs string       `json:"allocs"`
}

type machine struct {
	CPU    string `json:"cpu"`
	Cores  int    `json:"cores"`
	Memory int64  `json:"memory"`
	Kernel string `json:"kernel"`
	Go     string `json:"go"`
	Commit string `json:"commit"`
	Date   string `json:"date"`
}

type shapeResult struct {
	Shape      shape                   `json:"shape"`
	Runs       map[string][]job.Result `json:"runs"`
	GatewayHWM int64                   `json:"gateway_hwm"`
	GatewayRSS int64                   `json:"gateway_rss"`
}

type pacedResult struct {
	Rate int                     `json:"rate"`
	N    int                     `json:"n"`
	Size int                     `json:"size"`
	Runs map[string][]job.Result `json:"runs"`
}

type breakResult struct {
	Rate int          `json:"rate"`
	N    int          `json:"n"`
	Runs []job.Result `json:"runs"`
}

func (b breakResult) survived() int {
	n := 0
	for _, r := range b.Runs {
		if !r.Broke && !r.Failed() {
			n++
		}
	}
	return n
}

type ttfcResult struct {
	Runs map[string][]job.Result `json:"runs"`
}

type concResult struct {
	Streams    int                     `json:"streams"`
	N          int                     `json:"n"`
	Size       int                     `json:"size"`
	Runs       map[string][]job.Result `json:"runs"`
	GatewayHWM int64                   `json:"gateway_hwm"`
}

type idleResult struct {
	Target     int           `json:"target"`
	Opened     int           `json:"opened"`
	Listed     int           `json:"listed"`
	Errors     int           `json:"errors"`
	FirstError string        `json:"first_error,omitempty"`
	Before     int64         `json:"before"`
	After      int64         `json:"after"`
	Closed     int64         `json:"closed"`
	Agents     int           `json:"agents"`
	AgentsRSS  int64         `json:"agents_rss"`
	CreateTime time.Duration `json:"create_time"`
	CloseTime  time.Duration `json:"close_time"`
}

func (r idleResult) perSession() int64 {
	if r.Opened == 0 {
		return 0
	}
	return (r.After - r.Before) / int64(r.Opened)
}

type bpSample struct {
	At   time.Duration `json:"at"`
	Unix int64         `json:"unix"` // when, in Unix ns
	RSS  int64         `json:"rss"`
	Read int64         `json:"read"`
}

type bpResult struct {
	N          int           `json:"n"`
	Size       int           `json:"size"`
	ReadRate   int           `json:"read_rate"`
	Base       int64         `json:"base"`
	HWM        int64         `json:"hwm"`
	Samples    []bpSample    `json:"samples"`
	Result     job.Result    `json:"result"`
	MaxAhead   int           `json:"max_ahead"`
	AgentSpan  time.Duration `json:"agent_span"`
	LastSent   int64         `json:"last_sent"` // the agent's last chunk, Unix ns
	ClientSpan time.Duration `json:"client_span"`
}

// heldBack reports whether the agent stayed within a pipe's worth of the
// client (64 KiB of pipe, a few frames in acpgate and gRPC's windows): the
// client's pace held it back.
func (b bpResult) heldBack() bool { return int64(b.MaxAhead)*int64(b.Size) <= 16<<20 }

// streaming are the samples taken while the agent was still sending (before
// its last chunk), that is before acpgate could start building the outcome.
func (b bpResult) streaming() []bpSample {
	var out []bpSample
	for _, s := range b.Samples {
		if s.Unix < b.LastSent {
			out = append(out, s)
		}
	}
	return out
}

// maxRSS is the largest RSS sampled while the chunks streamed.
func (b bpResult) maxRSS() int64 {
	var m int64
	for _, s := range b.streaming() {
		m = max(m, s.RSS)
	}
	return m
}

// maxExcess is the largest RSS, while the chunks streamed, over the base
// and the text the client had read by then (text the gateway keeps for the
// outcome).
func (b bpResult) maxExcess() int64 {
	var m int64
	for _, s := range b.streaming() {
		m = max(m, s.RSS-b.Base-s.Read*int64(b.Size))
	}
	return m
}

// ---- measures ----

// oks returns f of every run that completed.
func oks(rs []job.Result, f func(job.Result) float64) []float64 {
	var v []float64
	for _, r := range rs {
		if r.OK() {
			v = append(v, f(r))
		}
	}
	return v
}

// ratios pairs run i of a with run i of b (measured back to back) and
// returns f(a)/f(b) wherever both completed.
func ratios(a, b []job.Result, f func(job.Result) float64) []float64 {
	var v []float64
	for i := range min(len(a), len(b)) {
		if a[i].OK() && b[i].OK() && f(b[i]) > 0 {
			v = append(v, f(a[i])/f(b[i]))
		}
	}
	return v
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// mmm formats "median (min – max)", or the single value.
func mmm(v []float64, f func(float64) string) string {
	if len(v) == 0 {
		return "—"
	}
	m := f(median(v))
	lo, hi := f(slices.Min(v)), f(slices.Max(v))
	if len(v) == 1 || lo == hi {
		return m
	}
	return fmt.Sprintf("%s (%s – %s)", m, lo, hi)
}

// ---- formatting ----

func fmtInt(x float64) string {
	if math.IsNaN(x) {
		return "—"
	}
	s := fmt.Sprintf("%d", int64(math.Round(x)))
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func fmtDur(ns int64) string {
	d := time.Duration(ns)
	switch {
	case d == math.MinInt64:
		return "—"
	case d < 0:
		return "-" + fmtDur(-ns)
	case d < time.Millisecond:
		return fmt.Sprintf("%d µs", d.Microseconds())
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	case d < time.Second:
		return fmt.Sprintf("%.1f ms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
}

func fmtDurF(ns float64) string {
	if math.IsNaN(ns) {
		return "—"
	}
	return fmtDur(int64(ns))
}

func fmtRatio(x float64) string {
	if math.IsNaN(x) {
		return "—"
	}
	return fmt.Sprintf("%.2f", x)
}

func fmt1(x float64) string {
	if math.IsNaN(x) {
		return "—"
	}
	return fmt.Sprintf("%.1f", x)
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func kib(b int64) string { return fmt.Sprintf("%.0f KiB", float64(b)/(1<<10)) }

func size(b int) string {
	if b >= 1<<10 && b%(1<<10) == 0 {
		return fmt.Sprintf("%d KiB", b>>10)
	}
	return fmt.Sprintf("%d B", b)
}

// ---- machine ----

func machineFacts(root string) machine {
	m := machine{Cores: runtime.NumCPU(), Go: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
		Date: time.Now().UTC().Format("2006-01-02 15:04 UTC")}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err == nil {
			m.Memory = kb << 10
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(b))
	}
	// Read-only git queries (no optional index lock).
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GIT_OPTIONAL_LOCKS=0")
		out, err := cmd.Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(out))
	}
	if c := git("rev-parse", "--short", "HEAD"); c != "" {
		m.Commit = c
		if git("status", "--porcelain", "--untracked-files=no") != "" {
			m.Commit += " with uncommitted changes"
		}
	}
	return m
}
