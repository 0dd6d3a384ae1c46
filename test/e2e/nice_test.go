package e2e

import (
	"os"
	"path/filepath"
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
			pid := s.cmd.Process.Pid
			b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
			if err != nil {
				t.Fatal(err)
			}
			own := testutil.StatNice(t, string(b))
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
