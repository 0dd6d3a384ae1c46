// Package sessions keeps the gateway's sessions: the configured agents and
// what the gateway learned of them, the open and suspended sessions, the
// warm pools and the processes several sessions share, and the opening
// (admitted by package admission), re-opening, suspending and closing of a
// session.
//
// It knows nothing of gRPC transport nor of turns' journals: package
// server's handlers and turns call a Manager, and what the Manager needs of
// the gateway (who may do what, how agents start, the store) comes in
// through Options. Errors are gRPC statuses, worded for the caller, unless
// a method says otherwise.
package sessions

import (
	"context"
	"log/slog"
	"os"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/access"
	"github.com/acpgate/acpgate/internal/acp"
	"github.com/acpgate/acpgate/internal/admission"
	"github.com/acpgate/acpgate/internal/config"
	"github.com/acpgate/acpgate/internal/mcpoffer"
	"github.com/acpgate/acpgate/internal/metrics"
	"github.com/acpgate/acpgate/internal/store"
)

// Options configure a Manager.
type Options struct {
	// Config is the validated configuration: the agents, the limits, the
	// quotas, the MCP offer and the retention of suspended sessions.
	Config *config.Config
	// Logger receives the sessions' logs; slog.Default() when nil.
	Logger *slog.Logger
	// Store keeps the sessions' records, from which suspended sessions
	// are re-opened. Required.
	Store store.Store
	// TempDir creates a fresh temporary working directory for a session of
	// the agent named, for agents without a workspace; a directory of the
	// system's temporary directory when nil.
	TempDir func(agent string) (string, error)
	// Metrics records the agents' sessions and start-ups; nil records none.
	Metrics *metrics.Metrics
	// Authz decides who may use an agent and see a session.
	Authz access.Authz
	// Admission admits the sessions and the warm processes, under the
	// limits and quotas it also admits the gateway's turns under.
	// Required.
	Admission *admission.Controller
	// StartConfig is how the agent a is started (its command, environment,
	// containment, tracing): the gateway's wiring, asked once per agent.
	StartConfig func(a config.Agent) acp.Config
	// Replica is this gateway's replica ID in a cluster; "" for a gateway
	// on its own. A replica records every session, so that other replicas
	// can find it, and shows its ID in each.
	Replica string
}

// Manager owns the gateway's sessions and agents. Its methods are safe for
// concurrent use.
type Manager struct {
	cfg     *config.Config
	log     *slog.Logger
	agents  catalog
	admit   *admission.Controller
	reg     *registry
	store   store.Store
	authz   access.Authz
	tempDir func(agent string) (string, error)
	replica string
}

// New builds a Manager for opts.Config's agents. It starts nothing:
// StartPools starts the warm pools, SuspendRecorded brings back the
// sessions of the last run.
func New(opts Options) *Manager {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	m := &Manager{
		cfg:     opts.Config,
		log:     log,
		agents:  catalog{byName: make(map[string]*agentEntry), authz: opts.Authz},
		admit:   opts.Admission,
		reg:     newRegistry(),
		store:   opts.Store,
		authz:   opts.Authz,
		tempDir: opts.TempDir,
		replica: opts.Replica,
	}
	if m.tempDir == nil {
		m.tempDir = func(agent string) (string, error) { return os.MkdirTemp("", "acpgate-"+agent+"-") }
	}
	// One bound on start-ups for all agents: they share the CPUs. Logged,
	// since its default follows the CPUs the gateway may use.
	starts := admission.NewStarts(opts.Config.Limits.MaxStartingAgents)
	if len(opts.Config.Agents) > 0 {
		log.Info("agent start-ups at once", "max_starting_agents", opts.Config.Limits.MaxStartingAgents, "bounded", starts != nil)
	}
	for _, a := range opts.Config.Agents {
		entry := &agentEntry{cfg: a, acp: opts.StartConfig(a), m: opts.Metrics.Agent(a.Name), mcp: mcpoffer.New(opts.Config.MCP, a), starts: starts}
		if a.ReuseProcess {
			entry.share = &sharing{max: a.MaxSessionsPerProcess}
		}
		m.agents.list = append(m.agents.list, entry)
		m.agents.byName[a.Name] = entry
	}
	return m
}

// Agents describes the configured agents the caller may use, for
// ListAgents: their configuration and what the gateway learned of them.
func (m *Manager) Agents(ctx context.Context) []*acpgatev1.Agent {
	var out []*acpgatev1.Agent
	for _, a := range m.agents.usable(ctx) {
		out = append(out, a.info())
	}
	return out
}

// Agent is the configuration of the agent named; false when none is
// configured.
func (m *Manager) Agent(name string) (config.Agent, bool) {
	if e, ok := m.agents.byName[name]; ok {
		return e.cfg, true
	}
	return config.Agent{}, false
}

// AgentMetrics is the instruments of the agent named; nil (recording
// nothing) without metrics or for an agent not configured.
func (m *Manager) AgentMetrics(name string) *metrics.Agent {
	if e := m.agents.byName[name]; e != nil {
		return e.m
	}
	return nil
}
