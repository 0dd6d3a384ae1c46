package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// envOf is a lookupEnv over a fixed map.
func envOf(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

// problems lists the messages of every error joined in err.
func problems(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var errs []error
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		errs = joined.Unwrap()
	} else {
		errs = []error{err}
	}
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		var ce *Error
		if !errors.As(e, &ce) {
			t.Errorf("error %q is a %T, not a *config.Error", e, e)
		}
		out = append(out, e.Error())
	}
	return out
}

// fullExample is the example configuration of the documentation. The ${...}
// in the flow mapping is quoted: unquoted, YAML reads its braces as
// structure (see TestParseErrors, "unquoted reference in a flow mapping").
const fullExample = `listen: 127.0.0.1:7070
agents:
  - name: gemini
    description: Gemini CLI
    command: gemini
    args: [--acp]
    env: {GEMINI_API_KEY: "${GEMINI_API_KEY}"}   # values may reference the gateway's environment
    inherit_env: [PATH, HOME]
    auth_method: gemini-api-key                # call authenticate with this method after initialize
    workspace: /srv/acpgate/gemini             # default: a fresh temporary directory per session
    permission_policy: reject                  # reject | allow | ask
    permission_timeout: 5m                     # ask policy: how long to wait for a client
    fs: {read: true, write: false}
    strict_framing: false
    turn_timeout: 10m
    idle_timeout: 30m
    cancel_grace: 10s
    handshake_timeout: 2m                      # default: the top-level handshake_timeout
    max_sessions: 8
    mcp_servers:                               # passed to session/new
      - name: files
        command: /usr/bin/mcp-files
        args: [--root, /srv]
        env: {A: b}
    mcp_offered:                               # passed when a caller names it
      - {name: search, command: /usr/bin/mcp-search}
mcp:
  allowed_url_prefixes: [https://mcp.example.com/v1/]
  offered:
    - {name: tickets, command: /usr/bin/mcp-tickets, args: [--ro]}
limits: {max_sessions: 256, max_prompt_bytes: 1048576, max_frame_bytes: 16777216, max_agent_requests: 16, max_streams_per_connection: 100, max_connections: 64, max_header_bytes: 8192}
shutdown_grace: 10s
handshake_timeout: 30s
request_read_timeout: 20s
`

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		want *Config
	}{
		{
			name: "the full example",
			yaml: fullExample,
			env:  map[string]string{"GEMINI_API_KEY": "k-123", "UNRELATED": "x"},
			want: &Config{
				Listen: "127.0.0.1:7070",
				Agents: []Agent{{
					Name:              "gemini",
					Description:       "Gemini CLI",
					Command:           "gemini",
					Args:              []string{"--acp"},
					Env:               map[string]string{"GEMINI_API_KEY": "k-123"},
					InheritEnv:        []string{"PATH", "HOME"},
					AuthMethod:        "gemini-api-key",
					Workspace:         "/srv/acpgate/gemini",
					PermissionPolicy:  PolicyReject,
					PermissionTimeout: 5 * time.Minute, Elicitation: ElicitDecline, ElicitationTimeout: DefaultPermissionTimeout,
					FS:            FS{Read: true, Write: false},
					StrictFraming: false,
					TurnTimeout:   10 * time.Minute,
					IdleTimeout:   30 * time.Minute,
					CancelGrace:   10 * time.Second, WarmMaxAge: DefaultWarmMaxAge, Nice: DefaultNice, SuspendedRetention: DefaultSuspendedRetention, MaxSessionsPerProcess: DefaultMaxSessionsPerProcess,
					HandshakeTimeout: 2 * time.Minute,
					MaxSessions:      8,
					MCPServers: []MCPServer{{
						Name:    "files",
						Command: "/usr/bin/mcp-files",
						Args:    []string{"--root", "/srv"},
						Env:     map[string]string{"A": "b"},
					}},
					MCPOffered: []MCPServer{{Name: "search", Command: "/usr/bin/mcp-search"}},
				}},
				MCP: MCP{
					AllowedURLPrefixes: []string{"https://mcp.example.com/v1/"},
					Offered:            []MCPServer{{Name: "tickets", Command: "/usr/bin/mcp-tickets", Args: []string{"--ro"}}},
				},
				Limits:             Limits{MaxSessions: 256, MaxWarm: DefaultMaxWarm, MaxStartingAgents: DefaultMaxStartingAgents(), MaxSuspended: DefaultMaxSuspended, MaxPromptBytes: 1 << 20, MaxFrameBytes: 16 << 20, MaxAgentRequests: 16, MaxAgentReplyBytes: DefaultMaxAgentReplyBytes, MaxStreamsPerConnection: 100, MaxConnections: 64, MaxWatchersPerTurn: DefaultMaxWatchersPerTurn, MaxWatchersPerPrincipal: DefaultMaxWatchersPerPrincipal, MaxHeaderBytes: 8192, MaxTurnBytes: DefaultMaxTurnBytes, MaxAnswerBytes: 512 << 20},
				ShutdownGrace:      10 * time.Second,
				HandshakeTimeout:   30 * time.Second,
				RequestReadTimeout: 20 * time.Second,
				Postgres:           defaultPostgres, Store: StoreSQLite, HeartbeatInterval: DefaultHeartbeatInterval, TurnRetention: DefaultTurnRetention, SuspendedRetention: DefaultSuspendedRetention, Audit: Audit{Enabled: true}, Tracing: Tracing{SamplingRatio: DefaultSamplingRatio}, Cluster: Cluster{LeaseTTL: DefaultLeaseTTL},
				TLS: TLS{ClientAuth: ClientAuthNone}, Auth: Auth{Mode: AuthNone, Public: []string{PublicHealth, PublicReflection}},
			},
		},
		{
			name: "defaults fill everything left out",
			yaml: "agents:\n  - name: a\n    command: /bin/a\n",
			want: &Config{
				Listen: "127.0.0.1:7070",
				Agents: []Agent{{
					Name:              "a",
					Command:           "/bin/a",
					PermissionPolicy:  PolicyReject,
					PermissionTimeout: 5 * time.Minute, Elicitation: ElicitDecline, ElicitationTimeout: DefaultPermissionTimeout,
					TurnTimeout: 30 * time.Minute,
					IdleTimeout: 30 * time.Minute,
					CancelGrace: 10 * time.Second, WarmMaxAge: DefaultWarmMaxAge, Nice: DefaultNice, SuspendedRetention: DefaultSuspendedRetention, MaxSessionsPerProcess: DefaultMaxSessionsPerProcess,
					HandshakeTimeout: DefaultHandshakeTimeout,
					MaxSessions:      0,
				}},
				Limits:             Limits{MaxSessions: 256, MaxWarm: DefaultMaxWarm, MaxStartingAgents: DefaultMaxStartingAgents(), MaxSuspended: DefaultMaxSuspended, MaxPromptBytes: 1048576, MaxFrameBytes: 16777216, MaxAgentRequests: DefaultMaxAgentRequests, MaxAgentReplyBytes: DefaultMaxAgentReplyBytes, MaxStreamsPerConnection: DefaultMaxStreamsPerConnection, MaxConnections: DefaultMaxConnections, MaxWatchersPerTurn: DefaultMaxWatchersPerTurn, MaxWatchersPerPrincipal: DefaultMaxWatchersPerPrincipal, MaxHeaderBytes: DefaultMaxHeaderBytes, MaxTurnBytes: DefaultMaxTurnBytes, MaxAnswerBytes: 512 << 20},
				ShutdownGrace:      10 * time.Second,
				HandshakeTimeout:   DefaultHandshakeTimeout,
				RequestReadTimeout: DefaultRequestReadTimeout,
				Postgres:           defaultPostgres, Store: StoreSQLite, HeartbeatInterval: DefaultHeartbeatInterval, TurnRetention: DefaultTurnRetention, SuspendedRetention: DefaultSuspendedRetention, Audit: Audit{Enabled: true}, Tracing: Tracing{SamplingRatio: DefaultSamplingRatio}, Cluster: Cluster{LeaseTTL: DefaultLeaseTTL},
				TLS: TLS{ClientAuth: ClientAuthNone}, Auth: Auth{Mode: AuthNone, Public: []string{PublicHealth, PublicReflection}},
			},
		},
		{
			name: "empty values and null mean not given",
			yaml: "listen:\nagents:\n  - name: a\n    command: a\n    workspace: ~\n    turn_timeout:\n    fs:\n    env:\n    args: []\nlimits: {}\n",
			want: &Config{
				Listen: DefaultListen,
				Agents: []Agent{{
					Name: "a", Command: "a",
					PermissionPolicy: PolicyReject, PermissionTimeout: DefaultPermissionTimeout, Elicitation: ElicitDecline, ElicitationTimeout: DefaultPermissionTimeout,
					TurnTimeout: DefaultTurnTimeout, IdleTimeout: DefaultIdleTimeout, CancelGrace: DefaultCancelGrace, WarmMaxAge: DefaultWarmMaxAge, Nice: DefaultNice, SuspendedRetention: DefaultSuspendedRetention, MaxSessionsPerProcess: DefaultMaxSessionsPerProcess, HandshakeTimeout: DefaultHandshakeTimeout,
				}},
				Limits:             Limits{MaxSessions: DefaultMaxSessions, MaxWarm: DefaultMaxWarm, MaxStartingAgents: DefaultMaxStartingAgents(), MaxSuspended: DefaultMaxSuspended, MaxPromptBytes: DefaultMaxPromptBytes, MaxFrameBytes: DefaultMaxFrameBytes, MaxAgentRequests: DefaultMaxAgentRequests, MaxAgentReplyBytes: DefaultMaxAgentReplyBytes, MaxStreamsPerConnection: DefaultMaxStreamsPerConnection, MaxConnections: DefaultMaxConnections, MaxWatchersPerTurn: DefaultMaxWatchersPerTurn, MaxWatchersPerPrincipal: DefaultMaxWatchersPerPrincipal, MaxHeaderBytes: DefaultMaxHeaderBytes, MaxTurnBytes: DefaultMaxTurnBytes, MaxAnswerBytes: 512 << 20},
				ShutdownGrace:      DefaultShutdownGrace,
				HandshakeTimeout:   DefaultHandshakeTimeout,
				RequestReadTimeout: DefaultRequestReadTimeout,
				Postgres:           defaultPostgres, Store: StoreSQLite, HeartbeatInterval: DefaultHeartbeatInterval, TurnRetention: DefaultTurnRetention, SuspendedRetention: DefaultSuspendedRetention, Audit: Audit{Enabled: true}, Tracing: Tracing{SamplingRatio: DefaultSamplingRatio}, Cluster: Cluster{LeaseTTL: DefaultLeaseTTL},
				TLS: TLS{ClientAuth: ClientAuthNone}, Auth: Auth{Mode: AuthNone, Public: []string{PublicHealth, PublicReflection}},
			},
		},
		{
			name: "other policies, smallest frame limit, several agents in order",
			yaml: `listen: ":9000"
agents:
  - name: b.2_x-y
    command: b
    permission_policy: allow
    strict_framing: true
    fs: {write: true}
    sandbox: {enabled: true, required: true, rw: [/srv/cache], ro: [/srv/models, /srv/x]}
  - name: 0a
    command: a
    permission_policy: ask
    permission_timeout: 1h30m
    nice: 0
limits: {max_frame_bytes: 65536, max_prompt_bytes: 65536, max_sessions: 1}
shutdown_grace: 250ms
`,
			want: &Config{
				Listen: ":9000",
				Agents: []Agent{
					{
						Name: "b.2_x-y", Command: "b", PermissionPolicy: PolicyAllow, StrictFraming: true, FS: FS{Write: true},
						Sandbox:           Sandbox{Enabled: true, Required: true, RW: []string{"/srv/cache"}, RO: []string{"/srv/models", "/srv/x"}},
						PermissionTimeout: DefaultPermissionTimeout, Elicitation: ElicitDecline, ElicitationTimeout: DefaultPermissionTimeout, TurnTimeout: DefaultTurnTimeout,
						IdleTimeout: DefaultIdleTimeout, CancelGrace: DefaultCancelGrace, WarmMaxAge: DefaultWarmMaxAge, Nice: DefaultNice, SuspendedRetention: DefaultSuspendedRetention, MaxSessionsPerProcess: DefaultMaxSessionsPerProcess, HandshakeTimeout: DefaultHandshakeTimeout,
					},
					{
						Name: "0a", Command: "a", PermissionPolicy: PolicyAsk,
						PermissionTimeout: 90 * time.Minute, Elicitation: ElicitDecline, ElicitationTimeout: DefaultPermissionTimeout, TurnTimeout: DefaultTurnTimeout,
						IdleTimeout: DefaultIdleTimeout, CancelGrace: DefaultCancelGrace, WarmMaxAge: DefaultWarmMaxAge, Nice: 0, SuspendedRetention: DefaultSuspendedRetention, MaxSessionsPerProcess: DefaultMaxSessionsPerProcess, HandshakeTimeout: DefaultHandshakeTimeout,
					},
				},
				Limits:             Limits{MaxSessions: 1, MaxWarm: DefaultMaxWarm, MaxStartingAgents: DefaultMaxStartingAgents(), MaxSuspended: DefaultMaxSuspended, MaxPromptBytes: 65536, MaxFrameBytes: 65536, MaxAgentRequests: DefaultMaxAgentRequests, MaxAgentReplyBytes: DefaultMaxAgentReplyBytes, MaxStreamsPerConnection: DefaultMaxStreamsPerConnection, MaxConnections: DefaultMaxConnections, MaxWatchersPerTurn: DefaultMaxWatchersPerTurn, MaxWatchersPerPrincipal: DefaultMaxWatchersPerPrincipal, MaxHeaderBytes: DefaultMaxHeaderBytes, MaxTurnBytes: DefaultMaxTurnBytes, MaxAnswerBytes: 512 << 20},
				ShutdownGrace:      250 * time.Millisecond,
				HandshakeTimeout:   DefaultHandshakeTimeout,
				RequestReadTimeout: DefaultRequestReadTimeout,
				Postgres:           defaultPostgres, Store: StoreSQLite, HeartbeatInterval: DefaultHeartbeatInterval, TurnRetention: DefaultTurnRetention, SuspendedRetention: DefaultSuspendedRetention, Audit: Audit{Enabled: true}, Tracing: Tracing{SamplingRatio: DefaultSamplingRatio}, Cluster: Cluster{LeaseTTL: DefaultLeaseTTL},
				TLS: TLS{ClientAuth: ClientAuthNone}, Auth: Auth{Mode: AuthNone, Public: []string{PublicHealth, PublicReflection}},
			},
		},
		{
			name: "anchors and aliases are followed",
			yaml: `agents:
  - name: a
    command: a
    env: &common {X: "1", Y: "2"}
  - name: b
    command: b
    env: *common
`,
			want: &Config{
				Listen: DefaultListen,
				Agents: []Agent{
					{
						Name: "a", Command: "a", Env: map[string]string{"X": "1", "Y": "2"},
						PermissionPolicy: PolicyReject, PermissionTimeout: DefaultPermissionTimeout, Elicitation: ElicitDecline, ElicitationTimeout: DefaultPermissionTimeout,
						TurnTimeout: DefaultTurnTimeout, IdleTimeout: DefaultIdleTimeout, CancelGrace: DefaultCancelGrace, WarmMaxAge: DefaultWarmMaxAge, Nice: DefaultNice, SuspendedRetention: DefaultSuspendedRetention, MaxSessionsPerProcess: DefaultMaxSessionsPerProcess, HandshakeTimeout: DefaultHandshakeTimeout,
					},
					{
						Name: "b", Command: "b", Env: map[string]string{"X": "1", "Y": "2"},
						PermissionPolicy: PolicyReject, PermissionTimeout: DefaultPermissionTimeout, Elicitation: ElicitDecline, ElicitationTimeout: DefaultPermissionTimeout,
						TurnTimeout: DefaultTurnTimeout, IdleTimeout: DefaultIdleTimeout, CancelGrace: DefaultCancelGrace, WarmMaxAge: DefaultWarmMaxAge, Nice: DefaultNice, SuspendedRetention: DefaultSuspendedRetention, MaxSessionsPerProcess: DefaultMaxSessionsPerProcess, HandshakeTimeout: DefaultHandshakeTimeout,
					},
				},
				Limits:             Limits{MaxSessions: DefaultMaxSessions, MaxWarm: DefaultMaxWarm, MaxStartingAgents: DefaultMaxStartingAgents(), MaxSuspended: DefaultMaxSuspended, MaxPromptBytes: DefaultMaxPromptBytes, MaxFrameBytes: DefaultMaxFrameBytes, MaxAgentRequests: DefaultMaxAgentRequests, MaxAgentReplyBytes: DefaultMaxAgentReplyBytes, MaxStreamsPerConnection: DefaultMaxStreamsPerConnection, MaxConnections: DefaultMaxConnections, MaxWatchersPerTurn: DefaultMaxWatchersPerTurn, MaxWatchersPerPrincipal: DefaultMaxWatchersPerPrincipal, MaxHeaderBytes: DefaultMaxHeaderBytes, MaxTurnBytes: DefaultMaxTurnBytes, MaxAnswerBytes: 512 << 20},
				ShutdownGrace:      DefaultShutdownGrace,
				HandshakeTimeout:   DefaultHandshakeTimeout,
				RequestReadTimeout: DefaultRequestReadTimeout,
				Postgres:           defaultPostgres, Store: StoreSQLite, HeartbeatInterval: DefaultHeartbeatInterval, TurnRetention: DefaultTurnRetention, SuspendedRetention: DefaultSuspendedRetention, Audit: Audit{Enabled: true}, Tracing: Tracing{SamplingRatio: DefaultSamplingRatio}, Cluster: Cluster{LeaseTTL: DefaultLeaseTTL},
				TLS: TLS{ClientAuth: ClientAuthNone}, Auth: Auth{Mode: AuthNone, Public: []string{PublicHealth, PublicReflection}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.yaml), "config.yaml", envOf(tt.env))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// defaultPostgres is the postgres block a configuration without one has.
var defaultPostgres = Postgres{MaxConns: DefaultPostgresMaxConns, StatementTimeout: DefaultPostgresStatementTimeout}

func TestThePostgresStoreTakesItsDSNFromTheEnvironmentAndHasDefaults(t *testing.T) {
	yaml := "agents:\n  - name: a\n    command: /bin/a\nstore: postgres\npostgres:\n  dsn: ${PG_DSN}\n"
	env := map[string]string{"PG_DSN": "postgres://acpgate:pa$$word@db/acpgate"}
	cfg, err := Parse([]byte(yaml), "config.yaml", envOf(env))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := Postgres{DSN: "postgres://acpgate:pa$$word@db/acpgate", MaxConns: 8, StatementTimeout: 5 * time.Second}
	if cfg.Store != StorePostgres || cfg.Postgres != want {
		t.Errorf("store %q, postgres %+v; want postgres, %+v", cfg.Store, cfg.Postgres, want)
	}
	yaml += "  max_conns: 3\n  statement_timeout: 250ms\n"
	if cfg, err = Parse([]byte(yaml), "config.yaml", envOf(env)); err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if got := cfg.Postgres; got.MaxConns != 3 || got.StatementTimeout != 250*time.Millisecond {
		t.Errorf("postgres = %+v, want max_conns 3 and statement_timeout 250ms", got)
	}
}

func TestParseErrors(t *testing.T) {
	// agent wraps agent settings in a valid configuration; the first setting
	// is on line 4.
	agent := func(settings string) string {
		return "agents:\n  - name: a\n    command: /bin/a\n" + settings
	}
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		want []string // every message, in order
	}{
		// Strict decoding.
		{
			name: "unknown key in an agent, with its line",
			yaml: "agents:\n  - name: gemini\n    command: gemini\n    args: [--acp]\n    comand: gemini\n",
			want: []string{`config.yaml:5: unknown key "comand" in agent "gemini" (did you mean "command"?)`},
		},
		{
			name: "unknown key named before the agent's name",
			yaml: "agents:\n  - flavour: x\n    name: gemini\n    command: gemini\n",
			want: []string{`config.yaml:2: unknown key "flavour" in agent "gemini"`},
		},
		{
			name: "unknown key at top level",
			yaml: agent("") + "listne: 1.2.3.4:5\n",
			want: []string{`config.yaml:4: unknown key "listne" at top level (did you mean "listen"?)`},
		},
		{
			name: "unknown key in limits",
			yaml: agent("") + "limits:\n  max_session: 3\n",
			want: []string{`config.yaml:5: unknown key "max_session" in limits (did you mean "max_sessions"?)`},
		},
		{
			name: "store: postgres needs a dsn",
			yaml: agent("") + "store: postgres\n",
			want: []string{`config.yaml: postgres.dsn: store is postgres, and it needs a connection string (postgres://user@host/db, or ${VAR} to read it from the environment)`},
		},
		{
			name: "a postgres dsn for another store is refused, not ignored",
			yaml: agent("") + "postgres:\n  dsn: postgres://db/acpgate\n",
			want: []string{`config.yaml:5: postgres.dsn: set, but store is sqlite; set store: postgres to use it`},
		},
		{
			name: "postgres limits must be positive",
			yaml: agent("") + "store: postgres\npostgres:\n  dsn: postgres://db/acpgate\n  max_conns: 0\n  statement_timeout: 0s\n",
			want: []string{
				`config.yaml:7: postgres.max_conns: must be positive, got 0`,
				`config.yaml:8: postgres.statement_timeout: must be at least 1ms, got 0s`,
			},
		},
		{
			name: "unknown key in postgres",
			yaml: agent("") + "store: postgres\npostgres:\n  dsn: postgres://db/acpgate\n  max_conn: 3\n",
			want: []string{`config.yaml:7: unknown key "max_conn" in postgres (did you mean "max_conns"?)`},
		},
		{
			name: "unknown key in metrics",
			yaml: agent("") + "metrics:\n  listn: 127.0.0.1:9090\n",
			want: []string{`config.yaml:5: unknown key "listn" in metrics (did you mean "listen"?)`},
		},
		{
			name: "metrics.listen must be a host:port address",
			yaml: agent("") + "metrics: {listen: nowhere}\n",
			want: []string{`config.yaml:4: metrics.listen: "nowhere" is not a host:port address`},
		},
		{
			name: "unknown key in admin",
			yaml: agent("") + "admin:\n  allow_remot: true\n",
			want: []string{`config.yaml:5: unknown key "allow_remot" in admin (did you mean "allow_remote"?)`},
		},
		{
			name: "admin.listen must be a host:port address",
			yaml: agent("") + "admin: {listen: nowhere}\n",
			want: []string{`config.yaml:4: admin.listen: "nowhere" is not a host:port address`},
		},
		{
			name: "admin.listen needs an address of its own",
			yaml: agent("") + "metrics: {listen: \"127.0.0.1:9090\"}\nadmin: {listen: \"127.0.0.1:9090\"}\n",
			want: []string{`config.yaml:5: admin.listen: "127.0.0.1:9090" is also listen or metrics.listen; the admin services need their own address`},
		},
		{
			name: "admin.listen beyond loopback needs admin.allow_remote",
			yaml: agent("") + "admin: {listen: \":9091\"}\n",
			want: []string{`config.yaml:4: admin.listen: ":9091" is reachable beyond this machine and the admin services have no authentication; listen on 127.0.0.1, or set admin.allow_remote: true on a protected network`},
		},
		{
			name: "unknown key in sandbox",
			yaml: agent("    sandbox: {enabled: true, rx: [/a]}\n"),
			want: []string{`config.yaml:4: unknown key "rx" in sandbox of agent "a" (did you mean "ro"?)`},
		},
		{
			name: "sandbox paths must be absolute",
			yaml: agent("    sandbox: {enabled: true, rw: [cache], ro: [/ok, models]}\n"),
			want: []string{
				`config.yaml:4: agent "a": sandbox.rw[0] "cache" must be an absolute path`,
				`config.yaml:4: agent "a": sandbox.ro[1] "models" must be an absolute path`,
			},
		},
		{
			name: "sandbox settings without enabled are a mistake, not ignored",
			yaml: agent("    sandbox:\n      required: true\n"),
			want: []string{`config.yaml:5: agent "a": sandbox.required, rw and ro have no effect unless sandbox.enabled is true`},
		},
		{
			name: "unknown key in fs",
			yaml: agent("    fs: {read: true, exec: true}\n"),
			want: []string{`config.yaml:4: unknown key "exec" in fs of agent "a"`},
		},
		{
			name: "unknown key in an MCP server",
			yaml: agent("    mcp_servers:\n      - name: files\n        command: f\n        url: http://x\n"),
			want: []string{`config.yaml:7: unknown key "url" in agent "a", mcp server "files"`},
		},
		{
			name: "a key given twice",
			yaml: agent("    turn_timeout: 1m\n    turn_timeout: 2m\n"),
			want: []string{`config.yaml:5: duplicate key "turn_timeout" in agent "a" (first at line 4)`},
		},
		{
			name: "an env name given twice",
			yaml: agent("    env:\n      A: x\n      A: y\n"),
			want: []string{`config.yaml:6: duplicate key "A" in env of agent "a" (first at line 5)`},
		},
		{
			name: "merge keys are refused",
			yaml: "agents:\n  - <<: {name: a}\n    name: a\n    command: a\n",
			want: []string{`config.yaml:2: merge keys (<<) are not supported (agent "a")`},
		},
		{
			name: "bad duration names the field and line",
			yaml: agent("    turn_timeout: 10 minutes\n"),
			want: []string{`config.yaml:4: agent "a": turn_timeout: invalid duration "10 minutes": write a Go duration such as 90s, 10m or 1h30m`},
		},
		{
			name: "a duration without a unit",
			yaml: agent("") + "shutdown_grace: 30\n",
			want: []string{`config.yaml:4: shutdown_grace: invalid duration "30": write a Go duration such as 90s, 10m or 1h30m`},
		},
		{
			name: "a list where a value belongs",
			yaml: agent("    cancel_grace: [1s]\n"),
			want: []string{`config.yaml:4: agent "a": cancel_grace: expected a single value, got a list`},
		},
		{
			name: "args that are not a list",
			yaml: agent("    args: --acp\n"),
			want: []string{`config.yaml:4: agent "a": args: expected a list, got the value "--acp"`},
		},
		{
			name: "a null argument",
			yaml: agent("    args: [a, ~]\n"),
			want: []string{`config.yaml:4: agent "a": args[1]: expected a value, got null`},
		},
		{
			name: "a boolean that is not true or false",
			yaml: agent("    fs: {read: yes}\n"),
			want: []string{`config.yaml:4: agent "a": fs.read: expected true or false, got "yes"`},
		},
		{
			name: "a number that is not a whole number",
			yaml: agent("    max_sessions: 2.5\n"),
			want: []string{`config.yaml:4: agent "a": max_sessions: expected a whole number, got "2.5"`},
		},
		{
			name: "a negative warm count, a zero warm_max_age, a negative max_warm and max_starting_agents",
			yaml: agent("    warm: -1\n    warm_max_age: 0s\n") + "limits:\n  max_warm: -2\n  max_starting_agents: -1\n",
			want: []string{
				`config.yaml:4: agent "a": warm must be between 0 (no warm processes) and 64, got -1`,
				`config.yaml:5: agent "a": warm_max_age must be at least 1s, got 0s`,
				`config.yaml:7: limits.max_warm: must not be negative (0 keeps no warm processes), got -2`,
				`config.yaml:8: limits.max_starting_agents: must not be negative (0 sets no bound), got -1`,
			},
		},
		{
			name: "a nice increment that would put an agent ahead of the gateway, and one past the lowest priority",
			yaml: agent("    nice: -1\n") + "  - name: b\n    command: b\n    nice: 20\n",
			want: []string{
				`config.yaml:4: agent "a": nice must be between 0 (the gateway's own CPU priority) and 19 (the lowest), got -1`,
				`config.yaml:7: agent "b": nice must be between 0 (the gateway's own CPU priority) and 19 (the lowest), got 20`,
			},
		},
		{
			name: "reuse_process without a workspace, no sessions per process, no suspended retention or records",
			yaml: agent("    reuse_process: true\n    max_sessions_per_process: 0\n    suspended_retention: -2s\n") + "suspended_retention: -1s\nlimits: {max_suspended: 0}\n",
			want: []string{
				`config.yaml:4: agent "a": reuse_process needs a workspace: without one each session gets a fresh temporary directory of its own, which a process shared by several sessions cannot give`,
				`config.yaml:5: agent "a": max_sessions_per_process: must be positive, got 0`,
				`config.yaml:6: agent "a": suspended_retention: must be positive, got -2s`,
				`config.yaml:7: suspended_retention: must be positive, got -1s`,
				`config.yaml:8: limits.max_suspended: must be positive, got 0`,
			},
		},
		{
			name: "no connections, no streams per connection, headers too small for any call",
			yaml: agent("") + "limits:\n  max_connections: 0\n  max_streams_per_connection: -1\n  max_header_bytes: 1024\n",
			want: []string{
				`config.yaml:5: limits.max_connections: must be positive, got 0`,
				`config.yaml:6: limits.max_streams_per_connection: must be positive, got -1`,
				`config.yaml:7: limits.max_header_bytes: must be at least 4096 (4 KiB), got 1024`,
			},
		},
		{
			name: "answers to an agent too small for one read of the largest file",
			yaml: agent("") + "limits:\n  max_agent_reply_bytes: 8388608\n",
			want: []string{
				`config.yaml:5: limits.max_agent_reply_bytes: must be at least 16778240 (a read of the largest file an agent may read, 8 MiB, with lines selected from it), got 8388608`,
			},
		},
		{
			name: "no watchers per turn or per principal",
			yaml: agent("") + "limits:\n  max_watchers_per_turn: 0\n  max_watchers_per_principal: -1\n",
			want: []string{
				`config.yaml:5: limits.max_watchers_per_turn: must be positive, got 0`,
				`config.yaml:6: limits.max_watchers_per_principal: must be positive, got -1`,
			},
		},
		{
			name: "a null env value",
			yaml: agent("    env: {A: ~}\n"),
			want: []string{`config.yaml:4: agent "a": env A: the value is null; write "" for an empty value`},
		},
		{
			name: "agents that are not a list",
			yaml: "agents: {name: a}\n",
			want: []string{`config.yaml:1: agents: expected a list of agents, got a mapping`},
		},
		{
			name: "an agent that is not a mapping",
			yaml: "agents: [gemini]\n",
			want: []string{`config.yaml:1: agents[0]: expected a mapping describing an agent, got the value "gemini"`},
		},
		{
			name: "a document that is not a mapping",
			yaml: "- a\n- b\n",
			want: []string{
				`config.yaml:1: configuration: expected a mapping, got a list`,
				`config.yaml: agents: at least one agent is required`,
			},
		},
		{
			name: "invalid YAML",
			yaml: "agents: [\n",
			want: []string{`config.yaml:1: invalid YAML: did not find expected node content`},
		},
		{
			name: "unquoted reference in a flow mapping",
			yaml: agent("    env: {KEY: ${KEY}}\n"),
			env:  map[string]string{"KEY": "k"},
			want: []string{`config.yaml:3: invalid YAML: did not find expected ',' or '}' (line 4: inside [...] or {...}, quote a value that uses ${...}, as in "${VAR}")`},
		},
		{
			name: "two documents",
			yaml: agent("") + "---\nlisten: :1\n",
			want: []string{`config.yaml:4: a second YAML document: the configuration must be a single document`},
		},

		// Environment references.
		{
			name: "an unset variable is named",
			yaml: agent("    env:\n      GEMINI_API_KEY: ${GEMINI_API_KEY}\n"),
			env:  map[string]string{"OTHER": "x"},
			want: []string{`config.yaml:5: agent "a": env GEMINI_API_KEY: environment variable GEMINI_API_KEY is not set (referenced as ${GEMINI_API_KEY})`},
		},
		{
			name: "unset variables in command, args, workspace and an MCP server",
			yaml: `agents:
  - name: a
    command: ${BIN}/agent
    args: [--key, "${K1}${K2}"]
    workspace: ${WS}
    mcp_servers:
      - name: m
        command: ${MCP}
        env: {T: "${TOKEN}"}
`,
			env: map[string]string{"K2": "set"},
			want: []string{
				`config.yaml:3: agent "a": command: environment variable BIN is not set (referenced as ${BIN})`,
				`config.yaml:4: agent "a": args[1]: environment variable K1 is not set (referenced as ${K1})`,
				`config.yaml:5: agent "a": workspace: environment variable WS is not set (referenced as ${WS})`,
				`config.yaml:8: agent "a", mcp server "m": command: environment variable MCP is not set (referenced as ${MCP})`,
				`config.yaml:9: agent "a", mcp server "m": env T: environment variable TOKEN is not set (referenced as ${TOKEN})`,
			},
		},
		{
			name: "a bare $ is refused",
			yaml: agent("    env: {P: \"pa$word\"}\n"),
			want: []string{`config.yaml:4: agent "a": env P: a $ must start ${NAME} or be doubled ($$) for a literal $`},
		},
		{
			name: "an unterminated reference",
			yaml: agent("    env: {P: \"${HOME\"}\n"),
			env:  map[string]string{"HOME": "/h"},
			want: []string{`config.yaml:4: agent "a": env P: a ${ without its closing }: write ${NAME}, or $$ for a literal $`},
		},
		{
			name: "a reference that is not a name",
			yaml: agent("    env: {P: \"${HOME:-/tmp}\"}\n"),
			env:  map[string]string{"HOME": "/h"},
			want: []string{`config.yaml:4: agent "a": env P: ${HOME:-/tmp} is not a variable reference: a name is letters, digits and _, not starting with a digit`},
		},

		// Validation.
		{
			name: "an empty file has no agents",
			yaml: "",
			want: []string{`config.yaml: agents: at least one agent is required`},
		},
		{
			name: "an empty agent list",
			yaml: "listen: 127.0.0.1:1\nagents: []\n",
			want: []string{`config.yaml:2: agents: at least one agent is required`},
		},
		{
			name: "name required",
			yaml: "agents:\n  - command: a\n",
			want: []string{`config.yaml:2: agents[0]: name is required`},
		},
		{
			name: "name with capitals",
			yaml: "agents:\n  - command: a\n    name: Gemini\n",
			want: []string{`config.yaml:3: agent "Gemini": name must be 1 to 63 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit (^[a-z0-9][a-z0-9._-]{0,62}$)`},
		},
		{
			name: "name starting with a dash",
			yaml: "agents:\n  - {name: -a, command: a}\n",
			want: []string{`config.yaml:2: agent "-a": name must be 1 to 63 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit (^[a-z0-9][a-z0-9._-]{0,62}$)`},
		},
		{
			name: "name of 64 characters",
			yaml: "agents:\n  - {name: " + strings.Repeat("a", 64) + ", command: a}\n",
			want: []string{`config.yaml:2: agent "` + strings.Repeat("a", 64) + `": name must be 1 to 63 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit (^[a-z0-9][a-z0-9._-]{0,62}$)`},
		},
		{
			name: "duplicate names",
			yaml: "agents:\n  - {name: a, command: a}\n  - {name: b, command: b}\n  - {name: a, command: c}\n",
			want: []string{`config.yaml:4: agent "a": duplicate name, first used by agents[0] (line 2)`},
		},
		{
			name: "command required",
			yaml: "agents:\n  - name: a\n    command: \"\"\n",
			want: []string{`config.yaml:3: agent "a": command is required`},
		},
		{
			name: "command missing altogether",
			yaml: "agents:\n  - name: a\n",
			want: []string{`config.yaml:2: agent "a": command is required`},
		},
		{
			name: "relative workspace",
			yaml: agent("    workspace: work/a\n"),
			want: []string{`config.yaml:4: agent "a": workspace "work/a" must be an absolute path`},
		},
		{
			name: "unknown permission policy",
			yaml: agent("    permission_policy: prompt\n"),
			want: []string{`config.yaml:4: agent "a": permission_policy "prompt" must be one of reject, allow or ask`},
		},
		{
			name: "negative max_sessions",
			yaml: agent("    max_sessions: -1\n"),
			want: []string{`config.yaml:4: agent "a": max_sessions must not be negative (0 means no per-agent limit), got -1`},
		},
		{
			name: "non-positive timeouts",
			yaml: agent("    permission_timeout: 0s\n    turn_timeout: -1m\n    idle_timeout: 0\n    cancel_grace: -5s\n") + "shutdown_grace: 0s\nrequest_read_timeout: 0s\n",
			want: []string{
				`config.yaml:4: agent "a": permission_timeout: must be positive, got 0s`,
				`config.yaml:5: agent "a": turn_timeout: must be positive, got -1m0s`,
				`config.yaml:6: agent "a": idle_timeout: must be positive, got 0s`,
				`config.yaml:7: agent "a": cancel_grace: must be positive, got -5s`,
				`config.yaml:8: shutdown_grace: must be positive, got 0s`,
				`config.yaml:9: request_read_timeout: must be positive, got 0s`,
			},
		},
		{
			name: "frame limit below 64 KiB",
			yaml: agent("") + "limits: {max_frame_bytes: 65535, max_prompt_bytes: 1024}\n",
			want: []string{`config.yaml:4: limits.max_frame_bytes: must be at least 65536 (64 KiB), got 65535`},
		},
		{
			name: "non-positive limits",
			yaml: agent("") + "limits:\n  max_sessions: 0\n  max_prompt_bytes: -1\n",
			want: []string{
				`config.yaml:5: limits.max_sessions: must be positive, got 0`,
				`config.yaml:6: limits.max_prompt_bytes: must be positive, got -1`,
			},
		},
		{
			name: "a prompt limit no frame could carry",
			yaml: agent("") + "limits:\n  max_prompt_bytes: 2097152\n  max_frame_bytes: 1048576\n",
			want: []string{`config.yaml:5: limits.max_prompt_bytes: 2097152 is larger than limits.max_frame_bytes (1048576); a prompt that size could never be sent to an agent`},
		},
		{
			name: "listen that is not host:port",
			yaml: "listen: localhost\n" + agent(""),
			want: []string{`config.yaml:1: listen: "localhost" is not a host:port address`},
		},
		{
			name: "listen empty",
			yaml: "listen: \"\"\n" + agent(""),
			want: []string{`config.yaml:1: listen: an address is required, such as 127.0.0.1:7070`},
		},
		{
			name: "env and inherit_env names",
			yaml: agent("    env: {\"A=B\": x}\n    inherit_env: [PATH, \"\"]\n"),
			want: []string{
				`config.yaml:4: agent "a": env "A=B": an environment variable name must not contain '=' or a NUL byte`,
				`config.yaml:5: agent "a": inherit_env[1]: an environment variable name must not be empty`,
			},
		},
		{
			name: "MCP servers: name and command required, names unique",
			yaml: agent(`    mcp_servers:
      - command: x
      - name: m
      - {name: m, command: y}
`),
			want: []string{
				`config.yaml:5: agent "a", mcp_servers[0]: name is required`,
				`config.yaml:6: agent "a", mcp server "m": command is required`,
				`config.yaml:7: agent "a", mcp server "m": duplicate name, first used by mcp_servers[1] (line 6)`,
			},
		},
		{
			name: "MCP: prefixes end at a path boundary; an offered name means one server",
			yaml: `mcp:
  allowed_url_prefixes: [https://mcp.example.com, "ftp://x/", "https://u@h/", "https://h/p/"]
  offered:
    - {name: files, command: /bin/f}
    - {name: files, command: /bin/g}
agents:
  - name: a
    command: /bin/a
    mcp_servers:
      - {name: files, command: /bin/f}
    mcp_offered:
      - {name: files, command: /bin/f}
      - {name: docs}
`,
			want: []string{
				`config.yaml:2: mcp.allowed_url_prefixes[0]: "https://mcp.example.com" must end with "/" (as in "https://mcp.example.com/") so that it ends at a path boundary and admits no other host`,
				`config.yaml:2: mcp.allowed_url_prefixes[1]: "ftp://x/" must be an http:// or https:// URL`,
				`config.yaml:2: mcp.allowed_url_prefixes[2]: "https://u@h/" must not have user information, a query or a fragment`,
				`config.yaml:5: mcp, mcp server "files": duplicate name, first used by offered[0] (line 4)`,
				`config.yaml:10: agent "a": mcp server "files" is both always given to the agent (mcp_servers) and offered in mcp.offered; rename one`,
				`config.yaml:12: agent "a", mcp server "files": also offered in mcp.offered; a caller's name must mean one server`,
				`config.yaml:12: agent "a", mcp server "files": also in the agent's mcp_servers, which it is always given`,
				`config.yaml:13: agent "a", mcp server "docs": command is required`,
			},
		},
		{
			name: "several problems are reported together, in line order",
			yaml: `listen: nowhere
agents:
  - name: Bad
    workspace: relative
    permission_policy: sometimes
    turn_timeout: soon
    max_sessions: -2
    env: {K: "${MISSING}"}
  - name: ok
    command: ok
    idle_timeout: 0s
    extra: 1
limits: {max_frame_bytes: 1024}
shutdown_grace: -1s
`,
			want: []string{
				`config.yaml:1: listen: "nowhere" is not a host:port address`,
				`config.yaml:3: agent "Bad": name must be 1 to 63 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit (^[a-z0-9][a-z0-9._-]{0,62}$)`,
				`config.yaml:3: agent "Bad": command is required`,
				`config.yaml:4: agent "Bad": workspace "relative" must be an absolute path`,
				`config.yaml:5: agent "Bad": permission_policy "sometimes" must be one of reject, allow or ask`,
				`config.yaml:6: agent "Bad": turn_timeout: invalid duration "soon": write a Go duration such as 90s, 10m or 1h30m`,
				`config.yaml:7: agent "Bad": max_sessions must not be negative (0 means no per-agent limit), got -2`,
				`config.yaml:8: agent "Bad": env K: environment variable MISSING is not set (referenced as ${MISSING})`,
				`config.yaml:11: agent "ok": idle_timeout: must be positive, got 0s`,
				`config.yaml:12: unknown key "extra" in agent "ok"`,
				`config.yaml:13: limits.max_frame_bytes: must be at least 65536 (64 KiB), got 1024`,
				`config.yaml:14: shutdown_grace: must be positive, got -1s`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.yaml), "config.yaml", envOf(tt.env))
			if err == nil {
				t.Fatalf("Parse succeeded with %+v; want errors %q", cfg, tt.want)
			}
			if cfg != nil {
				t.Errorf("Parse returned a config beside its error: %+v", cfg)
			}
			got := problems(t, err)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("errors:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(tt.want, "\n     "))
			}
		})
	}
}

