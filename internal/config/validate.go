package config

import (
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/acpgate/acpgate/internal/acp"
	"github.com/acpgate/acpgate/internal/acp/agentproc"
	"github.com/acpgate/acpgate/internal/auth"
)

// checker applies the rules a decoded Config must meet, collecting every
// violation. lines and bad come from the decoder and may be nil (a Config
// built in code has no lines).
type checker struct {
	source string
	lines  map[string]int
	bad    map[string]bool
	errs   []error
}

// line finds the line of path, or of its nearest enclosing setting
// ("agents[0].command" falls back to "agents[0]"), or 0.
func (v *checker) line(path string) int {
	for path != "" {
		if l, ok := v.lines[path]; ok {
			return l
		}
		cut := strings.LastIndexAny(path, ".[")
		if cut < 0 {
			break
		}
		path = path[:cut]
	}
	return 0
}

// add records a violation of the setting at path, unless decoding it already
// failed.
func (v *checker) add(path, format string, args ...any) {
	if v.bad[path] {
		return
	}
	v.errs = append(v.errs, &Error{Source: v.source, Line: v.line(path), Msg: fmt.Sprintf(format, args...)})
}

// admin checks admin.listen: an address of its own, and loopback unless
// admin.allow_remote says otherwise, since the admin services have no
// authentication.
func (v *checker) admin(c *Config) {
	addr := c.Admin.Listen
	if addr == "" {
		return
	}
	host, _, err := net.SplitHostPort(addr)
	switch {
	case err != nil:
		v.add("admin.listen", "admin.listen: %q is not a host:port address", addr)
	case addr == c.Listen || addr == c.Metrics.Listen:
		v.add("admin.listen", "admin.listen: %q is also listen or metrics.listen; the admin services need their own address", addr)
	case !IsLoopback(host) && !c.Admin.AllowRemote:
		v.add("admin.listen", "admin.listen: %q is reachable beyond this machine and the admin services have no authentication; listen on 127.0.0.1, or set admin.allow_remote: true on a protected network", addr)
	}
}

// config checks the whole configuration.
func (v *checker) config(c *Config) {
	switch _, _, err := net.SplitHostPort(c.Listen); {
	case c.Listen == "":
		v.add("listen", "listen: an address is required, such as %s", DefaultListen)
	case err != nil:
		v.add("listen", "listen: %q is not a host:port address", c.Listen)
	}

	if c.Metrics.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Metrics.Listen); err != nil {
			v.add("metrics.listen", "metrics.listen: %q is not a host:port address", c.Metrics.Listen)
		} else if c.Metrics.Listen == c.Listen {
			v.add("metrics.listen", "metrics.listen: %q is also listen; the metrics endpoint needs its own address", c.Metrics.Listen)
		}
	}
	v.admin(c)

	if len(c.Agents) == 0 {
		v.add("agents", "agents: at least one agent is required")
	}
	firstByName := map[string]int{}
	for i, a := range c.Agents {
		path := fmt.Sprintf("agents[%d]", i)
		if v.bad[path] {
			continue
		}
		label := agentLabel(a.Name, i)
		v.agent(a, path, label)
		if a.Name == "" {
			continue
		}
		if first, dup := firstByName[a.Name]; dup {
			v.add(path+".name", "%s: duplicate name, first used by agents[%d]%s", label, first, v.at(fmt.Sprintf("agents[%d]", first)))
			continue
		}
		firstByName[a.Name] = i
	}

	v.positive("limits.max_sessions", "limits.max_sessions", c.Limits.MaxSessions)
	if c.Limits.MaxWarm < 0 {
		v.add("limits.max_warm", "limits.max_warm: must not be negative (0 keeps no warm processes), got %d", c.Limits.MaxWarm)
	}
	if c.Limits.MaxStartingAgents < 0 {
		v.add("limits.max_starting_agents", "limits.max_starting_agents: must not be negative (0 sets no bound), got %d", c.Limits.MaxStartingAgents)
	}
	v.positive("limits.max_suspended", "limits.max_suspended", c.Limits.MaxSuspended)
	v.positive("limits.max_prompt_bytes", "limits.max_prompt_bytes", c.Limits.MaxPromptBytes)
	switch m := c.Limits.MaxFrameBytes; {
	case m < MinMaxFrameBytes:
		v.add("limits.max_frame_bytes", "limits.max_frame_bytes: must be at least %d (64 KiB), got %d", MinMaxFrameBytes, m)
	case c.Limits.MaxPromptBytes > m:
		v.add("limits.max_prompt_bytes", "limits.max_prompt_bytes: %d is larger than limits.max_frame_bytes (%d); a prompt that size could never be sent to an agent", c.Limits.MaxPromptBytes, m)
	}
	v.positive("limits.max_agent_requests", "limits.max_agent_requests", c.Limits.MaxAgentRequests)
	if m := c.Limits.MaxAgentReplyBytes; m < acp.MinMaxAgentReplyBytes {
		v.add("limits.max_agent_reply_bytes", "limits.max_agent_reply_bytes: must be at least %d (a read of the largest file an agent may read, 8 MiB, with lines selected from it), got %d", int64(acp.MinMaxAgentReplyBytes), m)
	}
	v.positive("limits.max_streams_per_connection", "limits.max_streams_per_connection", c.Limits.MaxStreamsPerConnection)
	v.positive("limits.max_connections", "limits.max_connections", c.Limits.MaxConnections)
	v.positive("limits.max_watchers_per_turn", "limits.max_watchers_per_turn", c.Limits.MaxWatchersPerTurn)
	v.positive("limits.max_watchers_per_principal", "limits.max_watchers_per_principal", c.Limits.MaxWatchersPerPrincipal)
	if m := c.Limits.MaxHeaderBytes; m < MinMaxHeaderBytes {
		v.add("limits.max_header_bytes", "limits.max_header_bytes: must be at least %d (4 KiB), got %d", MinMaxHeaderBytes, m)
	}
	v.timeout("shutdown_grace", "shutdown_grace", c.ShutdownGrace)
	v.timeout("handshake_timeout", "handshake_timeout", c.HandshakeTimeout)
	v.timeout("request_read_timeout", "request_read_timeout", c.RequestReadTimeout)
	v.timeout("heartbeat_interval", "heartbeat_interval", c.HeartbeatInterval)
	v.timeout("turn_retention", "turn_retention", c.TurnRetention)
	v.timeout("suspended_retention", "suspended_retention", c.SuspendedRetention)
	v.positive("limits.max_turn_bytes", "limits.max_turn_bytes", int(c.Limits.MaxTurnBytes))
	v.positive("limits.max_answer_bytes", "limits.max_answer_bytes", int(c.Limits.MaxAnswerBytes))
	if c.Store != StoreSQLite && c.Store != StoreMemory && c.Store != StorePostgres {
		v.add("store", "store: %q must be %s, %s or %s", c.Store, StoreSQLite, StoreMemory, StorePostgres)
	}
	v.postgres(c)
	if c.StateDir != "" && !filepath.IsAbs(c.StateDir) {
		v.add("state_dir", "state_dir: %q must be an absolute path", c.StateDir)
	}
	v.security(c)
	v.mcp(c)
	v.webhooks(c)
	v.quotas(c.Quotas)
	v.tracing(c.Tracing)
	v.cluster(c)
}

