package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/acpgate/acpgate/internal/spelling"
)

// parseYAML parses data into its root node, or nil for an empty document.
// A syntax error, or more than one document, is an *Error.
func parseYAML(data []byte, source string) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, syntaxError(source, data, err)
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, syntaxError(source, data, err)
	default:
		return nil, &Error{Source: source, Line: extra.Line, Msg: "a second YAML document: the configuration must be a single document"}
	}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		return doc.Content[0], nil
	}
	return nil, nil
}

// syntaxError turns a yaml.v3 error ("yaml: line 3: did not find expected
// key") into an *Error located at that line.
func syntaxError(source string, data []byte, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, tail, ok := strings.Cut(rest, ": "); ok {
			if n, convErr := strconv.Atoi(num); convErr == nil {
				line, msg = n, tail
			}
		}
	}
	return &Error{Source: source, Line: line, Msg: "invalid YAML: " + msg + flowHint(data, line)}
}

// flowHint explains the likeliest cause of a syntax error near line: an
// unquoted ${VAR} inside a flow collection ({A: ${B}} or [${B}]), where YAML
// reads the braces as structure. yaml.v3 reports some parser errors one line
// early, so the line after is looked at too.
func flowHint(data []byte, line int) string {
	if line <= 0 {
		return ""
	}
	lines := strings.Split(string(data), "\n")
	for l := line; l <= line+1 && l <= len(lines); l++ {
		text := lines[l-1]
		ref := strings.Index(text, "${")
		if ref < 0 {
			continue
		}
		if open := strings.IndexAny(text, "{["); open >= 0 && open < ref {
			return fmt.Sprintf(" (line %d: inside [...] or {...}, quote a value that uses ${...}, as in \"${VAR}\")", l)
		}
	}
	return ""
}

// field names one setting: path is its stable key in decoder.lines and
// decoder.bad ("agents[0].turn_timeout"); label is how messages name it
// (`agent "gemini": turn_timeout`).
type field struct {
	path  string
	label string
}

// child is the field for key inside f.
func (f field) child(key string) field {
	return field{path: f.path + "." + key, label: f.label + "." + key}
}

// decoder walks the YAML node tree into a Config, collecting every problem
// rather than stopping at the first.
type decoder struct {
	source string
	lookup func(string) (string, bool)
	errs   []error
	// lines maps a field path to the line its value is on, for validation
	// messages.
	lines map[string]int
	// bad holds the paths whose values could not be decoded, so validation
	// does not report them a second time (as missing, say).
	bad map[string]bool
	// known, when not nil, collects the path of every key the decoder
	// accepts in each mapping it visits (list indexes as "[]"), so a test
	// can hold the documentation to the decoder: the decoder is the one
	// place the keys are defined.
	known map[string]bool
}

func newDecoder(source string, lookup func(string) (string, bool)) *decoder {
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	return &decoder{source: source, lookup: lookup, lines: map[string]int{}, bad: map[string]bool{}}
}

// fail records a problem at n's line and marks path (when not "") as bad.
func (d *decoder) fail(n *yaml.Node, path string, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	if path != "" {
		d.bad[path] = true
	}
	d.errs = append(d.errs, &Error{Source: d.source, Line: line, Msg: fmt.Sprintf(format, args...)})
}

