package config

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/acpgate/acpgate/internal/acp"
	"github.com/acpgate/acpgate/internal/acp/answer"
	"github.com/acpgate/acpgate/internal/acp/clientreq"
	"github.com/acpgate/acpgate/internal/acp/jsonrpc"
	"github.com/acpgate/acpgate/internal/store/postgres"
)

// Defaults applied to settings a configuration file leaves out.
const (
	// DefaultListen is the address the gateway listens on.
	DefaultListen = "127.0.0.1:7070"
	// DefaultPermissionTimeout is how long the ask policy waits for a client
	// to answer a permission request before falling back to reject: the
	// runtime's own default, so that one number is meant everywhere.
	DefaultPermissionTimeout = acp.DefaultPermissionTimeout
	// DefaultTurnTimeout bounds one prompt turn.
	DefaultTurnTimeout = 30 * time.Minute
	// DefaultIdleTimeout is how long a session may go unused before it is
	// closed.
	DefaultIdleTimeout = 30 * time.Minute
	// DefaultCancelGrace is how long an agent has to end a cancelled turn
	// before it is stopped: the runtime's own default.
	DefaultCancelGrace = acp.DefaultCancelGrace
	// DefaultHandshakeTimeout bounds an agent's start-up: spawn, initialize,
	// authenticate and session/new or session/load together.
	DefaultHandshakeTimeout = acp.DefaultHandshakeTimeout
	// DefaultMaxAgentRequests bounds the requests one agent may have
	// waiting for the gateway's answer: the runtime's own default.
	DefaultMaxAgentRequests = acp.DefaultMaxAgentRequests
	// DefaultMaxAgentReplyBytes bounds the bytes the answers to one agent
	// process's requests hold until it reads them: the runtime's own
	// default.
	DefaultMaxAgentReplyBytes = acp.DefaultMaxAgentReplyBytes
	// DefaultHeartbeatInterval is how long a stream may be silent before
	// it gets a heartbeat event.
	DefaultHeartbeatInterval = 15 * time.Second
	// DefaultTurnRetention is how long an ended turn is kept.
	DefaultTurnRetention = 24 * time.Hour
	// DefaultMaxTurnBytes bounds one turn's journal (1 GiB).
	DefaultMaxTurnBytes = 1 << 30
	// DefaultMaxStreamsPerConnection bounds the concurrent calls on one
	// client connection (HTTP/2 MAX_CONCURRENT_STREAMS).
	DefaultMaxStreamsPerConnection = 100
	// DefaultMaxConnections bounds the client connections open at once on
	// listen. An idle gRPC connection costs the gateway about 20 KiB and a
	// file descriptor; 4096 of them about 90 MiB, and that leaves the descriptors
	// that agents' pipes and the store's files need under a typical
	// RLIMIT_NOFILE.
	DefaultMaxConnections = 4096
	// DefaultMaxWatchersPerTurn bounds the WatchTurn streams open at once
	// on one turn. A turn has its own stream and, usually, a dashboard or
	// a resuming client or two; each watcher that stops reading still
	// holds what gRPC buffers for its stream (about 128 KiB of a flood).
	DefaultMaxWatchersPerTurn = 64
	// DefaultMaxWatchersPerPrincipal bounds the WatchTurn streams one
	// principal has open at once, across turns: without it a caller's
	// connections × streams were the only bound.
	DefaultMaxWatchersPerPrincipal = 256
	// DefaultMaxHeaderBytes bounds a call's request headers (its gRPC
	// metadata), as HTTP/2's SETTINGS_MAX_HEADER_LIST_SIZE: 64 KiB holds
	// any ordinary set (a JWT with its claims, trace context, a mesh's
	// headers) and is about what proxies in front of gRPC services allow.
	// gRPC's own default is 16 MiB, kept in memory for the life of each
	// call: 100 calls on one connection could hold 1.6 GB.
	DefaultMaxHeaderBytes = 64 << 10
	// MinMaxHeaderBytes is the smallest limits.max_header_bytes accepted:
	// below it an ordinary call's own headers may not fit.
	MinMaxHeaderBytes = 4 << 10
	// DefaultMaxSessions bounds the sessions open across all agents.
	DefaultMaxSessions = 256
	// DefaultMaxPromptBytes bounds the size of one prompt (1 MiB).
	DefaultMaxPromptBytes = 1 << 20
	// DefaultMaxFrameBytes bounds the size of one JSON-RPC message read from
	// an agent: the connection's own default, so that the two cannot drift.
	DefaultMaxFrameBytes = jsonrpc.DefaultMaxFrameBytes
	// DefaultWarmMaxAge is how long a warm agent process waits to be taken
	// before it is replaced by a fresh one: an agent that caches
	// credentials or reads its configuration at start-up would otherwise
	// serve a session with state hours old.
	DefaultWarmMaxAge = 30 * time.Minute
	// DefaultMaxWarm bounds the warm agent processes kept across all
	// agents: they use memory while serving no one, so their total is
	// bounded apart from the sessions'.
	DefaultMaxWarm = 16
	// MaxWarmPerAgent is the largest accepted agents[].warm.
	MaxWarmPerAgent = 64
	// MinWarmMaxAge is the smallest accepted agents[].warm_max_age: a
	// shorter one would respawn warm processes about as fast as they
	// start, which is the busy loop the pool's back-off exists to avoid.
	MinWarmMaxAge = time.Second
	// DefaultSuspendedRetention is how long a suspended session (see
	// Agent.SuspendedRetention) is kept for its next prompt: a week covers
	// a weekend and a holiday, and agents that keep their conversations on
	// disk keep them at least that long.
	DefaultSuspendedRetention = 7 * 24 * time.Hour
	// DefaultMaxSuspended bounds the suspended sessions' records across
	// the gateway. Each costs a row in the store and a little memory, no
	// process; the bound keeps a caller that opens sessions and never
	// closes them from growing the store without end.
	DefaultMaxSuspended = 4096
	// DefaultNice is Agent.Nice when not set: agents run 5 nice levels
	// below the gateway (about a third of its share of a busy CPU), so
	// that when the CPUs are busy the gateway, the one hop every turn's
	// chunks share, runs first. Measured with 50 LLM-paced turns at once
	// on 2 cores: per-turn p99 about halved, and about a quarter lower
	// counted from when the agent meant to send each chunk; an unpaced
	// 64 B flood 7 – 9 % slower, where nice 10 made it 27 % slower for
	// no better p99 (docs/performance.md).
	DefaultNice = 5
	// DefaultMaxSessionsPerProcess bounds the sessions one agent process
	// serves under Agent.ReuseProcess: enough to spare most start-ups,
	// few enough that one crash ends a handful of sessions, not hundreds.
	DefaultMaxSessionsPerProcess = 8
	// DefaultShutdownGrace is how long the gateway gives open sessions to end
	// when it is asked to stop.
	DefaultShutdownGrace = 10 * time.Second
	// DefaultRequestReadTimeout bounds how long a call may take to send its
	// request message once its headers are in: a client that opens calls
	// and never sends their requests otherwise holds each for as long as
	// the connection lives (about 14 KiB apiece, and no handler ever sees
	// it to refuse it). 30 s sends a prompt of the default 1 MiB at
	// 35 KB/s.
	DefaultRequestReadTimeout = 30 * time.Second
	// DefaultPostgresMaxConns and DefaultPostgresStatementTimeout are the
	// postgres store's own defaults, so that one number is meant
	// everywhere.
	DefaultPostgresMaxConns         = postgres.DefaultMaxConns
	DefaultPostgresStatementTimeout = postgres.DefaultStatementTimeout
)

