package main

import (
	"log/slog"
	"os/exec"

	"github.com/acpgate/acpgate/internal/config"
)

// warnMissingCommands logs, at start, each agent whose command cannot be
// found: otherwise the first sign is a session that fails to start, long
// after the configuration was written. Only a warning: the command may be
// installed while the gateway runs. The gateway's own PATH is the one
// that counts, since the agent is started by it.
func warnMissingCommands(log *slog.Logger, cfg *config.Config) {
	for _, a := range cfg.Agents {
		if _, err := exec.LookPath(a.Command); err != nil {
			log.Warn("an agent's command cannot be found: its sessions will fail to start until it is installed, or agents[].command names it by a path or a name on PATH",
				"agent", a.Name, "command", a.Command, "err", err)
		}
	}
}
