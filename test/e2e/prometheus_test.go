package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// prometheusServer is a real Prometheus server (Debian's prometheus
// package) scraping targets every second, with its storage in a temporary
// directory; it is stopped when the test ends.
type prometheusServer struct {
	api string // http://host:port/api/v1/
}

func startPrometheus(t *testing.T, targets ...string) *prometheusServer {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("the prometheus binary is not installed (make deps installs Debian's prometheus package)")
	}
	dir := t.TempDir()
	config := fmt.Sprintf(`global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: acpgate
    static_configs: [{targets: [%q]}]
`, strings.Join(targets, `", "`))
	configPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	var logs strings.Builder
	cmd := exec.Command(bin,
		"--config.file="+configPath,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn",
	)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting prometheus: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus's log:\n%s", logs.String())
		}
	})
	return &prometheusServer{api: "http://" + addr + "/api/v1/"}
}

// freeAddr is a loopback address with a port that was free a moment ago:
// Prometheus does not report the port it chose for :0.
func freeAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	return lis.Addr().String()
}

// query runs an instant query and returns its samples' values by the
// series' labels (as labelsOf renders them, __name__ left out); an error
// means Prometheus did not answer (yet).
func (p *prometheusServer) query(expr string) (map[string]string, error) {
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get(p.api + "query?query=" + url.QueryEscape(expr))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("query %s: %s: %w", expr, resp.Status, err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("query %s: %s", expr, body.Error)
	}
	out := map[string]string{}
	for _, r := range body.Data.Result {
		var parts []string
		for k, v := range r.Metric {
			if k != "__name__" {
				parts = append(parts, k+"="+v)
			}
		}
		slices.Sort(parts)
		out[strings.Join(parts, ",")] = fmt.Sprint(r.Value[1])
	}
	return out, nil
}

// waitFor queries expr until it has a result, for at most within.
func (p *prometheusServer) waitFor(t *testing.T, expr string, within time.Duration) map[string]string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got, err := p.query(expr)
		if err == nil && len(got) > 0 {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus had no result for %s within %s (last: %v, %v)", expr, within, got, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// The first scrape comes about 5 s after Prometheus starts, however short
// the scrape interval: Prometheus 2's scrape manager applies new targets at
// most every 5 s, and 2.42 has no flag to change that.
func TestARealPrometheusScrapesTheGatewaysMetrics(t *testing.T) {
	s := serve(t, "--config", writeConfig(t, metricsConfig))
	metricsURL, err := url.Parse(s.metricsURL(t))
	if err != nil {
		t.Fatal(err)
	}
	prom := startPrometheus(t, metricsURL.Host)
	up := prom.waitFor(t, `up{job="acpgate"} == 1`, 20*time.Second)
	if len(up) != 1 {
		t.Errorf("up == 1 for %v, want the one gateway", up)
	}
	limit := prom.waitFor(t, `acpgate_sessions_limit`, 10*time.Second)
	want := "instance=" + metricsURL.Host + ",job=acpgate"
	if limit[want] != "7" {
		t.Errorf("acpgate_sessions_limit in Prometheus = %v, want 7 for {%s}", limit, want)
	}
	agents := prom.waitFor(t, `acpgate_agent_sessions_limit`, 10*time.Second)
	if agents["agent=test,"+want] != "3" {
		t.Errorf("acpgate_agent_sessions_limit in Prometheus = %v, want 3 for agent test", agents)
	}
}