// postgres checks the postgres block: a dsn when the store is postgres,
// and no dsn for another store, where it would be silently unused.
func (v *checker) postgres(c *Config) {
	switch {
	case c.Store == StorePostgres && c.Postgres.DSN == "":
		v.add("postgres.dsn", "postgres.dsn: store is postgres, and it needs a connection string (postgres://user@host/db, or ${VAR} to read it from the environment)")
	case c.Store != StorePostgres && c.Postgres.DSN != "":
		v.add("postgres.dsn", "postgres.dsn: set, but store is %s; set store: postgres to use it", c.Store)
	}
	v.positive("postgres.max_conns", "postgres.max_conns", c.Postgres.MaxConns)
	if t := c.Postgres.StatementTimeout; t < time.Millisecond {
		v.add("postgres.statement_timeout", "postgres.statement_timeout: must be at least 1ms, got %s", t)
	}
}

// at is " (line N)" for the line of path, or "" when it has none.
func (v *checker) at(path string) string {
	if l := v.line(path); l > 0 {
		return fmt.Sprintf(" (line %d)", l)
	}
	return ""
}

// agent checks one agent; path and label locate and name it.
func (v *checker) agent(a Agent, path, label string) {
	p := func(key string) string { return path + "." + key }
	switch {
	case a.Name == "":
		v.add(p("name"), "%s: name is required", label)
	case !validAgentName(a.Name):
		v.add(p("name"), "%s: name must be 1 to 63 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit (^[a-z0-9][a-z0-9._-]{0,62}$)", label)
	}
	v.command(p("command"), label, a.Command)
	v.args(p("args"), label+": args", a.Args)
	v.env(p("env"), label+": env", a.Env)
	for i, name := range a.InheritEnv {
		if problem := envNameProblem(name); problem != "" {
			v.add(fmt.Sprintf("%s[%d]", p("inherit_env"), i), "%s: inherit_env[%d]: %s", label, i, problem)
		}
	}
	if a.Workspace != "" && !filepath.IsAbs(a.Workspace) {
		v.add(p("workspace"), "%s: workspace %q must be an absolute path", label, a.Workspace)
	}
	for _, list := range []struct {
		key   string
		paths []string
	}{{"rw", a.Sandbox.RW}, {"ro", a.Sandbox.RO}} {
		key := list.key
		for i, path := range list.paths {
			if !filepath.IsAbs(path) {
				v.add(fmt.Sprintf("%s[%d]", p("sandbox.")+key, i), "%s: sandbox.%s[%d] %q must be an absolute path", label, key, i, path)
			}
		}
	}
	if (a.Sandbox.Required || len(a.Sandbox.RW) > 0 || len(a.Sandbox.RO) > 0) && !a.Sandbox.Enabled {
		v.add(p("sandbox"), "%s: sandbox.required, rw and ro have no effect unless sandbox.enabled is true", label)
	}
	if !a.PermissionPolicy.Valid() {
		v.add(p("permission_policy"), "%s: permission_policy %q must be one of %s, %s or %s", label, a.PermissionPolicy, PolicyReject, PolicyAllow, PolicyAsk)
	}
	v.timeout(p("permission_timeout"), label+": permission_timeout", a.PermissionTimeout)
	if !a.Elicitation.Valid() {
		v.add(p("elicitation"), "%s: elicitation %q must be one of %s or %s", label, a.Elicitation, ElicitDecline, ElicitAsk)
	}
	v.timeout(p("elicitation_timeout"), label+": elicitation_timeout", a.ElicitationTimeout)
	v.timeout(p("turn_timeout"), label+": turn_timeout", a.TurnTimeout)
	v.timeout(p("idle_timeout"), label+": idle_timeout", a.IdleTimeout)
	v.timeout(p("cancel_grace"), label+": cancel_grace", a.CancelGrace)
	v.timeout(p("handshake_timeout"), label+": handshake_timeout", a.HandshakeTimeout)
	for i, pat := range a.Allow {
		if _, err := auth.ParsePattern(pat); err != nil {
			v.add(fmt.Sprintf("%s[%d]", p("allow"), i), "%s: allow[%d]: %v", label, i, err)
		}
	}
	if a.Nice < 0 || a.Nice > agentproc.MaxNice {
		v.add(p("nice"), "%s: nice must be between 0 (the gateway's own CPU priority) and %d (the lowest), got %d", label, agentproc.MaxNice, a.Nice)
	}
	if a.MaxSessions < 0 {
		v.add(p("max_sessions"), "%s: max_sessions must not be negative (0 means no per-agent limit), got %d", label, a.MaxSessions)
	}
	if a.Warm < 0 || a.Warm > MaxWarmPerAgent {
		v.add(p("warm"), "%s: warm must be between 0 (no warm processes) and %d, got %d", label, MaxWarmPerAgent, a.Warm)
	}
	if a.WarmMaxAge < MinWarmMaxAge {
		v.add(p("warm_max_age"), "%s: warm_max_age must be at least %s, got %s", label, MinWarmMaxAge, a.WarmMaxAge)
	}
	v.timeout(p("suspended_retention"), label+": suspended_retention", a.SuspendedRetention)
	v.positive(p("max_sessions_per_process"), label+": max_sessions_per_process", a.MaxSessionsPerProcess)
	if a.ReuseProcess && a.Workspace == "" {
		v.add(p("reuse_process"), "%s: reuse_process needs a workspace: without one each session gets a fresh temporary directory of its own, which a process shared by several sessions cannot give", label)
	}

	v.mcpServers(p("mcp_servers"), label, a.MCPServers)
	v.mcpServers(p("mcp_offered"), label, a.MCPOffered)
}

