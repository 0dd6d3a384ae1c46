package report

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/acpgate/acpgate/bench/internal/job"
)

func TestFormatting(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{FmtInt(1234567), "1,234,567"},
		{FmtInt(-1234), "-1,234"},
		{FmtInt(999), "999"},
		{FmtDur(1500), "1 µs"},
		{FmtDur(2_500_000), "2.50 ms"},
		{FmtDur(25_000_000), "25.0 ms"},
		{FmtDur(2_500_000_000), "2.50 s"},
		{FmtDurF(math.NaN()), "—"},
		{mmm([]float64{3, 1, 2}, fmtRatio), "2.00 (1.00 – 3.00)"},
		{mmm(nil, fmtRatio), "—"},
		{size(65536), "64 KiB"},
		{size(64), "64 B"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestRatiosPairRuns(t *testing.T) {
	ok := func(turn int64) job.Result { return job.Result{Chunks: 100, Turn: turn} }
	broke := job.Result{Broke: true, Err: "x"}
	got := ratios([]job.Result{ok(1e9), ok(2e9), ok(1e9)}, []job.Result{ok(5e8), broke, ok(1e9)}, job.Result.Rate)
	if len(got) != 2 || got[0] != 0.5 || got[1] != 1 {
		t.Fatalf("%v", got)
	}
}

func TestAForwardedFloodUnderSevenTenthsOfTheLocalOneMissesItsTarget(t *testing.T) {
	run := func(turn int64) job.Result { return job.Result{Chunks: 100, Turn: turn} }
	flood := func(forwarded int64) verdict {
		r := Report{Cluster: &ClusterResult{Flood: Shape{Size: 64}, Session: map[string][]job.Result{
			PathLocal:     {run(1e9), run(1e9)},
			PathForwarded: {run(forwarded), run(forwarded)},
		}}}
		for _, v := range r.clusterVerdicts() {
			if strings.Contains(v.Figure, "forwarded / local") {
				return v
			}
		}
		t.Fatal("no verdict of the forwarded flood")
		return verdict{}
	}
	if v := flood(1.25e9); !v.Known || !v.Met {
		t.Errorf("forwarded at 0.8 of local: %+v, want met", v)
	}
	if v := flood(1.6e9); !v.Known || v.Met {
		t.Errorf("forwarded at 0.625 of local: %+v, want missed", v)
	}
	if got := fmtSigned(-1_500_000) + " " + fmtSigned(2_500_000); got != "-1.50 ms +2.50 ms" {
		t.Errorf("fmtSigned: %q", got)
	}
}

func TestTheFirstChunkSectionPutsTheBaselinesGatewayBesideTheWorkingTreesWhenItRan(t *testing.T) {
	first := func(ms ...int64) []job.Result {
		var rs []job.Result
		for _, m := range ms {
			rs = append(rs, job.Result{Chunks: 1, First: m * 1e6})
		}
		return rs
	}
	r := &Report{Baseline: "a808356", TTFC: &TTFCResult{Runs: map[string][]job.Result{
		"floor": first(4, 5, 6), "gateway": first(9, 10, 11),
	}}}
	var without strings.Builder
	r.ttfcMD(func(f string, a ...any) { fmt.Fprintf(&without, f, a...) })
	if strings.Contains(without.String(), "baseline") {
		t.Errorf("a run without the baseline's gateway speaks of it:\n%s", without.String())
	}
	r.TTFC.Runs[job.OnBaseline("gateway")] = first(7, 8, 9)
	var with strings.Builder
	r.ttfcMD(func(f string, a ...any) { fmt.Fprintf(&with, f, a...) })
	if want := "The baseline's gateway (a808356), its turn right after the working tree's in each run: 8.00 ms to the first chunk (median), the working tree's / the baseline's 1.25."; !strings.Contains(with.String(), want) {
		t.Errorf("the section does not say %q:\n%s", want, with.String())
	}
}