// MinMaxFrameBytes is the smallest accepted limits.max_frame_bytes (64 KiB).
// Agents' ordinary messages (initialize results, session updates) need room.
const MinMaxFrameBytes = 64 << 10

// Config is the whole configuration of the gateway.
type Config struct {
	// Listen is the host:port the gRPC service listens on.
	Listen string
	// Agents are the agent programs clients may run, in file order.
	Agents []Agent
	// Limits are the gateway-wide limits.
	Limits Limits
	// ShutdownGrace bounds the whole shutdown, from the signal to the
	// process's exit.
	ShutdownGrace time.Duration
	// HandshakeTimeout is the default of Agent.HandshakeTimeout.
	HandshakeTimeout time.Duration
	// RequestReadTimeout bounds the time from a call's headers to its
	// whole request message; a call whose request is later is ended.
	RequestReadTimeout time.Duration
	// Store is where turns and their journals are kept.
	Store StoreKind
	// StateDir is the directory of the sqlite store; empty means
	// DefaultStateDir's answer.
	StateDir string
	// Postgres is the database of the postgres store.
	Postgres Postgres
	// HeartbeatInterval is how long a Prompt or WatchTurn stream may send
	// nothing before it gets a heartbeat event.
	HeartbeatInterval time.Duration
	// TurnRetention is how long an ended turn is kept, journal and all.
	TurnRetention time.Duration
	// SuspendedRetention is the default of Agent.SuspendedRetention.
	SuspendedRetention time.Duration
	// TLS is the listener's transport security; plaintext when not
	// Enabled.
	TLS TLS
	// Auth is how callers are identified.
	Auth Auth
	// Insecure allows listening beyond loopback without TLS or auth (a
	// mesh whose sidecar terminates mTLS); see ExposureProblem.
	Insecure bool
	// Quotas bound what each caller may use.
	Quotas Quotas
	// Audit is the per-RPC audit log.
	Audit Audit
	// Metrics is the Prometheus endpoint; off unless Metrics.Listen is set.
	Metrics Metrics
	// Tracing is the OpenTelemetry trace export; off unless
	// Tracing.Enabled.
	Tracing Tracing
	// Cluster makes the gateway one of several replicas on one
	// PostgreSQL store; off unless Cluster.Advertise is set.
	Cluster Cluster
	// Admin is grpc-go's admin services (channelz); off unless
	// Admin.Listen is set.
	Admin Admin
	// MCP is what callers may ask of MCP servers for their sessions.
	MCP MCP
	// Webhooks is where turns' endings may be announced; none unless
	// Webhooks.AllowedURLPrefixes is set.
	Webhooks Webhooks
}