// config decodes the top-level mapping into c, which holds the defaults.
func (d *decoder) config(root *yaml.Node, c *Config) {
	top := field{label: "configuration"}
	d.fields(root, top, "at top level", map[string]func(*yaml.Node){
		"listen": func(v *yaml.Node) {
			if s, ok := d.scalar(v, field{"listen", "listen"}); ok {
				c.Listen = s
			}
		},
		"agents": func(v *yaml.Node) { c.Agents = d.agents(v) },
		"limits": func(v *yaml.Node) {
			f := field{"limits", "limits"}
			d.fields(v, f, "in limits", map[string]func(*yaml.Node){
				"max_sessions":        d.intInto(&c.Limits.MaxSessions, f.child("max_sessions")),
				"max_warm":            d.intInto(&c.Limits.MaxWarm, f.child("max_warm")),
				"max_starting_agents": d.intInto(&c.Limits.MaxStartingAgents, f.child("max_starting_agents")),
				"max_suspended":       d.intInto(&c.Limits.MaxSuspended, f.child("max_suspended")),
				"max_prompt_bytes":    d.intInto(&c.Limits.MaxPromptBytes, f.child("max_prompt_bytes")),
				"max_frame_bytes":     d.intInto(&c.Limits.MaxFrameBytes, f.child("max_frame_bytes")),

				"max_agent_requests":         d.intInto(&c.Limits.MaxAgentRequests, f.child("max_agent_requests")),
				"max_agent_reply_bytes":      d.int64Into(&c.Limits.MaxAgentReplyBytes, f.child("max_agent_reply_bytes")),
				"max_streams_per_connection": d.intInto(&c.Limits.MaxStreamsPerConnection, f.child("max_streams_per_connection")),
				"max_connections":            d.intInto(&c.Limits.MaxConnections, f.child("max_connections")),
				"max_watchers_per_turn":      d.intInto(&c.Limits.MaxWatchersPerTurn, f.child("max_watchers_per_turn")),
				"max_watchers_per_principal": d.intInto(&c.Limits.MaxWatchersPerPrincipal, f.child("max_watchers_per_principal")),
				"max_header_bytes":           d.intInto(&c.Limits.MaxHeaderBytes, f.child("max_header_bytes")),
				"max_turn_bytes":             d.int64Into(&c.Limits.MaxTurnBytes, f.child("max_turn_bytes")),
				"max_answer_bytes":           d.int64Into(&c.Limits.MaxAnswerBytes, f.child("max_answer_bytes")),
			})
		},
		"shutdown_grace":       d.durationInto(&c.ShutdownGrace, field{"shutdown_grace", "shutdown_grace"}),
		"handshake_timeout":    d.durationInto(&c.HandshakeTimeout, field{"handshake_timeout", "handshake_timeout"}),
		"request_read_timeout": d.durationInto(&c.RequestReadTimeout, field{"request_read_timeout", "request_read_timeout"}),
		"heartbeat_interval":   d.durationInto(&c.HeartbeatInterval, field{"heartbeat_interval", "heartbeat_interval"}),
		"turn_retention":       d.durationInto(&c.TurnRetention, field{"turn_retention", "turn_retention"}),
		"suspended_retention":  d.durationInto(&c.SuspendedRetention, field{"suspended_retention", "suspended_retention"}),
		"state_dir":            d.stringInto(&c.StateDir, field{"state_dir", "state_dir"}, true),
		"tls":                  func(v *yaml.Node) { d.tls(v, &c.TLS) },
		"auth":                 func(v *yaml.Node) { d.auth(v, &c.Auth) },
		"insecure":             d.boolInto(&c.Insecure, field{"insecure", "insecure"}),
		"quotas":               func(v *yaml.Node) { d.quotas(v, &c.Quotas) },
		"audit":                func(v *yaml.Node) { d.audit(v, &c.Audit) },
		"metrics": func(v *yaml.Node) {
			f := field{"metrics", "metrics"}
			d.fields(v, f, "in metrics", map[string]func(*yaml.Node){
				"listen": d.stringInto(&c.Metrics.Listen, f.child("listen"), false),
			})
		},
		"tracing": func(v *yaml.Node) { d.tracing(v, &c.Tracing) },
		"cluster": func(v *yaml.Node) { d.cluster(v, &c.Cluster) },
		"admin": func(v *yaml.Node) {
			f := field{"admin", "admin"}
			d.fields(v, f, "in admin", map[string]func(*yaml.Node){
				"listen":       d.stringInto(&c.Admin.Listen, f.child("listen"), false),
				"allow_remote": d.boolInto(&c.Admin.AllowRemote, f.child("allow_remote")),
			})
		},
		"mcp": func(v *yaml.Node) {
			f := field{"mcp", "mcp"}
			d.fields(v, f, "in mcp", map[string]func(*yaml.Node){
				"allowed_url_prefixes": d.listInto(&c.MCP.AllowedURLPrefixes, f.child("allowed_url_prefixes"), false),
				"offered": func(v *yaml.Node) {
					c.MCP.Offered = d.mcpServers(v, f.child("offered"), "mcp")
				},
			})
		},
		"webhooks": func(v *yaml.Node) { d.webhooks(v, &c.Webhooks) },
		"postgres": func(v *yaml.Node) {
			f := field{"postgres", "postgres"}
			d.fields(v, f, "in postgres", map[string]func(*yaml.Node){
				"dsn":               d.stringInto(&c.Postgres.DSN, f.child("dsn"), true),
				"max_conns":         d.intInto(&c.Postgres.MaxConns, f.child("max_conns")),
				"statement_timeout": d.durationInto(&c.Postgres.StatementTimeout, f.child("statement_timeout")),
			})
		},
		"store": func(v *yaml.Node) {
			if s, ok := d.scalar(v, field{"store", "store"}); ok {
				c.Store = StoreKind(s)
			}
		},
	})
}

