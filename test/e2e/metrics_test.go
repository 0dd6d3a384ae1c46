package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/outcome"
)

const metricsConfig = `
shutdown_grace: 5s
metrics: {listen: "127.0.0.1:0"}
limits: {max_sessions: 7}
agents:
  - name: test
    command: "${ACPGATE_E2E_AGENT}"
    args: [--unique-sessions]
    max_sessions: 3
  - name: missing
    command: /nonexistent/agent
`

// metricsURL is the /metrics address the gateway announced, waiting at
// most a few seconds for the announcement.
func (s *served) metricsURL(t *testing.T) string {
	t.Helper()
	return s.announced(t, "acpgate metrics on ")
}

// scrape reads and parses the exposition at url.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("scraping %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scraping %s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("parsing the scrape: %v\n%s", err, body)
	}
	return families
}

// labelsOf renders a metric's labels as k=v,k=v in name order.
func labelsOf(m *dto.Metric) string {
	var parts []string
	for _, l := range m.GetLabel() {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// values are a family's counter, gauge or untyped values by labelsOf;
// histograms give their sample count.
func values(fams map[string]*dto.MetricFamily, name string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range fams[name].GetMetric() {
		var v float64
		switch {
		case m.Counter != nil:
			v = m.GetCounter().GetValue()
		case m.Gauge != nil:
			v = m.GetGauge().GetValue()
		case m.Histogram != nil:
			v = float64(m.GetHistogram().GetSampleCount())
		default:
			v = m.GetUntyped().GetValue()
		}
		out[labelsOf(m)] = v
	}
	return out
}

func wantValues(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]float64) {
	t.Helper()
	got := values(fams, name)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s = %v, want %v", name, got, want)
	}
}