// MCP is the operator's policy for the MCP servers callers name in
// CreateSession and one-shot Prompt. Callers never choose a command: a
// stdio server is one offered here (or by the agent), asked for by name,
// and a remote one must live under an allowed URL prefix. The zero value
// allows no caller MCP server at all.
type MCP struct {
	// AllowedURLPrefixes are the prefixes a caller's HTTP or SSE server
	// URL must start with: absolute http or https URLs whose path ends in
	// "/", so that a prefix ends at a path boundary and cannot be extended
	// into another host name (https://mcp.example.com.evil.test).
	AllowedURLPrefixes []string
	// Offered are stdio MCP servers a caller of any agent may ask for by
	// name.
	Offered []MCPServer
}

// Metrics configures the Prometheus /metrics endpoint.
type Metrics struct {
	// Listen is the host:port of the plain HTTP server serving /metrics;
	// empty (the default) serves no metrics.
	Listen string
}

// Admin configures grpc-go's admin services (channelz: the gateway's gRPC
// servers, their listen sockets, connections and call counts), served on
// a plaintext gRPC listener of their own, apart from the gateway's TLS and
// authentication.
type Admin struct {
	// Listen is the host:port of the admin gRPC server; empty (the
	// default) serves none.
	Listen string
	// AllowRemote permits a Listen beyond loopback. The admin services
	// have no authentication and show every client's address and traffic,
	// so exposing them is a choice to write down, not a default.
	AllowRemote bool
}

// StoreKind names a turn store.
type StoreKind string

// The turn stores.
const (
	// StoreSQLite keeps turns in one SQLite file in StateDir: they
	// survive a restart.
	StoreSQLite StoreKind = "sqlite"
	// StoreMemory keeps turns in memory: nothing survives the process.
	StoreMemory StoreKind = "memory"
	// StorePostgres keeps turns in a PostgreSQL database, which several
	// gateway replicas may share.
	StorePostgres StoreKind = "postgres"
)

// Postgres configures the postgres store's database connections.
type Postgres struct {
	// DSN is the connection string (a postgres:// URL or key=value
	// pairs). ${VAR} references are expanded, so that the password can
	// stay out of the file: dsn: ${ACPGATE_POSTGRES_DSN}.
	DSN string
	// MaxConns bounds the connection pool (the listening connection for
	// notifications is one more).
	MaxConns int
	// StatementTimeout bounds every statement the store runs.
	StatementTimeout time.Duration
}