// agents decodes the agents sequence.
func (d *decoder) agents(n *yaml.Node) []Agent {
	d.lines["agents"] = n.Line
	r := resolve(n)
	if isNull(r) {
		return nil
	}
	if r.Kind != yaml.SequenceNode {
		d.fail(n, "agents", "agents: expected a list of agents, got %s", describe(r))
		return nil
	}
	agents := make([]Agent, 0, len(r.Content))
	for i, item := range r.Content {
		agents = append(agents, d.agent(item, i))
	}
	return agents
}

// agentLabel names the agent at index i in messages: by its name when it
// has one, else by its position.
func agentLabel(name string, i int) string {
	if name != "" {
		return fmt.Sprintf("agent %q", name)
	}
	return fmt.Sprintf("agents[%d]", i)
}

// agent decodes the agent at index i.
func (d *decoder) agent(n *yaml.Node, i int) Agent {
	a := defaultAgent()
	path := fmt.Sprintf("agents[%d]", i)
	d.lines[path] = n.Line
	r := resolve(n)
	if r.Kind != yaml.MappingNode {
		d.fail(n, path, "%s: expected a mapping describing an agent, got %s", path, describe(r))
		return a
	}
	label := agentLabel(peekName(r), i)
	f := func(key string) field { return field{path + "." + key, label + ": " + key} }
	d.fields(r, field{path, label}, "in "+label, map[string]func(*yaml.Node){
		"name":        d.stringInto(&a.Name, f("name"), false),
		"description": d.stringInto(&a.Description, f("description"), false),
		"command":     d.stringInto(&a.Command, f("command"), true),
		"args":        d.listInto(&a.Args, f("args"), true),
		"env":         d.envInto(&a.Env, f("env"), "in env of "+label),
		"inherit_env": d.listInto(&a.InheritEnv, f("inherit_env"), false),
		"auth_method": d.stringInto(&a.AuthMethod, f("auth_method"), false),
		"workspace":   d.stringInto(&a.Workspace, f("workspace"), true),
		"notify_url":  d.stringInto(&a.NotifyURL, f("notify_url"), true),
		"permission_policy": func(v *yaml.Node) {
			if s, ok := d.scalar(v, f("permission_policy")); ok {
				a.PermissionPolicy = Policy(s)
			}
		},
		"permission_timeout": d.durationInto(&a.PermissionTimeout, f("permission_timeout")),
		"elicitation": func(v *yaml.Node) {
			if s, ok := d.scalar(v, f("elicitation")); ok {
				a.Elicitation = ElicitationMode(s)
			}
		},
		"elicitation_timeout": d.durationInto(&a.ElicitationTimeout, f("elicitation_timeout")),
		"fs": func(v *yaml.Node) {
			fs := f("fs")
			d.fields(v, fs, "in fs of "+label, map[string]func(*yaml.Node){
				"read":  d.boolInto(&a.FS.Read, fs.child("read")),
				"write": d.boolInto(&a.FS.Write, fs.child("write")),
			})
		},
		"sandbox": func(v *yaml.Node) {
			sb := f("sandbox")
			d.fields(v, sb, "in sandbox of "+label, map[string]func(*yaml.Node){
				"enabled":  d.boolInto(&a.Sandbox.Enabled, sb.child("enabled")),
				"required": d.boolInto(&a.Sandbox.Required, sb.child("required")),
				"rw":       d.listInto(&a.Sandbox.RW, sb.child("rw"), true),
				"ro":       d.listInto(&a.Sandbox.RO, sb.child("ro"), true),
			})
		},
		"strict_framing":           d.boolInto(&a.StrictFraming, f("strict_framing")),
		"turn_timeout":             d.durationInto(&a.TurnTimeout, f("turn_timeout")),
		"idle_timeout":             d.durationInto(&a.IdleTimeout, f("idle_timeout")),
		"cancel_grace":             d.durationInto(&a.CancelGrace, f("cancel_grace")),
		"handshake_timeout":        d.durationInto(&a.HandshakeTimeout, f("handshake_timeout")),
		"nice":                     d.intInto(&a.Nice, f("nice")),
		"max_sessions":             d.intInto(&a.MaxSessions, f("max_sessions")),
		"warm":                     d.intInto(&a.Warm, f("warm")),
		"warm_max_age":             d.durationInto(&a.WarmMaxAge, f("warm_max_age")),
		"suspended_retention":      d.durationInto(&a.SuspendedRetention, f("suspended_retention")),
		"reuse_process":            d.boolInto(&a.ReuseProcess, f("reuse_process")),
		"max_sessions_per_process": d.intInto(&a.MaxSessionsPerProcess, f("max_sessions_per_process")),
		"allow":                    d.listInto(&a.Allow, f("allow"), false),
		"mcp_servers": func(v *yaml.Node) {
			a.MCPServers = d.mcpServers(v, f("mcp_servers"), label)
		},
		"mcp_offered": func(v *yaml.Node) {
			a.MCPOffered = d.mcpServers(v, f("mcp_offered"), label)
		},
	})
	return a
}

