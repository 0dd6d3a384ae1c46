// Package config reads and checks acpgate's configuration: where the gateway
// listens, which ACP agent programs it may run, and the limits it enforces.
//
// The file is YAML:
//
//	listen: 127.0.0.1:7070
//	agents:
//	  - name: gemini
//	    description: Gemini CLI
//	    command: gemini
//	    args: [--acp]
//	    env: {GEMINI_API_KEY: "${GEMINI_API_KEY}"}
//	    inherit_env: [PATH, HOME]
//	    auth_method: gemini-api-key
//	    workspace: /srv/acpgate/gemini
//	    permission_policy: reject
//	    permission_timeout: 5m
//	    elicitation: decline
//	    elicitation_timeout: 5m
//	    fs: {read: true, write: false}
//	    sandbox: {enabled: true, required: false, rw: [/srv/cache], ro: [/srv/models]}
//	    strict_framing: false
//	    turn_timeout: 10m
//	    idle_timeout: 30m
//	    cancel_grace: 10s
//	    handshake_timeout: 2m
//	    max_sessions: 8
//	    warm: 2            # processes kept started and authenticated, no session
//	    warm_max_age: 30m  # a warm process older than this is replaced
//	    mcp_servers:
//	      - name: files
//	        command: /usr/bin/mcp-files
//	        args: [--root, /srv]
//	        env: {A: b}
//	    mcp_offered:       # stdio servers passed only when a caller names them
//	      - {name: search, command: /usr/bin/mcp-search}
//	mcp:                   # what callers may name in CreateSession.mcp_servers
//	  allowed_url_prefixes: [https://mcp.example.com/]
//	  offered: [{name: tickets, command: /usr/bin/mcp-tickets}]
//	limits: {max_sessions: 256, max_warm: 16, max_prompt_bytes: 1048576, max_frame_bytes: 16777216,
//	         max_agent_requests: 16, max_streams_per_connection: 100, max_connections: 4096,
//	         max_header_bytes: 65536, max_watchers_per_turn: 64, max_watchers_per_principal: 256}
//	shutdown_grace: 10s
//	handshake_timeout: 60s
//	request_read_timeout: 30s
//	tls: {cert_file: /etc/acpgate/tls.crt, key_file: /etc/acpgate/tls.key,
//	      client_ca_file: /etc/acpgate/ca.crt, client_auth: require}
//	auth: {mode: jwt, jwks_file: /etc/acpgate/jwks.json, issuer: https://issuer.example,
//	       audience: acpgate, algorithms: [ES256], claims: [groups], public: [health, reflection]}
//	insecure: false
//	metrics: {listen: 127.0.0.1:9090}
//
// # Transport security and callers
//
// tls serves the listener over TLS from cert_file and key_file;
// client_ca_file and client_auth (none, request, require; require by
// default when client_ca_file is set) ask for client certificates. The
// files are reloaded when they change (see internal/tlsreload).
//
// auth.mode names how a caller is identified: none; mtls, by the verified
// client certificate's SPIFFE ID, else its subject CN (needs
// client_ca_file); jwt, by the sub of a bearer token verified against
// jwks_file, with issuer, audience and exp checked and alg in algorithms
// (RS256 and ES256 by default; public-key algorithms only). claims are kept
// as the caller's attributes. The services in public (health, reflection:
// both by default) need no credentials. The jwt keys are an error under
// another mode.
//
// Every file named by tls and auth must be readable at start: a path that
// is not is an error naming it. A listen address beyond loopback without
// tls or an auth mode is refused by serve (Config.ExposureProblem) unless
// insecure is true, for a mesh whose sidecar terminates mTLS.
//
// # Quotas and audit
//
// quotas bound what each caller (the auth principal; the anonymous caller
// is principal "") may use: quotas.default applies to every principal not
// named under quotas.principals, whose entry replaces the default whole.
// Each quota has concurrent_turns (turns running at once), open_sessions
// (sessions open or opening, one-shot sessions included) and
// turns_per_minute (a token bucket holding a minute's worth of turns); 0,
// the default, means no limit, and a negative value is an error.
//
// audit.enabled (default true) logs one record per RPC (msg "audit") with
// the principal, the RPC, the agent, session and turn, the status code, a
// Prompt's or WatchTurn's terminal class, and the duration. Prompt text is
// never logged unless audit.include_text is true.
//
// metrics.listen, when set, serves Prometheus metrics at /metrics over
// plain HTTP on that address (no TLS, no authentication: keep it on
// loopback or a private network); empty, the default, serves none.
//
// # Decoding is strict
//
// A key the gateway does not know is an error naming the key and its line
// (config.yaml:7: unknown key "comand" in agent "gemini"), and so is a key
// given twice, a value of the wrong shape, or a duration that is not a Go
// duration string (10m, 90s, 1h30m). A misspelt setting is never silently
// ignored in favour of its default. An empty value (key:) or null means the
// key was not given. Anchors and aliases are followed; merge keys (<<) are
// not supported.
//
// # Environment references
//
// ${NAME} in an agent's command, args, workspace and env values, and in an
// MCP server's command, args and env values, is replaced by the gateway's
// environment variable NAME when the configuration is read. A variable that
// is not set is an error naming it, so a missing credential stops the gateway
// at start-up rather than failing the first prompt. $$ is a literal $; any
// other $ is an error, so that a shell-style $NAME is never passed through
// unexpanded by mistake. A variable set to the empty string expands to "".
//
// Inside a flow collection ({...} or [...]) YAML reads the braces of an
// unquoted ${VAR} as structure, so there the value must be quoted:
// env: {KEY: "${KEY}"}. In block style (KEY: ${KEY} on its own line) no
// quotes are needed.
//
// # The agent's environment
//
// An agent process never inherits the gateway's environment wholesale: it
// gets the variables named in inherit_env that are set, then the explicit env
// values, and nothing else (see Agent.Environ).
//
// # The sandbox
//
// sandbox.enabled confines the agent with the kernel's Landlock (package
// sandbox): it and everything it starts may read and write only the
// session's directory and sandbox.rw, and read only the system's program,
// library and configuration files, its own command's directory and
// sandbox.ro. rw and ro paths must be absolute. sandbox.required refuses
// to start the agent on a kernel without Landlock (the turn ends with a
// transport SPAWN_FAILED naming why) instead of running it unconfined with
// a warning. required, rw and ro without enabled are an error: a
// confinement meant is never silently not applied.
//
// # Every problem at once
//
// Parse reports every problem it finds, joined with errors.Join, each an
// *Error naming the file, the line and the setting, so one run of the gateway
// shows everything that needs fixing.
//
// The package holds no mutable state; reading the environment is done only
// through the lookup function the caller passes.
package config
