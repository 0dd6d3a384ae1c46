package server

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/acpgate/acpgate/internal/config"
	"github.com/acpgate/acpgate/internal/sandbox"
)

// landlockABI is how the kernel's Landlock support is probed; a variable
// so tests can play a kernel without it.
var landlockABI = sandbox.ABI

// probeSandbox finds, once per gateway and only when an agent asks for the
// sandbox, whether the kernel can confine agents, and says so: the
// absence is nil when it can.
func probeSandbox(agents []config.Agent, log *slog.Logger) (absent error) {
	for _, a := range agents {
		if !a.Sandbox.Enabled {
			continue
		}
		abi, err := landlockABI()
		if err != nil {
			log.Warn("the kernel cannot confine agents: those with sandbox.required will not start, the others run unconfined", "err", err)
			return err
		}
		log.Info("agent sandbox", "landlock_abi", abi)
		return nil
	}
	return nil
}

// sandboxWrap returns the agentproc.Spec.Wrap that starts agent a through
// the sandbox launcher, the acpgate executable launcher; absent is why the
// kernel cannot confine it, nil when it can.
func sandboxWrap(a config.Agent, launcher string, absent error) func(dir, command string, args []string) (string, []string, error) {
	policy := sandbox.Policy{RW: a.Sandbox.RW, RO: a.Sandbox.RO, Required: a.Sandbox.Required}
	return func(dir, command string, args []string) (string, []string, error) {
		if absent != nil && a.Sandbox.Required {
			return "", nil, fmt.Errorf("sandbox.required is set and the agent cannot be confined: %w", absent)
		}
		if launcher == "" {
			return "", nil, errors.New("the sandbox needs the acpgate executable as its launcher, and the gateway was given none")
		}
		return sandbox.Argv(launcher, policy, dir, command, args)
	}
}