func TestMetricsCountEveryTerminalClassOfScriptedTurnsByAgentAndNeverByIdentity(t *testing.T) {
	s := serve(t, "--config", writeConfig(t, metricsConfig))
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(s.log())
		}
	})
	url := s.metricsURL(t)
	client, _ := s.client(t)
	turns := []struct{ script, class string }{
		{"chunk hi\nstop_usage end_turn 100 50", "outcome"},
		{"stop refusal", "policy_refused"},
		{"stop max_tokens", "harness"},
		{"exit 3", "transport"},
		{"error -32000 auth", "harness"},
	}
	turns = append(turns, struct{ script, class string }{"chunk never", "transport"})
	for i, tc := range turns {
		agent := "test"
		if i == len(turns)-1 {
			agent = "missing" // its agent cannot be started
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		stream, err := client.Prompt(ctx, &acpgatev1.PromptRequest{Agent: agent, Text: tc.script})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		end := terminal(t, stream, 15*time.Second)
		cancel()
		if got := class(end); got != tc.class {
			t.Fatalf("%q ended as %s, want %s: %v", tc.script, got, tc.class, end)
		}
	}

	// One-shot sessions close just after their terminal is sent, and a
	// turn's end is counted once its terminal has been handed to the
	// streams, so a client can see the terminal a moment before a scrape
	// sees the count.
	var fams map[string]*dto.MetricFamily
	deadline := time.Now().Add(10 * time.Second)
	for {
		fams = scrape(t, url)
		ended := 0.0
		for _, v := range values(fams, "acpgate_turns_ended_total") {
			ended += v
		}
		settled := values(fams, "acpgate_sessions_open")["agent=test"] == 0 && ended == float64(len(turns))
		if settled || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}

	wantValues(t, fams, "acpgate_turns_started_total", map[string]float64{"agent=test": 5, "agent=missing": 1})
	wantValues(t, fams, "acpgate_turns_ended_total", map[string]float64{
		"agent=test,class=outcome,reason=":                  1,
		"agent=test,class=policy_refused,reason=":           1,
		"agent=test,class=harness,reason=max_tokens":        1,
		"agent=test,class=transport,reason=stream_ended":    1,
		"agent=test,class=harness,reason=auth_required":     1,
		"agent=missing,class=transport,reason=spawn_failed": 1,
	})
	wantValues(t, fams, "acpgate_turn_duration_seconds", map[string]float64{
		"agent=test,class=outcome":        1,
		"agent=test,class=policy_refused": 1,
		"agent=test,class=harness":        2,
		"agent=test,class=transport":      1,
		"agent=missing,class=transport":   1,
	})
	wantValues(t, fams, "acpgate_turn_first_chunk_seconds", map[string]float64{"agent=test": 1, "agent=missing": 0})
	wantValues(t, fams, "acpgate_agent_start_seconds", map[string]float64{"agent=test": 5})
	wantValues(t, fams, "acpgate_agent_start_failures_total", map[string]float64{"agent=missing,class=transport": 1})
	wantValues(t, fams, "acpgate_tokens_total", map[string]float64{"agent=test,direction=input": 100, "agent=test,direction=output": 50})
	wantValues(t, fams, "acpgate_stream_events_total", map[string]float64{"agent=test": 1, "agent=missing": 0})
	wantValues(t, fams, "acpgate_sessions_open", map[string]float64{"agent=test": 0, "agent=missing": 0})
	wantValues(t, fams, "acpgate_turns_running", map[string]float64{"agent=test": 0, "agent=missing": 0})
	wantValues(t, fams, "acpgate_sessions_limit", map[string]float64{"": 7})
	wantValues(t, fams, "acpgate_agent_sessions_limit", map[string]float64{"agent=test": 3})
	if n := values(fams, "acpgate_journal_write_seconds")["agent=test"]; n < 10 {
		t.Errorf("acpgate_journal_write_seconds has %v observations, want at least a start and an end per turn", n)
	}
	if b := values(fams, "acpgate_stream_bytes_total")["agent=test"]; b <= 0 {
		t.Errorf("acpgate_stream_bytes_total = %v, want the chunk's bytes", b)
	}
	if b := values(fams, "acpgate_journal_write_bytes_total")["agent=test"]; b <= values(fams, "acpgate_stream_bytes_total")["agent=test"] {
		t.Errorf("acpgate_journal_write_bytes_total = %v, want more than the streamed bytes (starts and terminals are written too)", b)
	}
	grpcKey := "grpc_code=OK,grpc_method=Prompt,grpc_service=acpgate.v1.AgentGateway,grpc_type=server_stream"
	if n := values(fams, "grpc_server_handled_total")[grpcKey]; n != 6 {
		t.Errorf("grpc_server_handled_total{%s} = %v, want 6", grpcKey, n)
	}
	if n := values(fams, "grpc_server_handling_seconds")["grpc_method=Prompt,grpc_service=acpgate.v1.AgentGateway,grpc_type=server_stream"]; n != 6 {
		t.Errorf("grpc_server_handling_seconds has %v Prompt observations, want 6", n)
	}
	for _, name := range []string{"process_cpu_seconds_total", "go_goroutines"} {
		if fams[name] == nil {
			t.Errorf("the scrape has no %s", name)
		}
	}
	readme, err := os.ReadFile("../../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	for name := range fams {
		if (strings.HasPrefix(name, "acpgate_") || strings.HasPrefix(name, "grpc_server_")) && !strings.Contains(string(readme), "`"+name+"`") {
			t.Errorf("%s is scraped but not listed in docs/observability.md", name)
		}
	}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "session", "session_id", "turn", "turn_id", "principal", "owner":
					t.Errorf("%s carries the label %s", name, l.GetName())
				}
			}
		}
	}
}

// class is the class of a terminal event: outcome, or its error's arm.
func class(e *acpgatev1.PromptEvent) string {
	if e.GetOutcome() != nil {
		return "outcome"
	}
	return outcome.Class(e.GetError())
}

func TestTheMetricsEndpointStopsWithTheGatewayAndIsOffByDefault(t *testing.T) {
	off := serve(t, "--config", writeConfig(t, e2eConfig))
	if strings.Contains(off.log(), "acpgate metrics on") {
		t.Errorf("a gateway without metrics.listen serves metrics:\n%s", off.log())
	}
	s := serve(t, "--config", writeConfig(t, metricsConfig))
	url := s.metricsURL(t)
	scrape(t, url)
	s.terminate(t, 8*time.Second)
	client := &http.Client{Timeout: 2 * time.Second}
	if resp, err := client.Get(url); err == nil {
		resp.Body.Close()
		t.Errorf("%s still answers after the gateway exited: %s", url, resp.Status)
	}
}