// command checks a required program to run.
func (v *checker) command(path, label, command string) {
	switch {
	case command == "":
		v.add(path, "%s: command is required", label)
	case strings.ContainsRune(command, 0):
		v.add(path, "%s: command contains a NUL byte", label)
	}
}

// args checks program arguments: a NUL byte cannot be passed to a process.
func (v *checker) args(path, label string, args []string) {
	for i, arg := range args {
		if strings.ContainsRune(arg, 0) {
			v.add(fmt.Sprintf("%s[%d]", path, i), "%s[%d] contains a NUL byte", label, i)
		}
	}
}

// env checks environment variables set explicitly, in name order so the
// messages come out the same every time.
func (v *checker) env(path, label string, env map[string]string) {
	for _, name := range sortedKeys(env) {
		if problem := envNameProblem(name); problem != "" {
			v.add(path+"."+name, "%s %q: %s", label, name, problem)
		} else if strings.ContainsRune(env[name], 0) {
			v.add(path+"."+name, "%s %s: the value contains a NUL byte", label, name)
		}
	}
}

// positive checks a limit that must be greater than zero.
func (v *checker) positive(path, label string, n int) {
	if n <= 0 {
		v.add(path, "%s: must be positive, got %d", label, n)
	}
}

// timeout checks a duration that must be greater than zero.
func (v *checker) timeout(path, label string, d time.Duration) {
	if d <= 0 {
		v.add(path, "%s: must be positive, got %s", label, d)
	}
}

// validAgentName reports whether name matches ^[a-z0-9][a-z0-9._-]{0,62}$.
func validAgentName(name string) bool {
	if len(name) == 0 || len(name) > 63 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case (c == '.' || c == '_' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}

// envNameProblem says what makes name unusable as an environment variable
// name, or "" when it is usable.
func envNameProblem(name string) string {
	switch {
	case name == "":
		return "an environment variable name must not be empty"
	case strings.ContainsAny(name, "=\x00"):
		return "an environment variable name must not contain '=' or a NUL byte"
	}
	return ""
}

// sortedKeys returns m's keys in order.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
