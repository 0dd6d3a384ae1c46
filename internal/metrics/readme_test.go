package metrics

import (
	"context"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// documented is one row of the metric table of docs/observability.md.
type documented struct {
	kind   string   // counter, gauge, histogram
	labels []string // sorted
}

// readmeTable is the metric table of docs/observability.md, by metric name.
func readmeTable(t *testing.T) map[string]documented {
	t.Helper()
	_, section, ok := strings.Cut(readmeObservability(t), "\n## Metrics\n")
	if !ok {
		t.Fatal("docs/observability.md has no Metrics section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	backticked := regexp.MustCompile("`([a-z_]+)`")
	out := map[string]documented{}
	for line := range strings.SplitSeq(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 6 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue // not a metric row
		}
		var labels []string
		for _, m := range backticked.FindAllStringSubmatch(cells[3], -1) {
			labels = append(labels, m[1])
		}
		slices.Sort(labels)
		for _, m := range backticked.FindAllStringSubmatch(cells[1], -1) {
			out[m[1]] = documented{kind: strings.TrimSpace(cells[2]), labels: labels}
		}
	}
	return out
}

// everyFamily records something in every metric of a registry (each
// agent method, a limit per agent, the gRPC metrics of a server with a
// service) and gathers it, so that each labelled metric has a series to
// show its type and labels.
func everyFamily(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	m := New(Limits{MaxSessions: 1, AgentMaxSessions: map[string]int{"a": 1}})
	a := m.Agent("a")
	a.TurnStarted()
	a.Chunk(1)
	a.FirstChunk(time.Millisecond)
	a.TurnEnded(ClassOutcome, ReasonNone, time.Second, 1, 1)
	a.Cost("USD", 1)
	a.JournalWrite(time.Millisecond, 1)
	a.Started(time.Millisecond)
	a.StartWaited(time.Millisecond)
	a.StartFailed("transport")
	a.SessionOpened()
	a.Warm(1, 1)
	a.SessionStarted(true)
	c := m.Cluster()
	c.LiveReplicas(2)
	c.RenewalFailed()
	c.Reaped(1)
	c.Relayed("/acpgate.v1.AgentGateway/Prompt")
	w := m.Webhooks()
	w.Finished(WebhookDelivered)
	w.Failed()
	w.OldestPending(1)
	s := grpc.NewServer()
	healthpb.RegisterHealthServer(s, health.NewServer())
	m.InitializeGRPC(s)
	unary, _ := m.Interceptors(nil, nil, nil)
	info := &grpc.UnaryServerInfo{FullMethod: "/grpc.health.v1.Health/Check"}
	if _, err := unary[0](context.Background(), nil, info, func(context.Context, any) (any, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), "acpgate_") || strings.HasPrefix(f.GetName(), "grpc_server_") {
			out[f.GetName()] = f
		}
	}
	return out
}

func TestTheMetricTableGivesEachMetricsTypeAndLabelsAsTheRegistryHasThem(t *testing.T) {
	table := readmeTable(t)
	fams := everyFamily(t)
	if listed, gathered := slices.Sorted(maps.Keys(table)), slices.Sorted(maps.Keys(fams)); !slices.Equal(listed, gathered) {
		t.Errorf("the docs' table lists %v,\nthe registry has %v", listed, gathered)
	}
	for name, f := range fams {
		row, ok := table[name]
		if !ok {
			continue // reported above
		}
		if kind := strings.ToLower(f.GetType().String()); row.kind != kind {
			t.Errorf("the docs say %s is a %s; it is a %s", name, row.kind, kind)
		}
		var labels []string
		for _, l := range f.GetMetric()[0].GetLabel() {
			labels = append(labels, l.GetName())
		}
		slices.Sort(labels)
		if !slices.Equal(row.labels, labels) {
			t.Errorf("the docs give %s the labels %v; it has %v", name, row.labels, labels)
		}
	}
}
