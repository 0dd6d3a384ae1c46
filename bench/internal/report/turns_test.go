package report

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acpgate/acpgate/bench/internal/job"
)

// lat is a completed one-turn result whose per-turn p99 is p99.
func lat(p99 time.Duration) job.Result {
	return job.Result{Client: "floor", Streams: 1, Chunks: 1, Lat: &job.Latency{Count: 1, P99: int64(p99)}}
}

func TestTheTurnsCurveTakesTheMedianAndWorstPerTurnP99OfEachRoundAndCountsFailedTurns(t *testing.T) {
	label := job.OnNaive("gateway")
	tr := TurnsResult{Points: []TurnsPoint{
		{N: 1, Runs: map[string][][]job.Result{label: {{lat(2 * time.Millisecond)}, {lat(4 * time.Millisecond)}}}},
		{N: 3, Runs: map[string][][]job.Result{label: {
			{lat(1 * time.Millisecond), lat(9 * time.Millisecond), lat(3 * time.Millisecond)},
			{lat(5 * time.Millisecond), {Client: "gateway", Err: "boom"}, lat(7 * time.Millisecond)},
		}}},
	}}
	rows := tr.rows(label)
	if len(rows) != 2 || rows[0].N != 1 || rows[1].N != 3 {
		t.Fatalf("rows %+v, want one per N in order", rows)
	}
	ms := func(v ...float64) []float64 {
		for i := range v {
			v[i] *= 1e6
		}
		return v
	}
	want := []turnsRow{
		{N: 1, Median: ms(2, 4), Worst: ms(2, 4)},
		{N: 3, Median: ms(3, 6), Worst: ms(9, 7), Failed: 1},
	}
	for i, w := range want {
		g := rows[i]
		if !equalF(g.Median, w.Median) || !equalF(g.Worst, w.Worst) || g.Failed != w.Failed {
			t.Errorf("N=%d: got median %v worst %v failed %d, want %v %v %d", w.N, g.Median, g.Worst, g.Failed, w.Median, w.Worst, w.Failed)
		}
	}
	if m, w := TurnsP99([]job.Result{{Err: "x"}}); !math.IsNaN(m) || !math.IsNaN(w) {
		t.Errorf("no completed turn: got %v, %v, want NaN", m, w)
	}
}

func TestTheTurnsCurveTakesTheMedianPerTurnP99FromTheScheduleOfTheTurnsThatHaveOne(t *testing.T) {
	label := job.OnNaive("gateway")
	sched := func(p99, fromSchedule time.Duration) job.Result {
		r := lat(p99)
		r.Scheduled = &job.Latency{Count: 1, P99: int64(fromSchedule)}
		return r
	}
	tr := TurnsResult{Points: []TurnsPoint{{N: 3, Runs: map[string][][]job.Result{label: {
		{sched(time.Millisecond, 2*time.Millisecond), sched(time.Millisecond, 8*time.Millisecond), sched(time.Millisecond, 4*time.Millisecond)},
		{sched(time.Millisecond, 6*time.Millisecond), lat(time.Millisecond), {Client: "gateway", Err: "boom", Scheduled: &job.Latency{P99: 1}}},
		{lat(time.Millisecond)},
	}}}}}
	got := tr.rows(label)[0].Scheduled
	if want := []float64{4e6, 6e6}; !equalF(got, want) {
		t.Errorf("got %v, want %v: per round, the median over the completed turns with a schedule; none for a round without", got, want)
	}
}

func equalF(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-6 {
			return false
		}
	}
	return true
}

func TestALogBarGrowsByEqualStepsPerDecadeAndStaysWithinItsWidth(t *testing.T) {
	cases := []struct {
		v    float64
		want int
	}{
		{0.1, 0}, {1, 0}, {10, 10}, {100, 20}, {1000, 30}, {5000, 30}, {1.01, 1}, {math.NaN(), 0},
	}
	for _, c := range cases {
		if got := len([]rune(logBar(c.v, 1, 1000, 30))); got != c.want {
			t.Errorf("logBar(%v, 1, 1000, 30) has %d cells, want %d", c.v, got, c.want)
		}
	}
}

func TestTheTurnsPlotHasALinePerNAndClientWithTheLargestMedianAtFullWidth(t *testing.T) {
	floor, gw := job.OnNaive("floor"), job.OnNaive("gateway")
	tr := TurnsResult{Points: []TurnsPoint{
		{N: 1, Runs: map[string][][]job.Result{floor: {{lat(time.Millisecond)}}, gw: {{lat(2 * time.Millisecond)}}}},
		{N: 100, Runs: map[string][][]job.Result{floor: {{lat(3 * time.Millisecond)}}, gw: {{lat(500 * time.Millisecond)}}}},
	}}
	plot := tr.turnsPlot([]string{floor, gw})
	lines := strings.Split(strings.TrimSpace(plot), "\n")
	if len(lines) != 5 {
		t.Fatalf("plot has %d lines, want a header and 4:\n%s", len(lines), plot)
	}
	last := lines[4]
	if !strings.HasPrefix(last, "N=100") || !strings.Contains(last, gw) || !strings.Contains(last, strings.Repeat("█", 50)) || !strings.HasSuffix(last, "500.0 ms") {
		t.Errorf("the largest median's line is %q, want N=100, %s, a full bar and 500.0 ms", last, gw)
	}
	if strings.Count(lines[1], "█") >= strings.Count(lines[2], "█") {
		t.Errorf("N=1: the floor's bar is not shorter than the gateway's:\n%s", plot)
	}
}

func TestTheTurnsFirstChunkIsTheMedianAndLastOfTheCompletedTurns(t *testing.T) {
	first := func(d time.Duration) job.Result {
		r := lat(time.Millisecond)
		r.First = int64(d)
		return r
	}
	rs := []job.Result{first(3 * time.Millisecond), first(40 * time.Millisecond), first(5 * time.Millisecond), {Err: "x", First: int64(time.Second)}}
	m, l := TurnsFirst(rs)
	if m != float64(5*time.Millisecond) || l != float64(40*time.Millisecond) {
		t.Errorf("got median %v, last %v; want 5ms and 40ms (the failed turn left out)", time.Duration(m), time.Duration(l))
	}
	if m, l := TurnsFirst([]job.Result{{Err: "x"}}); !math.IsNaN(m) || !math.IsNaN(l) {
		t.Errorf("no completed turn: got %v, %v, want NaN", m, l)
	}
}

func TestEachRoundOfTheTurnsSectionRunsEveryClientOnceAndNoTwoRoundsStartAlike(t *testing.T) {
	for _, baseline := range []bool{false, true} {
		all := TurnsClients(baseline)
		firsts := map[string]bool{}
		for r := range len(turnsClients()) {
			order := TurnsOrder(r, baseline)
			if !slices.Equal(slices.Sorted(slices.Values(order)), slices.Sorted(slices.Values(all))) {
				t.Fatalf("baseline %v, round %d runs %q, not each of %q once", baseline, r, order, all)
			}
			for i, c := range order {
				if job.HasBaseline(c) && baseline && (i+1 >= len(order) || order[i+1] != job.OnBaseline(c)) {
					t.Errorf("baseline %v, round %d: %q is not followed by its baseline in %q", baseline, r, c, order)
				}
			}
			if firsts[order[0]] {
				t.Errorf("baseline %v, round %d starts with %q, as an earlier round did", baseline, r, order[0])
			}
			firsts[order[0]] = true
		}
	}
}