// mcpServers decodes a sequence of stdio MCP servers (an agent's
// mcp_servers or mcp_offered, or mcp.offered); owner names what holds it.
func (d *decoder) mcpServers(n *yaml.Node, f field, owner string) []MCPServer {
	d.lines[f.path] = n.Line
	r := resolve(n)
	if isNull(r) {
		return nil
	}
	if r.Kind != yaml.SequenceNode {
		d.fail(n, f.path, "%s: expected a list of MCP servers, got %s", f.label, describe(r))
		return nil
	}
	servers := make([]MCPServer, 0, len(r.Content))
	for i, item := range r.Content {
		var s MCPServer
		path := fmt.Sprintf("%s[%d]", f.path, i)
		d.lines[path] = item.Line
		m := resolve(item)
		if m.Kind != yaml.MappingNode {
			d.fail(item, path, "%s[%d]: expected a mapping describing an MCP server, got %s", f.label, i, describe(m))
			servers = append(servers, s)
			continue
		}
		label := mcpLabel(owner, listName(f.path), peekName(m), i)
		sf := func(key string) field { return field{path + "." + key, label + ": " + key} }
		d.fields(m, field{path, label}, "in "+label, map[string]func(*yaml.Node){
			"name":    d.stringInto(&s.Name, sf("name"), false),
			"command": d.stringInto(&s.Command, sf("command"), true),
			"args":    d.listInto(&s.Args, sf("args"), true),
			"env":     d.envInto(&s.Env, sf("env"), "in env of "+label),
		})
		servers = append(servers, s)
	}
	return servers
}

// mcpLabel names an MCP server of the list (mcp_servers, mcp_offered,
// offered) that owner holds in messages.
func mcpLabel(owner, list, name string, i int) string {
	if name != "" {
		return fmt.Sprintf("%s, mcp server %q", owner, name)
	}
	return fmt.Sprintf("%s, %s[%d]", owner, list, i)
}

// listName is the last key of a field path: "mcp_offered" of
// "agents[0].mcp_offered".
func listName(path string) string {
	return path[strings.LastIndex(path, ".")+1:]
}

// peekName returns the scalar value of a mapping's name key, or "", so that
// messages about the mapping's other keys can name it whatever their order.
func peekName(m *yaml.Node) string {
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := resolve(m.Content[i]), resolve(m.Content[i+1])
		if k.Kind == yaml.ScalarNode && k.Value == "name" && v.Kind == yaml.ScalarNode && !isNull(v) {
			return v.Value
		}
	}
	return ""
}

