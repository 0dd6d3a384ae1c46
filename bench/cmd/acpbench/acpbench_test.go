package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/acpgate/acpgate/bench/internal/job"
	"github.com/acpgate/acpgate/bench/internal/report"
)

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
	own, base, relay := &gatewayProc{}, &gatewayProc{}, &gatewayProc{}
	for name, clients := range map[string]func(bool) []string{"throughput": report.ThroughputClients, "paced": report.PacedClients, "ttfc": report.TTFCClients, "turns": report.TurnsClients} {
		without, with := clients(false), clients(true)
		var got []string
		for _, c := range with {
			if !job.IsBaseline(c) {
				got = append(got, c)
			}
			switch gw := serverFor(c, servers{own: own, base: base, relay: relay}); {
			case job.ViaRelay(c) && gw != relay:
				t.Errorf("%s: %q does not call the relay", name, c)
			case job.ViaRelay(c):
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
			if job.HasBaseline(c) && (i+1 >= len(with) || with[i+1] != job.OnBaseline(c)) {
				t.Errorf("%s: %q is not followed by %q in %q", name, c, job.OnBaseline(c), with)
			}
		}
	}
	// The loaded floor takes its load from the working tree's gateway run
	// of the same repetition, so it runs after it.
	if with := report.PacedClients(true); with[len(with)-1] != job.FloorLoaded {
		t.Errorf("paced: %q is not last in %q", job.FloorLoaded, with)
	}
}