// DefaultStateDir is where the sqlite store lives when state_dir is not
// set: acpgate under $XDG_STATE_HOME, else under ~/.local/state.
func DefaultStateDir(lookupEnv func(string) (string, bool)) (string, error) {
	if lookupEnv != nil {
		if d, ok := lookupEnv("XDG_STATE_HOME"); ok && filepath.IsAbs(d) {
			return filepath.Join(d, "acpgate"), nil
		}
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("finding a state directory (set state_dir): %w", err)
	}
	return filepath.Join(home, ".local", "state", "acpgate"), nil
}

// Agent describes one ACP agent program and how sessions with it are run.
type Agent struct {
	// Name identifies the agent to clients. It matches
	// ^[a-z0-9][a-z0-9._-]{0,62}$ and is unique within the configuration.
	Name string
	// Description is a human-readable summary shown to clients.
	Description string
	// Command is the program to run: a path, or a name looked up in PATH.
	Command string
	// Args are the program's arguments, not including the program itself.
	Args []string
	// Env holds environment variables set explicitly for the agent, with
	// ${VAR} references already expanded.
	Env map[string]string
	// InheritEnv names the gateway's environment variables passed through to
	// the agent when they are set.
	InheritEnv []string
	// AuthMethod, when set, is the method id passed to ACP authenticate
	// after initialize.
	AuthMethod string
	// Workspace is the absolute directory sessions run in. Empty means a
	// fresh temporary directory per session, removed when it closes.
	Workspace string
	// PermissionPolicy decides the agent's permission requests.
	PermissionPolicy Policy
	// PermissionTimeout is how long the ask policy waits for the client
	// before falling back to reject.
	PermissionTimeout time.Duration
	// Elicitation decides the agent's elicitation/create requests:
	// decline (the default) or ask.
	Elicitation ElicitationMode
	// ElicitationTimeout is how long the ask policy waits for the client
	// before declining.
	ElicitationTimeout time.Duration
	// FS is the file-system access offered to the agent.
	FS FS
	// Sandbox confines the agent's file-system access with the kernel's
	// Landlock.
	Sandbox Sandbox
	// StrictFraming makes any non-JSON-RPC line on the agent's stdout a
	// protocol error instead of something to skip.
	StrictFraming bool
	// TurnTimeout bounds one prompt turn.
	TurnTimeout time.Duration
	// IdleTimeout is how long a session may go unused before it is closed.
	IdleTimeout time.Duration
	// CancelGrace is how long the agent has to end a cancelled turn before
	// it is stopped.
	CancelGrace time.Duration
	// HandshakeTimeout bounds the agent's start-up, from spawn through
	// session/new or session/load; the top-level handshake_timeout when
	// the agent does not set its own.
	HandshakeTimeout time.Duration
	// Nice is how many nice levels below the gateway's own CPU priority
	// the agent's processes run, from 0 (the gateway's) to 19; the
	// resulting nice value stops at 19. See agentproc.Starter.
	Nice int
	// MaxSessions bounds this agent's open sessions; 0 means no per-agent
	// limit (the gateway-wide limit still applies).
	MaxSessions int
	// Warm is how many processes of the agent the gateway keeps started,
	// initialized and authenticated, with no session, so that a session
	// takes one instead of waiting for the agent's start-up; 0 keeps none.
	// Warm processes count toward Limits.MaxWarm, not toward the session
	// limits, until one is taken.
	Warm int
	// WarmMaxAge is how long a warm process may wait to be taken before it
	// is replaced.
	WarmMaxAge time.Duration
	// SuspendedRetention is how long a suspended session waits to be
	// re-opened: one not re-opened within it of its suspension is ended and
	// its record deleted. The top-level suspended_retention when the agent
	// does not set its own.
	SuspendedRetention time.Duration
	// ReuseProcess lets one process of the agent serve several sessions
	// (several session/new on one connection, which ACP allows), of one
	// principal in one working directory, up to MaxSessionsPerProcess. It
	// needs a Workspace. Those sessions share the process's memory, files
	// and caches, and its crash ends them all.
	ReuseProcess bool
	// MaxSessionsPerProcess bounds the sessions one process serves under
	// ReuseProcess.
	MaxSessionsPerProcess int
	// MCPServers are passed to the agent in every session/new.
	MCPServers []MCPServer
	// MCPOffered are stdio MCP servers a caller of this agent may ask for
	// by name (besides MCP.Offered); they are passed only when asked for.
	MCPOffered []MCPServer
	// NotifyURL is where the endings of this agent's turns are announced
	// when a Prompt names no notify_url (see Webhooks); "" for none.
	NotifyURL string
	// Allow are the principal patterns that may use the agent; empty
	// means every caller. A pattern is a principal's exact name, a prefix
	// ending in "*" (a SPIFFE trust domain or path: spiffe://example.org/ml/*),
	// or claim:NAME=VALUE, matching a caller whose attribute NAME (a
	// token's configured claim) has VALUE.
	Allow []string
}

