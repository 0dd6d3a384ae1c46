package server_test

import (
	"errors"
	"strings"
	"testing"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/config"
	"github.com/acpgate/acpgate/internal/server"
)

func TestOnAKernelWithoutLandlockARequiredSandboxRefusesTheAgentAndABestEffortOneRunsIt(t *testing.T) {
	restore := server.SetLandlockABI(func() (int, error) { return 0, errors.New("the kernel enforces no Landlock: ENOSYS") })
	defer restore()
	h := startWith(t, func(o *server.Options) {
		o.SandboxLauncher = acpgateBin
		var test config.Agent
		for _, a := range o.Config.Agents {
			if a.Name == "test" {
				test = a
			}
		}
		strict, loose := test, test
		strict.Name, strict.Sandbox = "strict", config.Sandbox{Enabled: true, Required: true}
		loose.Name, loose.Sandbox = "loose", config.Sandbox{Enabled: true}
		o.Config.Agents = append(o.Config.Agents, strict, loose)
	})

	e := last(oneShot(t, h, "strict", "chunk never"))
	tr := e.GetError().GetTransport()
	if tr.GetReason() != acpgatev1.TransportReason_TRANSPORT_REASON_SPAWN_FAILED ||
		!strings.Contains(e.GetError().GetMessage(), "sandbox.required") || !strings.Contains(e.GetError().GetMessage(), "Landlock") {
		t.Errorf("a required sandbox the kernel cannot provide: terminal %v, want a transport SPAWN_FAILED naming sandbox.required and Landlock", e)
	}

	if o := last(oneShot(t, h, "loose", "chunk ran\nstop end_turn")).GetOutcome(); o.GetText() != "ran" {
		t.Errorf("a best-effort sandbox the kernel cannot provide: outcome %v, want the agent run", o)
	}
}