func TestExpansion(t *testing.T) {
	env := map[string]string{
		"HOME":  "/home/gw",
		"KEY":   "s3cr$t",
		"EMPTY": "",
		"BIN":   "/opt/bin",
	}
	yaml := `agents:
  - name: a
    command: ${BIN}/agent
    args: ["--home=${HOME}", "$$HOME", "cost: $$5", "${KEY}${KEY}", plain]
    workspace: ${HOME}/ws
    env:
      API_KEY: ${KEY}
      LITERAL: a$$b$$
      EMPTY: ${EMPTY}
      MIXED: "x-${HOME}-$${HOME}-y"
      NUMBER: 42
    inherit_env: [HOME]
    mcp_servers:
      - name: m
        command: ${BIN}/mcp
        args: ["${HOME}"]
        env: {T: "${KEY}"}
    description: ${NOT_EXPANDED}
    auth_method: $x
`
	cfg, err := Parse([]byte(yaml), "config.yaml", envOf(env))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	a := cfg.Agents[0]
	checks := []struct {
		what      string
		got, want any
	}{
		{"command", a.Command, "/opt/bin/agent"},
		{"args", a.Args, []string{"--home=/home/gw", "$HOME", "cost: $5", "s3cr$ts3cr$t", "plain"}},
		{"workspace", a.Workspace, "/home/gw/ws"},
		{"env", a.Env, map[string]string{
			"API_KEY": "s3cr$t", // a $ in a value is not expanded again
			"LITERAL": "a$b$",
			"EMPTY":   "",
			"MIXED":   "x-/home/gw-${HOME}-y",
			"NUMBER":  "42",
		}},
		{"inherit_env is names, not references", a.InheritEnv, []string{"HOME"}},
		{"mcp command", a.MCPServers[0].Command, "/opt/bin/mcp"},
		{"mcp args", a.MCPServers[0].Args, []string{"/home/gw"}},
		{"mcp env", a.MCPServers[0].Env, map[string]string{"T": "s3cr$t"}},
		{"description is not expanded", a.Description, "${NOT_EXPANDED}"},
		{"auth_method is not expanded", a.AuthMethod, "$x"},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %#v, want %#v", c.what, c.got, c.want)
		}
	}
}