// pairs calls fn for each key of the mapping n, reporting a value that is not
// a mapping, keys that are not plain scalars, merge keys and repeated keys.
// A null n is an empty mapping. where names the mapping in messages about
// its keys ("in agent \"gemini\"").
func (d *decoder) pairs(n *yaml.Node, f field, where string, fn func(key string, k, v *yaml.Node)) {
	if n == nil {
		return
	}
	if f.path != "" {
		d.lines[f.path] = n.Line
	}
	r := resolve(n)
	if isNull(r) {
		return
	}
	if r.Kind != yaml.MappingNode {
		d.fail(n, f.path, "%s: expected a mapping, got %s", f.label, describe(r))
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(r.Content); i += 2 {
		k, v := resolve(r.Content[i]), r.Content[i+1]
		switch {
		case k.Kind != yaml.ScalarNode:
			d.fail(r.Content[i], "", "a key %s is %s, not a plain name", where, describe(k))
			continue
		case k.ShortTag() == "!!merge":
			d.fail(r.Content[i], "", "merge keys (<<) are not supported (%s)", strings.TrimPrefix(where, "in "))
			continue
		}
		if first, dup := seen[k.Value]; dup {
			d.fail(r.Content[i], "", "duplicate key %q %s (first at line %d)", k.Value, where, first)
			continue
		}
		seen[k.Value] = r.Content[i].Line
		fn(k.Value, r.Content[i], v)
	}
}

// fields decodes a mapping whose keys are known settings, handing each value
// to its handler. A key without a handler is an error naming it and its line.
func (d *decoder) fields(n *yaml.Node, f field, where string, handlers map[string]func(*yaml.Node)) {
	if d.known != nil && n != nil && resolve(n).Kind == yaml.MappingNode {
		for key := range handlers {
			d.known[keyPath(f.path, key)] = true
		}
	}
	d.pairs(n, f, where, func(key string, k, v *yaml.Node) {
		h, ok := handlers[key]
		if !ok {
			d.fail(k, "", "unknown key %q %s%s", key, where, suggest(key, handlers))
			return
		}
		h(v)
	})
}

// keyPath is the documented form of key inside the mapping at path: list
// indexes become "[]" ("agents[0].fs" → "agents[].fs.read").
func keyPath(path, key string) string {
	p := listIndex.ReplaceAllString(path, "[]")
	p = strings.TrimPrefix(p, ".")
	if p == "" {
		return key
	}
	return p + "." + key
}

var listIndex = regexp.MustCompile(`\[\d+\]`)

// suggest returns ` (did you mean "x"?)` for the known key closest to an
// unknown one, when one is close enough to be a likely misspelling.
func suggest(key string, handlers map[string]func(*yaml.Node)) string {
	known := make([]string, 0, len(handlers))
	for k := range handlers {
		known = append(known, k)
	}
	slices.Sort(known)
	near := spelling.Nearest(key, known)
	if len(near) == 0 {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", near[0])
}

// scalar returns the value of a scalar node. ok is false, with nothing
// reported, for null (the key counts as not given), and false with an error
// for a list or mapping.
func (d *decoder) scalar(n *yaml.Node, f field) (string, bool) {
	d.lines[f.path] = n.Line
	r := resolve(n)
	if r.Kind != yaml.ScalarNode {
		d.fail(n, f.path, "%s: expected a single value, got %s", f.label, describe(r))
		return "", false
	}
	if isNull(r) {
		return "", false
	}
	return r.Value, true
}

// expanded is scalar with ${VAR} references expanded; each problem with a
// reference is reported.
func (d *decoder) expanded(n *yaml.Node, f field) (string, bool) {
	s, ok := d.scalar(n, f)
	if !ok {
		return "", false
	}
	out, problems := expand(s, d.lookup)
	for _, p := range problems {
		d.fail(n, f.path, "%s: %s", f.label, p)
	}
	return out, true
}

// stringInto returns a handler storing a string setting, with ${VAR}
// references expanded when expandVars is set.
func (d *decoder) stringInto(dst *string, f field, expandVars bool) func(*yaml.Node) {
	return func(n *yaml.Node) {
		get := d.scalar
		if expandVars {
			get = d.expanded
		}
		if s, ok := get(n, f); ok {
			*dst = s
		}
	}
}

// listInto returns a handler storing a list of strings. Each item must be a
// non-null scalar; an empty list is stored as nil.
func (d *decoder) listInto(dst *[]string, f field, expandVars bool) func(*yaml.Node) {
	return func(n *yaml.Node) {
		d.lines[f.path] = n.Line
		r := resolve(n)
		if isNull(r) {
			return
		}
		if r.Kind != yaml.SequenceNode {
			d.fail(n, f.path, "%s: expected a list, got %s", f.label, describe(r))
			return
		}
		var out []string
		for i, item := range r.Content {
			itemField := field{fmt.Sprintf("%s[%d]", f.path, i), fmt.Sprintf("%s[%d]", f.label, i)}
			if isNull(resolve(item)) {
				d.fail(item, itemField.path, "%s: expected a value, got null", itemField.label)
				continue
			}
			get := d.scalar
			if expandVars {
				get = d.expanded
			}
			if s, ok := get(item, itemField); ok {
				out = append(out, s)
			}
		}
		*dst = out
	}
}

// envInto returns a handler storing an environment mapping, NAME: value,
// with ${VAR} references in the values expanded. A null value is an error:
// write "" for an empty one. An empty mapping is stored as nil.
func (d *decoder) envInto(dst *map[string]string, f field, where string) func(*yaml.Node) {
	return func(n *yaml.Node) {
		var out map[string]string
		d.pairs(n, f, where, func(key string, _, v *yaml.Node) {
			vf := field{f.path + "." + key, f.label + " " + key}
			if isNull(resolve(v)) {
				d.lines[vf.path] = v.Line
				d.fail(v, vf.path, "%s: the value is null; write \"\" for an empty value", vf.label)
				return
			}
			if s, ok := d.expanded(v, vf); ok {
				if out == nil {
					out = map[string]string{}
				}
				out[key] = s
			}
		})
		if out != nil {
			*dst = out
		}
	}
}

// boolInto returns a handler storing a boolean setting: true or false.
func (d *decoder) boolInto(dst *bool, f field) func(*yaml.Node) {
	return func(n *yaml.Node) {
		s, ok := d.scalar(n, f)
		if !ok {
			return
		}
		b, err := strconv.ParseBool(s)
		if resolve(n).ShortTag() != "!!bool" || err != nil {
			d.fail(n, f.path, "%s: expected true or false, got %q", f.label, s)
			return
		}
		*dst = b
	}
}

// intInto returns a handler storing an integer setting.
// int64Into is intInto for byte counts that may pass 2 GiB.
func (d *decoder) int64Into(dst *int64, f field) func(*yaml.Node) {
	return func(n *yaml.Node) {
		var v int
		d.intInto(&v, f)(n)
		*dst = int64(v)
	}
}

func (d *decoder) intInto(dst *int, f field) func(*yaml.Node) {
	return func(n *yaml.Node) {
		s, ok := d.scalar(n, f)
		if !ok {
			return
		}
		var v int
		if resolve(n).ShortTag() != "!!int" || resolve(n).Decode(&v) != nil {
			d.fail(n, f.path, "%s: expected a whole number, got %q", f.label, s)
			return
		}
		*dst = v
	}
}

// durationInto returns a handler storing a duration written as a Go
// duration string.
func (d *decoder) durationInto(dst *time.Duration, f field) func(*yaml.Node) {
	return func(n *yaml.Node) {
		s, ok := d.scalar(n, f)
		if !ok {
			return
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			d.fail(n, f.path, "%s: invalid duration %q: write a Go duration such as 90s, 10m or 1h30m", f.label, s)
			return
		}
		*dst = v
	}
}

// resolve follows aliases to the node they refer to.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// isNull reports whether n is a YAML null (~, null, or an empty value).
func isNull(n *yaml.Node) bool {
	return n == nil || n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// describe names a node's shape for messages.
func describe(n *yaml.Node) string {
	switch {
	case isNull(n):
		return "null"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.ScalarNode:
		return fmt.Sprintf("the value %q", n.Value)
	default:
		return "something else"
	}
}