// FS is the file-system capability the gateway offers an agent: whether
// the agent may ask the gateway to read or write text files in the session's
// workspace.
type FS struct {
	// Read offers fs/read_text_file.
	Read bool
	// Write offers fs/write_text_file.
	Write bool
}

// Sandbox says how an agent is confined by the kernel (Landlock): with
// Enabled, the agent process and everything it starts may read and write
// only the session's working directory and RW, and read only the system's
// directories, its own command's directory and RO. See package sandbox.
type Sandbox struct {
	// Enabled confines the agent. Default false.
	Enabled bool
	// Required refuses to start the agent when the kernel cannot confine
	// it; without it the agent then runs unconfined, with a warning.
	Required bool
	// RW are absolute paths the agent may also read and write.
	RW []string
	// RO are absolute paths the agent may also read.
	RO []string
}

// MCPServer is a stdio MCP server handed to the agent in session/new.
type MCPServer struct {
	// Name identifies the server to the agent; unique within the agent.
	Name string
	// Command is the server program.
	Command string
	// Args are the server program's arguments.
	Args []string
	// Env holds environment variables for the server, with ${VAR}
	// references already expanded.
	Env map[string]string
}

// Policy is how the gateway answers an agent's session/request_permission:
// the runtime's own type, so a configured value needs no conversion.
type Policy = clientreq.Policy

// The permission policies, as written in a configuration file.
const (
	PolicyReject = clientreq.PolicyReject
	PolicyAllow  = clientreq.PolicyAllow
	PolicyAsk    = clientreq.PolicyAsk
)

// ElicitationMode is how the gateway answers an agent's elicitation/create:
// the runtime's own type.
type ElicitationMode = clientreq.ElicitationMode

// The elicitation policies, as written in a configuration file.
const (
	ElicitDecline = clientreq.ElicitDecline
	ElicitAsk     = clientreq.ElicitAsk
)

// Limits are the gateway-wide limits.
type Limits struct {
	// MaxSessions bounds the sessions open across all agents, counting
	// those still starting.
	MaxSessions int
	// MaxWarm bounds the warm processes (see Agent.Warm) kept across all
	// agents, counting those still starting. They are not sessions: a
	// warm process counts toward MaxSessions only once it is taken.
	MaxWarm int
	// MaxStartingAgents bounds the agent processes starting at once
	// across all agents, cold and warm, from the spawn until the agent
	// has answered initialize; a caller's start-up beyond it waits for one to end (bounded
	// by the agent's handshake timeout), a warm pool's waits for none. 0
	// sets no bound. See admission.Starts for why; DefaultMaxStartingAgents
	// when not set.
	MaxStartingAgents int
	// MaxSuspended bounds the suspended sessions across all agents; when a
	// suspension goes past it, the sessions suspended longest are ended.
	MaxSuspended int
	// MaxAgentRequests bounds the requests one agent may have waiting for
	// the gateway's answer (fs, permission, unknown methods); beyond it the
	// gateway stops reading from that agent until one is answered.
	MaxAgentRequests int
	// MaxAgentReplyBytes bounds the bytes the gateway's answers to one
	// agent process's requests hold until the agent reads them; a request
	// whose answer does not fit waits, then is answered with an error.
	MaxAgentReplyBytes int64
	// MaxStreamsPerConnection bounds the concurrent calls on one client
	// connection.
	MaxStreamsPerConnection int
	// MaxConnections bounds the client connections open at once on listen;
	// beyond it the gateway stops accepting until one closes.
	MaxConnections int
	// MaxWatchersPerTurn bounds the WatchTurn streams open at once on one
	// turn; one more is refused with RESOURCE_EXHAUSTED and a RetryInfo.
	MaxWatchersPerTurn int
	// MaxWatchersPerPrincipal bounds the WatchTurn streams one principal
	// has open at once; one more is refused the same way.
	MaxWatchersPerPrincipal int
	// MaxHeaderBytes bounds a call's request headers (gRPC metadata); a
	// call with more is refused at the HTTP/2 level.
	MaxHeaderBytes int
	// MaxTurnBytes bounds one turn's journal; a turn that reaches it is
	// cancelled.
	MaxTurnBytes int64
	// MaxAnswerBytes bounds the answer text all turns hold together for
	// their outcomes; a turn that would go over it completes with its
	// text omitted (TEXT_OMISSION_ANSWER_LIMIT).
	MaxAnswerBytes int64
	// MaxPromptBytes bounds the size of one prompt.
	MaxPromptBytes int
	// MaxFrameBytes bounds one JSON-RPC message read from an agent.
	MaxFrameBytes int
}

