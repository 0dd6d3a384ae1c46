package metrics

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// readmeMetrics are the metric names docs/observability.md
// lists, of the gateway's own and the gRPC server's.
func readmeMetrics(t *testing.T) []string {
	t.Helper()
	return sortedSet(regexp.MustCompile("`((?:acpgate|grpc_server)_[a-z_]+)`").FindAllStringSubmatch(readmeObservability(t), -1))
}

// readmeObservability is the observability guide, docs/observability.md.
func readmeObservability(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(doc)
}

func sortedSet(matches [][]string) []string {
	var out []string
	for _, m := range matches {
		out = append(out, m[1])
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func TestTheObservabilityGuideListsExactlyTheMetricsTheRegistryDescribes(t *testing.T) {
	m := New(Limits{MaxSessions: 1})
	descs := make(chan *prometheus.Desc, 256)
	go func() {
		m.Registry().Describe(descs)
		close(descs)
	}()
	var text strings.Builder
	for d := range descs {
		text.WriteString(d.String() + "\n")
	}
	described := sortedSet(regexp.MustCompile(`fqName: "((?:acpgate|grpc_server)_[a-z_]+)"`).FindAllStringSubmatch(text.String(), -1))
	if listed := readmeMetrics(t); !slices.Equal(listed, described) {
		t.Errorf("docs/observability.md lists %v,\nthe registry describes %v", listed, described)
	}
}

func TestANilRecorderRecordsNothingAndDoesNotPanic(t *testing.T) {
	var m *Metrics
	a := m.Agent("x")
	a.TurnStarted()
	a.Chunk(10)
	a.FirstChunk(0)
	a.TurnEnded(ClassOutcome, ReasonNone, 0, 1, 1)
	a.Cost("USD", 1)
	a.JournalWrite(0, 1)
	a.Started(0)
	a.StartFailed("transport")
	a.SessionOpened()
	a.SessionClosed()
	a.Warm(1, 1)
	a.SessionStarted(false)
	a.TurnDone()
	m.InitializeGRPC(nil)
	if u, s := m.Interceptors(nil, nil, nil); u != nil || s != nil {
		t.Error("without metrics the interceptor chains changed")
	}
}

func TestAChunkAllocatesNothing(t *testing.T) {
	a := New(Limits{}).Agent("x")
	if n := testing.AllocsPerRun(1000, func() { a.Chunk(100) }); n != 0 {
		t.Errorf("a chunk allocates %v times", n)
	}
}

func TestClassifyGivesEachTerminalAClassAndAReasonFromAFixedSet(t *testing.T) {
	code := int32(-32603)
	cases := []struct {
		e             *acpgatev1.HarnessError
		class, reason string
	}{
		{nil, "outcome", ""},
		{&acpgatev1.HarnessError{Kind: &acpgatev1.HarnessError_Transport{Transport: &acpgatev1.TransportFailure{Reason: acpgatev1.TransportReason_TRANSPORT_REASON_STREAM_ENDED}}}, "transport", "stream_ended"},
		{&acpgatev1.HarnessError{Kind: &acpgatev1.HarnessError_Harness{Harness: &acpgatev1.HarnessFailure{StopKind: acpgatev1.StopKind_STOP_KIND_CANCELLED, Cancelled: true}}}, "harness", "cancelled"},
		{&acpgatev1.HarnessError{Kind: &acpgatev1.HarnessError_Harness{Harness: &acpgatev1.HarnessFailure{AuthRequired: true}}}, "harness", "auth_required"},
		{&acpgatev1.HarnessError{Kind: &acpgatev1.HarnessError_Harness{Harness: &acpgatev1.HarnessFailure{StopKind: acpgatev1.StopKind_STOP_KIND_MAX_TURN_REQUESTS}}}, "harness", "max_turn_requests"},
		{&acpgatev1.HarnessError{Kind: &acpgatev1.HarnessError_Harness{Harness: &acpgatev1.HarnessFailure{RpcCode: &code}}}, "harness", "rpc_error"},
		{&acpgatev1.HarnessError{Kind: &acpgatev1.HarnessError_PolicyRefused{PolicyRefused: &acpgatev1.PolicyRefusal{}}}, "policy_refused", ""},
	}
	for _, c := range cases {
		if class, reason := Classify(c.e); class != c.class || reason != c.reason {
			t.Errorf("Classify(%v) = %q, %q; want %q, %q", c.e, class, reason, c.class, c.reason)
		}
	}
}
