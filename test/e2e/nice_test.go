package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/acpgate/acpgate/internal/testutil"
)

// niceConfig has three agents: one at the default nice increment, one at
// the gateway's priority, and one asking for more than the lowest priority
// leaves.
const niceConfig = `
shutdown_grace: 5s
agents:
  - name: test
    command: "${ACPGATE_E2E_AGENT}"
  - name: level
    command: "${ACPGATE_E2E_AGENT}"
    nice: 0
  - name: lowest
    command: "${ACPGATE_E2E_AGENT}"
    nice: 19
`

// agentNice runs a turn of agent that reads its own /proc/self/stat, and
// returns its nice value.
func agentNice(t *testing.T, s *served, agent string) int {
	t.Helper()
	said := agentNamedSays(t, s, agent, "osread /proc/self/stat")
	if len(said) != 1 || !strings.HasPrefix(said[0], "osread:") {
		t.Fatalf("agent %s said %q, want its stat line\n%s", agent, said, s.log())
	}
	return testutil.StatNice(t, strings.TrimPrefix(said[0], "osread:"))
}

// gatewayNice returns the gateway's pid and its own nice value.
func gatewayNice(t *testing.T, s *served) (pid, nice int) {
	t.Helper()
	pid = s.cmd.Process.Pid
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		t.Fatal(err)
	}
	return pid, testutil.StatNice(t, string(b))
}

func TestAgentsRunTheirNiceIncrementBelowTheGatewayWhichKeepsItsOwnPriority(t *testing.T) {
	for _, c := range []struct {
		name  string
		serve func(t *testing.T) *served
	}{
		{"as root", func(t *testing.T) *served {
			return serve(t, "--config", writeConfig(t, niceConfig))
		}},
		{"as nobody", func(t *testing.T) *served { return serveAsNobody(t, niceConfig, unprivileged) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := c.serve(t)
			pid, own := gatewayNice(t, s)
			if own+5 >= 19 {
				t.Skipf("the gateway runs at nice %d, too low a priority to lower by 5", own)
			}
			for agent, want := range map[string]int{"test": own + 5, "level": own, "lowest": 19} {
				if got := agentNice(t, s, agent); got != want {
					t.Errorf("agent %s runs at nice %d, want %d (the gateway's %d)", agent, got, want, own)
				}
			}
			// One thread of its own for each increment other than 0; every
			// other thread of the gateway keeps its priority.
			threads := testutil.ThreadNices(t, strconv.Itoa(pid))
			if threads[own+5] != 1 || threads[19] != 1 || len(threads) != 3 {
				t.Errorf("the gateway's threads by nice value: %v, want one at %d, one at 19, the rest at its own %d", threads, own+5, own)
			}
		})
	}
}

func TestAGatewayRefusedALowerPriorityForItsAgentsSaysSoAndRunsThemAtItsOwn(t *testing.T) {
	deny := denyingSetpriority(t)
	for _, c := range []struct {
		name  string
		serve func(t *testing.T) *served
	}{
		{"as root", func(t *testing.T) *served {
			s, err := startServeVia(t, deny, "--config", writeConfig(t, niceConfig))
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
		{"as nobody", func(t *testing.T) *served {
			return serveAsNobody(t, niceConfig, func(g []string) []string { return deny(unprivileged(g)) })
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := c.serve(t)
			pid, own := gatewayNice(t, s)
			for _, nice := range []string{"nice=5", "nice=19"} {
				said := regexp.MustCompile(`msg="agents run at the gateway's CPU priority: [^"]*" ` + nice + ` `)
				if !said.MatchString(s.log()) {
					t.Errorf("the gateway did not say that agents at %s run at its priority:\n%s", nice, s.log())
				}
			}
			for _, agent := range []string{"test", "level", "lowest"} {
				if got := agentNice(t, s, agent); got != own {
					t.Errorf("agent %s runs at nice %d, want the gateway's %d", agent, got, own)
				}
			}
			if threads := testutil.ThreadNices(t, strconv.Itoa(pid)); len(threads) != 1 {
				t.Errorf("the gateway's threads by nice value: %v, want all at its own %d", threads, own)
			}
		})
	}
}