// Error is one problem found in a configuration.
type Error struct {
	// Source names the configuration, usually its file path; it may be "".
	Source string
	// Line is the 1-based line the problem is on, or 0 when it has none
	// (a required setting that is missing from the whole file, say).
	Line int
	// Msg says what is wrong and with which setting.
	Msg string
}

// Error formats the problem as source:line: message.
func (e *Error) Error() string {
	switch {
	case e.Source != "" && e.Line > 0:
		return e.Source + ":" + strconv.Itoa(e.Line) + ": " + e.Msg
	case e.Source != "":
		return e.Source + ": " + e.Msg
	case e.Line > 0:
		return "line " + strconv.Itoa(e.Line) + ": " + e.Msg
	default:
		return e.Msg
	}
}

// Load reads the configuration file at path and parses it with Parse.
// lookupEnv resolves ${VAR} references; nil means no variable is set.
func Load(path string, lookupEnv func(string) (string, bool)) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading configuration: %w", err)
	}
	return Parse(data, path, lookupEnv)
}

// Parse decodes and validates a YAML configuration. source names it in error
// messages (normally the file path). lookupEnv resolves ${VAR} references;
// nil means no variable is set. Settings that are left out get their
// defaults.
//
// On failure the error joins every problem found, each an *Error, ordered by
// line; the returned Config is nil.
func Parse(data []byte, source string, lookupEnv func(string) (string, bool)) (*Config, error) {
	root, err := parseYAML(data, source)
	if err != nil {
		return nil, err
	}
	d := newDecoder(source, lookupEnv)
	c := defaults()
	d.config(root, c)
	c.inheritDefaults()
	v := &checker{source: source, lines: d.lines, bad: d.bad}
	v.config(c)
	errs := append(d.errs, v.errs...)
	if len(errs) > 0 {
		return nil, joinByLine(errs)
	}
	return c, nil
}

// Validate checks a Config built in code (Default's, or a test's) by the
// same rules Parse applies. The errors carry no source or line.
func (c *Config) Validate() error {
	c.inheritDefaults()
	v := &checker{}
	v.config(c)
	return joinByLine(v.errs)
}

// Default is the configuration used when there is no configuration file:
// one agent, "demo", which runs self (the path of the running acpgate
// executable) with the argument demo-agent. It passes through PATH and HOME,
// rejects permission requests and may read but not write files. Everything
// else has its default.
func Default(self string) *Config {
	c := defaults()
	a := defaultAgent()
	a.Name = "demo"
	a.Description = "built-in demo agent"
	a.Command = self
	a.Args = []string{"demo-agent"}
	a.InheritEnv = []string{"PATH", "HOME"}
	a.FS = FS{Read: true, Write: false}
	c.Agents = []Agent{a}
	c.inheritDefaults()
	return c
}

// Environ is the agent's process environment as "KEY=VALUE" strings sorted
// by key: each variable named in InheritEnv that lookupEnv reports set, then
// the Env values, which win over inherited ones of the same name. Nothing
// else of the gateway's environment is included. lookupEnv nil means nothing
// is inherited.
//
// The result is never nil, even when empty: an exec.Cmd with a nil Env
// would inherit the gateway's whole environment.
func (a Agent) Environ(lookupEnv func(string) (string, bool)) []string {
	vars := make(map[string]string, len(a.InheritEnv)+len(a.Env))
	if lookupEnv != nil {
		for _, name := range a.InheritEnv {
			if v, ok := lookupEnv(name); ok {
				vars[name] = v
			}
		}
	}
	for k, v := range a.Env {
		vars[k] = v
	}
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	env := make([]string, 0, len(keys))
	for _, k := range keys {
		env = append(env, k+"="+vars[k])
	}
	return env
}

