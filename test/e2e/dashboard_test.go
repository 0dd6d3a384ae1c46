package e2e

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"gopkg.in/yaml.v3"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

const (
	dashboardPath = "../../deploy/grafana/acpgate.json"
	alertsPath    = "../../deploy/prometheus/alerts.yaml"
)

// dashboard is what of a Grafana dashboard the tests look at.
type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Schema     int     `json:"schemaVersion"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string      `json:"name"`
			Type       string      `json:"type"`
			Query      any         `json:"query"`
			Definition string      `json:"definition"`
			Datasource *datasource `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	Datasource *datasource `json:"datasource"`
	GridPos    *struct {
		W, H int
	} `json:"gridPos"`
	Targets []struct {
		Expr       string      `json:"expr"`
		RefID      string      `json:"refId"`
		Datasource *datasource `json:"datasource"`
	} `json:"targets"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	raw, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s is not valid JSON: %v", dashboardPath, err)
	}
	return d
}

// queries are the dashboard's PromQL expressions by where they are: its
// panels' targets and its query variables' definitions.
func (d dashboard) queries() map[string]string {
	out := map[string]string{}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out["panel "+p.Title+" "+tg.RefID] = tg.Expr
		}
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			out["variable "+v.Name] = v.Definition
		}
	}
	return out
}

// alertRules are the alerting rules of alerts.yaml, expression by name.
func alertRules(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(alertsPath)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &file); err != nil {
		t.Fatalf("%s: %v", alertsPath, err)
	}
	out := map[string]string{}
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			out["alert "+r.Alert] = r.Expr
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s has no rules", alertsPath)
	}
	return out
}

func TestTheDashboardHasThePanelsVariablesAndDatasourcesGrafanaNeeds(t *testing.T) {
	d := loadDashboard(t)
	if d.UID == "" || d.Title == "" || d.Schema == 0 {
		t.Errorf("the dashboard needs a uid, a title and a schemaVersion: %q %q %d", d.UID, d.Title, d.Schema)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	if vars["datasource"] != "datasource" || vars["agent"] != "query" {
		t.Errorf("the dashboard's variables are %v, want datasource (a datasource) and agent (a query)", vars)
	}
	ids := map[int]string{}
	graphs := 0
	for _, p := range d.Panels {
		if p.ID == 0 {
			t.Errorf("panel %q has no id", p.Title)
		} else if other, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q share the id %d", other, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		if p.Title == "" || p.GridPos == nil || p.GridPos.W == 0 || p.GridPos.H == 0 {
			t.Errorf("panel %d needs a title and a gridPos with a size", p.ID)
		}
		if p.Type == "row" {
			continue
		}
		graphs++
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q does not use the ${datasource} variable: %+v", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no targets", p.Title)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if tg.Expr == "" || tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("panel %q: a target needs an expr and a refId of its own: %+v", p.Title, tg)
			}
			refs[tg.RefID] = true
			if tg.Datasource == nil || tg.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q target %s does not use the ${datasource} variable", p.Title, tg.RefID)
			}
			if strings.Contains(tg.Expr, "acpgate_") && !strings.Contains(tg.Expr, `agent=~"$agent"`) && !gatewayWide(tg.Expr) {
				t.Errorf("panel %q target %s is not filtered by the agent variable: %s", p.Title, tg.RefID, tg.Expr)
			}
		}
	}
	if graphs < 10 {
		t.Errorf("the dashboard has %d panels with queries, want the turn, latency, start-up, capacity, usage and gRPC ones", graphs)
	}
}

// scrapedOnce exercises every labelled series the dashboard and the alerts
// query (a completed turn with usage and cost, a failed start-up, a
// refusal) and scrapes the gateway's /metrics.
func scrapedOnce(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	s := serve(t, "--config", writeConfig(t, metricsConfig))
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(s.log())
		}
	})
	client, _ := s.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sess, err := client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "test"})
	if err != nil {
		t.Fatal(err)
	}
	// The test agent has no directive for a cost report, so the turn
	// writes the usage_update line itself, for the session it is in.
	cost := `stray {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"` + sess.GetAcpSessionId() +
		`","update":{"sessionUpdate":"usage_update","size":100,"used":10,"cost":{"amount":0.25,"currency":"USD"}}}}`
	turns := []*acpgatev1.PromptRequest{
		{SessionId: sess.GetId(), Text: "chunk hi\n" + cost + "\nstop_usage end_turn 100 50"},
		{Agent: "test", Text: "stop refusal"},
		{Agent: "missing", Text: "never runs"},
	}
	for _, req := range turns {
		stream, err := client.Prompt(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		terminal(t, stream, 15*time.Second)
	}
	return scrape(t, s.metricsURL(t))
}

// scraped reports whether name is a series of the scrape: a family's own
// name, or a histogram's (or summary's) _bucket, _sum or _count.
func scraped(fams map[string]*dto.MetricFamily, name string) bool {
	if fams[name] != nil {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok || fams[base] == nil {
			continue
		}
		switch fams[base].GetType() {
		case dto.MetricType_HISTOGRAM:
			return true
		case dto.MetricType_SUMMARY:
			return suffix != "_bucket"
		}
	}
	return false
}

func TestEveryMetricTheDashboardAndTheAlertsQueryExistsInAScrape(t *testing.T) {
	queries := loadDashboard(t).queries()
	for where, expr := range alertRules(t) {
		queries[where] = expr
	}
	fams := scrapedOnce(t)
	var checked []string
	for where, expr := range queries {
		for _, name := range promqlMetricNames(expr, "acpgate_", "grpc_") {
			checked = append(checked, name)
			if !scraped(fams, name) {
				t.Errorf("%s queries %s, which a running gateway does not expose", where, name)
			}
		}
	}
	slices.Sort(checked)
	checked = slices.Compact(checked)
	// A scanner that found nothing would pass vacuously.
	if len(checked) < 15 {
		t.Errorf("only %d metric names found in the dashboard and alerts: %v", len(checked), checked)
	}
	for _, name := range []string{"acpgate_cost_total", "acpgate_tokens_total", "acpgate_agent_start_failures_total"} {
		if len(values(fams, name)) == 0 {
			t.Errorf("the scripted turns left %s without a series, so its panels were not really checked", name)
		}
	}
}

// TestEveryDashboardQueryIsPromQLThatPrometheusAccepts checks the
// dashboard's expressions with promtool, as recording rules, Grafana's
// variables replaced by values of their kind.
func TestEveryDashboardQueryIsPromQLThatPrometheusAccepts(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (make deps installs Debian's prometheus package)")
	}
	grafanaVars := strings.NewReplacer("$__rate_interval", "1m", "$__range", "1h", "$agent", ".*")
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rule
	queries := loadDashboard(t).queries()
	// In a fixed order, so that promtool's "rule N" names the same query
	// on every run: the Nth panel target in title order.
	for _, where := range slices.Sorted(maps.Keys(queries)) {
		if strings.HasPrefix(where, "variable ") {
			continue // label_values() is Grafana's, not PromQL
		}
		rules = append(rules, rule{Record: "dashboard:query", Expr: grafanaVars.Replace(queries[where])})
	}
	out, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if msg, err := exec.CommandContext(ctx, promtool, "check", "rules", path).CombinedOutput(); err != nil {
		t.Errorf("promtool rejects a dashboard query: %v\n%s", err, msg)
	}
}

// gatewayWide reports whether expr reads only metrics of the whole gateway
// (limits, connections, all agents' sessions together), which an agent
// variable cannot filter.
func gatewayWide(expr string) bool {
	for _, m := range []string{"sessions_limit", "sum(acpgate_sessions_open)", "acpgate_connections_open", "acpgate_connections_limit"} {
		if strings.Contains(expr, m) {
			return true
		}
	}
	return false
}