func TestExpand(t *testing.T) {
	lookup := envOf(map[string]string{"A": "1", "B_2": "two", "E": ""})
	tests := []struct {
		in       string
		want     string
		problems []string
	}{
		{in: "", want: ""},
		{in: "no references", want: "no references"},
		{in: "${A}", want: "1"},
		{in: "${A}${B_2}", want: "1two"},
		{in: "x${E}y", want: "xy"},
		{in: "$$", want: "$"},
		{in: "$${A}", want: "${A}"},
		{in: "$$$${A}", want: "$${A}"},
		{in: "$$${A}", want: "$1"},
		{in: "€${A}€", want: "€1€"},
		{in: "${U}", want: "", problems: []string{"environment variable U is not set (referenced as ${U})"}},
		{in: "${U}${U}${V}", want: "", problems: []string{
			"environment variable U is not set (referenced as ${U})",
			"environment variable V is not set (referenced as ${V})",
		}},
		{in: "$A", want: "$A", problems: []string{"a $ must start ${NAME} or be doubled ($$) for a literal $"}},
		{in: "a$", want: "a$", problems: []string{"a $ must start ${NAME} or be doubled ($$) for a literal $"}},
		{in: "${}", want: "", problems: []string{"${} is not a variable reference: a name is letters, digits and _, not starting with a digit"}},
		{in: "${1A}", want: "", problems: []string{"${1A} is not a variable reference: a name is letters, digits and _, not starting with a digit"}},
		{in: "x${A", want: "x", problems: []string{"a ${ without its closing }: write ${NAME}, or $$ for a literal $"}},
	}
	for _, tt := range tests {
		got, problems := expand(tt.in, lookup)
		if got != tt.want || !reflect.DeepEqual(problems, tt.problems) {
			t.Errorf("expand(%q) = %q, %q; want %q, %q", tt.in, got, problems, tt.want, tt.problems)
		}
	}
}