// DefaultMaxStartingAgents is limits.max_starting_agents when not set: two
// start-ups per CPU the gateway may use, and at least 4. A start-up mostly
// wants a CPU (a launcher, an agent's runtime and its start-up code), so
// a bound in CPUs keeps a burst of turns from taking the CPUs from those
// already streaming, while two per CPU let one start-up run while another
// waits on its pipes or its disk.
func DefaultMaxStartingAgents() int { return max(4, 2*runtime.GOMAXPROCS(0)) }

// defaults is a Config with every top-level default and no agents.
func defaults() *Config {
	return &Config{
		Listen: DefaultListen,
		Limits: Limits{
			MaxSessions:       DefaultMaxSessions,
			MaxWarm:           DefaultMaxWarm,
			MaxStartingAgents: DefaultMaxStartingAgents(),
			MaxSuspended:      DefaultMaxSuspended,
			MaxPromptBytes:    DefaultMaxPromptBytes,
			MaxFrameBytes:     DefaultMaxFrameBytes,

			MaxAgentRequests:        DefaultMaxAgentRequests,
			MaxAgentReplyBytes:      DefaultMaxAgentReplyBytes,
			MaxStreamsPerConnection: DefaultMaxStreamsPerConnection,
			MaxConnections:          DefaultMaxConnections,
			MaxWatchersPerTurn:      DefaultMaxWatchersPerTurn,
			MaxWatchersPerPrincipal: DefaultMaxWatchersPerPrincipal,
			MaxHeaderBytes:          DefaultMaxHeaderBytes,
			MaxTurnBytes:            DefaultMaxTurnBytes,
			MaxAnswerBytes:          answer.DefaultMaxBytes,
		},
		ShutdownGrace:      DefaultShutdownGrace,
		HandshakeTimeout:   DefaultHandshakeTimeout,
		RequestReadTimeout: DefaultRequestReadTimeout,
		Store:              StoreSQLite,
		Postgres:           Postgres{MaxConns: DefaultPostgresMaxConns, StatementTimeout: DefaultPostgresStatementTimeout},
		HeartbeatInterval:  DefaultHeartbeatInterval,
		TurnRetention:      DefaultTurnRetention,
		SuspendedRetention: DefaultSuspendedRetention,
		Audit:              Audit{Enabled: true},
		Tracing:            Tracing{SamplingRatio: DefaultSamplingRatio},
		Cluster:            Cluster{LeaseTTL: DefaultLeaseTTL},
	}
}

// defaultAgent is an Agent with every per-agent default.
func defaultAgent() Agent {
	return Agent{
		PermissionPolicy:   PolicyReject,
		PermissionTimeout:  DefaultPermissionTimeout,
		Elicitation:        ElicitDecline,
		ElicitationTimeout: DefaultPermissionTimeout,
		TurnTimeout:        DefaultTurnTimeout,
		IdleTimeout:        DefaultIdleTimeout,
		CancelGrace:        DefaultCancelGrace,
		WarmMaxAge:         DefaultWarmMaxAge,
		Nice:               DefaultNice,

		MaxSessionsPerProcess: DefaultMaxSessionsPerProcess,
	}
}

// inheritDefaults gives each agent the top-level settings it did not set
// itself.
func (c *Config) inheritDefaults() {
	c.resolveSecurityDefaults()
	for i := range c.Agents {
		if c.Agents[i].HandshakeTimeout == 0 {
			c.Agents[i].HandshakeTimeout = c.HandshakeTimeout
		}
		if c.Agents[i].SuspendedRetention == 0 {
			c.Agents[i].SuspendedRetention = c.SuspendedRetention
		}
	}
}

// joinByLine joins errs, ordering *Error values by line with the ones that
// have no line last. It returns nil for no errors.
func joinByLine(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	key := func(err error) int {
		var e *Error
		if errors.As(err, &e) && e.Line > 0 {
			return e.Line
		}
		return int(^uint(0) >> 1)
	}
	sorted := slices.Clone(errs)
	slices.SortStableFunc(sorted, func(a, b error) int { return cmp.Compare(key(a), key(b)) })
	return errors.Join(sorted...)
}
