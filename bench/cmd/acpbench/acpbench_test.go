package main

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/acpgate/acpgate/bench/internal/job"
)

func TestFormatting(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{fmtInt(1234567), "1,234,567"},
		{fmtInt(-1234), "-1,234"},
		{fmtInt(999), "999"},
		{fmtDur(1500), "1 µs"},
		{fmtDur(2_500_000), "2.50 ms"},
		{fmtDur(25_000_000), "25.0 ms"},
		{fmtDur(2_500_000_000), "2.50 s"},
		{fmtDurF(math.NaN()), "—"},
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
		r := report{Cluster: &clusterResult{Flood: shape{Size: 64}, Session: map[string][]job.Result{
			pathLocal:     {run(1e9), run(1e9)},
			pathForwarded: {run(forwarded), run(forwarded)},
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

func TestABaselinesGatewayIsConfiguredWithoutStateDirAndItsResultsAreLabelled(t *testing.T) {
	d := &driver{agent: "/bin/agent", plan: fullPlan(1), baseBin: "/bin/acpgate-baseline"}
	own := d.config(gatewayConf{}, "/state/g1")
	base := d.config(d.baselineConf(), "/state/g2")
	if !strings.Contains(own, `state_dir: "/state/g1"`) {
		t.Fatalf("the working tree's gateway has no state_dir:\n%s", own)
	}
	if strings.Contains(base, "state_dir") {
		t.Fatalf("the baseline's gateway names a state_dir, which trees from before durable turns refuse:\n%s", base)
	}
	if strings.Replace(own, "state_dir: \"/state/g1\"\n", "", 1) != base {
		t.Fatalf("the two configurations differ beyond state_dir:\n%s\n---\n%s", own, base)
	}
	for _, c := range []string{"gateway", job.GatewayStream} {
		if l := job.OnBaseline(c); l == c || job.ClientOf(l) != c || job.ClientOf(c) != c {
			t.Fatalf("label %q of client %q runs %q", l, c, job.ClientOf(l))
		}
	}
}

func TestWithABaselineEachGatewayClientsTurnOnItFollowsItsTurnOnTheWorkingTree(t *testing.T) {
	own, base := &gatewayProc{}, &gatewayProc{}
	for name, clients := range map[string]func(bool) []string{"throughput": throughputClients, "paced": pacedClients} {
		without, with := clients(false), clients(true)
		var got []string
		for _, c := range with {
			if !job.IsBaseline(c) {
				got = append(got, c)
			}
			switch gw := gatewayFor(c, own, base); {
			case !job.ViaGateway(c) && gw != nil:
				t.Errorf("%s: %q, which calls an agent, is given a gateway", name, c)
			case job.ViaGateway(c) && !job.IsBaseline(c) && gw != own:
				t.Errorf("%s: %q does not call the working tree's gateway", name, c)
			case job.ViaGateway(c) && job.IsBaseline(c) && gw != base:
				t.Errorf("%s: %q does not call the baseline's gateway", name, c)
			}
		}
		if !slices.Equal(got, without) {
			t.Errorf("%s: the working tree's clients with a baseline are %q, without %q", name, got, without)
		}
		for i, c := range with {
			if job.ViaGateway(c) && !job.IsBaseline(c) && (i+1 >= len(with) || with[i+1] != job.OnBaseline(c)) {
				t.Errorf("%s: %q is not followed by %q in %q", name, c, job.OnBaseline(c), with)
			}
		}
	}
	// The loaded floor takes its load from the working tree's gateway run
	// of the same repetition, so it runs after it.
	if with := pacedClients(true); with[len(with)-1] != job.FloorLoaded {
		t.Errorf("paced: %q is not last in %q", job.FloorLoaded, with)
	}
}