func TestEnviron(t *testing.T) {
	gateway := envOf(map[string]string{
		"PATH":             "/usr/bin",
		"HOME":             "/home/gw",
		"EMPTY":            "",
		"OPENAI_API_KEY":   "gateway-secret", // never passed unless named
		"AWS_SECRET":       "also-secret",
		"GEMINI_API_KEY":   "from-gateway",
		"UNRELATED_SHELLS": "bash",
	})
	tests := []struct {
		name   string
		agent  Agent
		lookup func(string) (string, bool)
		want   []string
	}{
		{
			name:   "only named pass-through variables that are set, plus explicit values, sorted",
			agent:  Agent{InheritEnv: []string{"PATH", "HOME", "NOT_SET", "EMPTY"}, Env: map[string]string{"Z": "last", "A": "first"}},
			lookup: gateway,
			want:   []string{"A=first", "EMPTY=", "HOME=/home/gw", "PATH=/usr/bin", "Z=last"},
		},
		{
			name:   "an explicit value wins over an inherited one",
			agent:  Agent{InheritEnv: []string{"GEMINI_API_KEY", "PATH"}, Env: map[string]string{"GEMINI_API_KEY": "from-config"}},
			lookup: gateway,
			want:   []string{"GEMINI_API_KEY=from-config", "PATH=/usr/bin"},
		},
		{
			name:   "nothing named, nothing passed: the result is empty, not nil",
			agent:  Agent{},
			lookup: gateway,
			want:   []string{},
		},
		{
			name:   "a nil lookup inherits nothing",
			agent:  Agent{InheritEnv: []string{"PATH"}, Env: map[string]string{"X": "1"}},
			lookup: nil,
			want:   []string{"X=1"},
		},
		{
			name:   "sorted by name, not by the whole string",
			agent:  Agent{Env: map[string]string{"A_B": "1", "A": "2", "A-": "3"}},
			lookup: gateway,
			want:   []string{"A=2", "A-=3", "A_B=1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.agent.Environ(tt.lookup)
			if got == nil {
				t.Fatal("Environ returned nil: an exec.Cmd would inherit the whole environment")
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Environ = %q, want %q", got, tt.want)
			}
			for _, kv := range got {
				if strings.Contains(kv, "secret") {
					t.Errorf("Environ leaked a variable that was not named: %q", kv)
				}
			}
		})
	}
}

