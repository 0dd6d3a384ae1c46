package server

import (
	"log/slog"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/acpgate/acpgate/internal/acp"
	"github.com/acpgate/acpgate/internal/acp/agentproc"
	"github.com/acpgate/acpgate/internal/acp/answer"
	"github.com/acpgate/acpgate/internal/acp/clientreq"
	"github.com/acpgate/acpgate/internal/config"
)

// agentStarts probes, once per gateway, how agents can be contained and
// confined, and returns how each agent is started: the gateway's options
// (its version, tracing, environment and launcher) made into the agent's
// acp.Config, which package sessions starts it with. The starters it
// returns start the agents at their lower CPU priority; the gateway closes
// them once every agent has stopped.
func agentStarts(opts Options, lookup func(string) (string, bool), log *slog.Logger) (func(config.Agent) acp.Config, starters) {
	containment, hostProc := probeContainment(log, opts.SandboxLauncher)
	noSandbox := probeSandbox(opts.Config.Agents, log)
	starters := newStarters(opts.Config.Agents, log)
	// One budget for every agent: the bound is on what the gateway holds.
	budget := answer.NewBudget(opts.Config.Limits.MaxAnswerBytes)
	return func(a config.Agent) acp.Config {
		c := acpConfig(a, opts, lookup, log)
		c.Process.Containment = containment
		c.Process.Launcher = opts.SandboxLauncher
		c.Process.HostProc = hostProc
		c.Process.Starter = starters[a.Nice]
		if a.Sandbox.Enabled {
			c.Process.Wrap = sandboxWrap(a, opts.SandboxLauncher, noSandbox)
		}
		c.AnswerBudget = budget
		return c
	}, starters
}

// starters are the gateway's agent starters, one for each nice increment
// its agents use other than 0 (which needs none: the agent runs at the
// gateway's priority).
type starters map[int]*agentproc.Starter

// newStarters makes the starters of agents' nice increments. One the
// kernel refuses is left out, and said: its agents then run at the
// gateway's priority, which costs latency under load, not correctness.
func newStarters(agents []config.Agent, log *slog.Logger) starters {
	s := starters{}
	for _, a := range agents {
		if _, done := s[a.Nice]; done || a.Nice == 0 {
			continue
		}
		st, err := agentproc.NewStarter(a.Nice)
		if err != nil {
			log.Warn("agents run at the gateway's CPU priority: the kernel refused the lower priority agents[].nice asks for, as a seccomp profile that denies setpriority does; allow setpriority, or set nice: 0 for these agents", "nice", a.Nice, "err", err)
		}
		s[a.Nice] = st // nil when refused: started at the gateway's
	}
	return s
}

// close ends the starters' threads. Call it only once every agent they
// started has been reaped (see agentproc.Starter).
func (s starters) close() {
	for _, st := range s {
		if st != nil {
			st.Close()
		}
	}
}

// probeContainment finds, once per gateway, how agents' process trees can
// be held, and says so, with why each stronger kind was refused: an
// operator must be able to tell whether a descendant that leaves its
// process group, or a SIGKILLed gateway, can leave agent processes
// running, and whether agents see the host's processes.
func probeContainment(log *slog.Logger, launcher string) (agentproc.Containment, bool) {
	c, hostProc, refused := agentproc.ProbeContainment(launcher)
	switch {
	case !c.KernelEnforced():
		log.Warn("agent containment is the weaker process-group kind: the kernel refused the namespaces, so a descendant that calls setsid() can outlive its session, descendants can outlive a gateway killed with SIGKILL, and agents see the host's processes",
			"kind", c.String(), "refused", refused)
	case hostProc:
		log.Warn("agent containment: agents see the host's processes in /proc (the kernel refused them a /proc of their own)",
			"kind", c.String(), "own_proc", false, "refused", refused)
	case refused != nil:
		log.Info("agent containment", "kind", c.String(), "own_proc", true, "refused", refused)
	default:
		log.Info("agent containment", "kind", c.String(), "own_proc", true)
	}
	return c, hostProc
}

func acpConfig(a config.Agent, opts Options, lookup func(string) (string, bool), log *slog.Logger) acp.Config {
	var mcp []acpsdk.McpServer
	for _, m := range a.MCPServers {
		mcp = append(mcp, acp.MCPStdio(m.Name, m.Command, m.Args, m.Env))
	}
	return acp.Config{
		Agent:              a.Name,
		Process:            agentproc.Spec{Command: a.Command, Args: a.Args, Env: agentEnviron(a, opts, lookup)},
		ClientVersion:      opts.Version,
		AuthMethod:         a.AuthMethod,
		FS:                 clientreq.FSAccess{Read: a.FS.Read, Write: a.FS.Write},
		Permission:         clientreq.PermissionPolicy{Mode: a.PermissionPolicy, Timeout: a.PermissionTimeout},
		Elicitation:        clientreq.ElicitationPolicy{Mode: a.Elicitation, Timeout: a.ElicitationTimeout},
		MCPServers:         mcp,
		StrictFraming:      a.StrictFraming,
		MaxFrameBytes:      opts.Config.Limits.MaxFrameBytes,
		CancelGrace:        a.CancelGrace,
		HandshakeTimeout:   a.HandshakeTimeout,
		MaxAgentRequests:   opts.Config.Limits.MaxAgentRequests,
		MaxAgentReplyBytes: opts.Config.Limits.MaxAgentReplyBytes,
		Logger:             log,
		Tracer:             opts.tracer(),
		Propagator:         opts.Propagator,
	}
}