func TestDefault(t *testing.T) {
	got := Default("/usr/local/bin/acpgate")
	want := &Config{
		Listen: "127.0.0.1:7070",
		Agents: []Agent{{
			Name:              "demo",
			Description:       "built-in demo agent",
			Command:           "/usr/local/bin/acpgate",
			Args:              []string{"demo-agent"},
			InheritEnv:        []string{"PATH", "HOME"},
			PermissionPolicy:  PolicyReject,
			PermissionTimeout: 5 * time.Minute, Elicitation: ElicitDecline, ElicitationTimeout: DefaultPermissionTimeout,
			FS:          FS{Read: true, Write: false},
			TurnTimeout: 30 * time.Minute,
			IdleTimeout: 30 * time.Minute,
			CancelGrace: 10 * time.Second, WarmMaxAge: DefaultWarmMaxAge, Nice: DefaultNice, SuspendedRetention: DefaultSuspendedRetention, MaxSessionsPerProcess: DefaultMaxSessionsPerProcess,
			HandshakeTimeout: 60 * time.Second,
		}},
		Limits:        Limits{MaxSessions: 256, MaxWarm: DefaultMaxWarm, MaxStartingAgents: DefaultMaxStartingAgents(), MaxSuspended: DefaultMaxSuspended, MaxPromptBytes: 1 << 20, MaxFrameBytes: 16 << 20, MaxAgentRequests: DefaultMaxAgentRequests, MaxAgentReplyBytes: DefaultMaxAgentReplyBytes, MaxStreamsPerConnection: DefaultMaxStreamsPerConnection, MaxConnections: DefaultMaxConnections, MaxWatchersPerTurn: DefaultMaxWatchersPerTurn, MaxWatchersPerPrincipal: DefaultMaxWatchersPerPrincipal, MaxHeaderBytes: DefaultMaxHeaderBytes, MaxTurnBytes: DefaultMaxTurnBytes, MaxAnswerBytes: 512 << 20},
		ShutdownGrace: 10 * time.Second,
		Postgres:      defaultPostgres, Store: StoreSQLite, HeartbeatInterval: DefaultHeartbeatInterval, TurnRetention: DefaultTurnRetention, SuspendedRetention: DefaultSuspendedRetention, Audit: Audit{Enabled: true}, Tracing: Tracing{SamplingRatio: DefaultSamplingRatio}, Cluster: Cluster{LeaseTTL: DefaultLeaseTTL},
		TLS: TLS{ClientAuth: ClientAuthNone}, Auth: Auth{Mode: AuthNone, Public: []string{PublicHealth, PublicReflection}},
		HandshakeTimeout:   DefaultHandshakeTimeout,
		RequestReadTimeout: DefaultRequestReadTimeout,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Default:\n got %+v\nwant %+v", got, want)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("Default is not valid: %v", err)
	}
	env := got.Agents[0].Environ(envOf(map[string]string{"PATH": "/bin", "HOME": "/h", "SECRET": "x"}))
	if want := []string{"HOME=/h", "PATH=/bin"}; !reflect.DeepEqual(env, want) {
		t.Errorf("demo agent Environ = %q, want %q", env, want)
	}
	// Each call builds a new value: changing one does not change the next.
	got.Agents[0].Args[0] = "changed"
	if Default("x").Agents[0].Args[0] != "demo-agent" {
		t.Error("Default shares state between calls")
	}
}

func TestValidate(t *testing.T) {
	c := Default("")
	c.Agents = append(c.Agents, c.Agents[0])
	c.Agents[1].PermissionPolicy = ""
	c.Limits.MaxSessions = 0
	got := problems(t, c.Validate())
	want := []string{
		`agent "demo": command is required`,
		`agent "demo": command is required`,
		`agent "demo": permission_policy "" must be one of reject, allow or ask`,
		`agent "demo": duplicate name, first used by agents[0]`,
		`limits.max_sessions: must be positive, got 0`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Validate:\n got %q\nwant %q", got, want)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "acpgate.yaml")
	if err := os.WriteFile(path, []byte(fullExample), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path, envOf(map[string]string{"GEMINI_API_KEY": "k"}))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if cfg.Agents[0].Env["GEMINI_API_KEY"] != "k" {
		t.Errorf("Load did not expand the environment: %+v", cfg.Agents[0].Env)
	}

	// Errors name the file; a nil lookup sets no variable.
	_, err = Load(path, nil)
	want := []string{path + `:7: agent "gemini": env GEMINI_API_KEY: environment variable GEMINI_API_KEY is not set (referenced as ${GEMINI_API_KEY})`}
	if got := problems(t, err); !reflect.DeepEqual(got, want) {
		t.Errorf("Load with nil lookup: %q, want %q", got, want)
	}

	_, err = Load(filepath.Join(dir, "missing.yaml"), nil)
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of a missing file = %v, want an error wrapping os.ErrNotExist", err)
	}
}

func TestErrorFormat(t *testing.T) {
	tests := []struct {
		err  Error
		want string
	}{
		{Error{Source: "c.yaml", Line: 3, Msg: "m"}, "c.yaml:3: m"},
		{Error{Source: "c.yaml", Msg: "m"}, "c.yaml: m"},
		{Error{Line: 3, Msg: "m"}, "line 3: m"},
		{Error{Msg: "m"}, "m"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("%+v.Error() = %q, want %q", tt.err, got, tt.want)
		}
	}
}

func TestValidAgentName(t *testing.T) {
	for name, want := range map[string]bool{
		"a": true, "0": true, "gemini": true, "codex-acp": true, "claude.code_acp-2": true,
		strings.Repeat("a", 63): true,
		"":                      false, strings.Repeat("a", 64): false, "-a": false, ".a": false, "_a": false,
		"Gemini": false, "a b": false, "a/b": false, "é": false,
	} {
		if got := validAgentName(name); got != want {
			t.Errorf("validAgentName(%q) = %v, want %v", name, got, want)
		}
	}
}
