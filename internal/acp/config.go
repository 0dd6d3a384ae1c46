package acp

import (
	"log/slog"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/acp/agentproc"
	"github.com/acpgate/acpgate/internal/acp/answer"
	"github.com/acpgate/acpgate/internal/acp/clientreq"
	"github.com/acpgate/acpgate/internal/acp/jsonrpc"
)

// Defaults for Config's durations.
const (
	DefaultCancelGrace       = 10 * time.Second
	DefaultStopGrace         = 2 * time.Second
	DefaultHandshakeTimeout  = 60 * time.Second
	DefaultPermissionTimeout = 5 * time.Minute
)

// DefaultMaxAgentRequests is Config.MaxAgentRequests when it is zero; see
// jsonrpc.DefaultMaxInFlightRequests for why 16.
const DefaultMaxAgentRequests = jsonrpc.DefaultMaxInFlightRequests

// DefaultMaxAgentReplyBytes is Config.MaxAgentReplyBytes when it is zero;
// see jsonrpc.DefaultMaxReplyBytes.
const DefaultMaxAgentReplyBytes = jsonrpc.DefaultMaxReplyBytes

// MinMaxAgentReplyBytes is the least Config.MaxAgentReplyBytes may be: a
// read of the largest file the gateway serves, with lines selected from
// it (the file and the selection, each reserved before it is allocated),
// must fit, or no wait could ever make room for it.
const MinMaxAgentReplyBytes = 2*clientreq.DefaultMaxReadBytes + 1<<10

// Config is how to run one agent and what it may do.
type Config struct {
	// Agent is the configured agent name, used in events and logs.
	Agent string
	// Process says how to start the agent; Open sets its Dir.
	Process agentproc.Spec
	// ClientVersion is reported in clientInfo at initialize.
	ClientVersion string
	// AuthMethod, when set, is passed to authenticate after initialize.
	AuthMethod string
	// FS says which fs/* requests the agent may make.
	FS clientreq.FSAccess
	// Permission says how session/request_permission is answered.
	Permission clientreq.PermissionPolicy
	// Elicitation says how elicitation/create is answered; the zero value
	// declines.
	Elicitation clientreq.ElicitationPolicy
	// MCPServers are passed to session/new and session/load.
	MCPServers []acpsdk.McpServer
	// StrictFraming makes non-JSON lines on stdout a protocol violation.
	StrictFraming bool
	// MaxFrameBytes bounds one line from the agent.
	MaxFrameBytes int
	// MaxAgentRequests bounds the agent's requests (permission, fs) served
	// at once; beyond it the gateway stops reading the agent until one is
	// answered. With FS.MaxReadBytes it bounds what answers waiting for an
	// agent that does not read can hold: their product.
	// DefaultMaxAgentRequests when zero.
	MaxAgentRequests int
	// MaxAgentReplyBytes bounds the bytes the answers to the agent's
	// requests hold, from before they are built until the agent has read
	// them; a request whose answer does not fit waits, then is answered
	// with an error (see jsonrpc's replies.go).
	// DefaultMaxAgentReplyBytes when zero.
	MaxAgentReplyBytes int64
	// CancelGrace is how long a cancelled turn waits for the agent's
	// answer before the agent is stopped. DefaultCancelGrace when zero.
	CancelGrace time.Duration
	// StopGrace is how long closing waits after closing stdin, and again
	// after SIGTERM, before escalating. DefaultStopGrace when zero.
	StopGrace time.Duration
	// HandshakeTimeout bounds Open: spawn, initialize, authenticate and
	// session/new or session/load together. DefaultHandshakeTimeout when
	// zero. Without it an agent that never answers initialize would hold
	// its caller until the caller's own deadline, which may be never.
	HandshakeTimeout time.Duration
	// PartialCap bounds PartialOutput.text; see outcome.Interpreter.
	PartialCap int
	// AnswerBudget bounds the answer text held for outcomes by the turns of
	// every session sharing it (a gateway's limits.max_answer_bytes); nil:
	// unbounded. A turn over it completes with its text omitted
	// (TEXT_OMISSION_ANSWER_LIMIT).
	AnswerBudget *answer.Budget
	// Logger receives diagnostics; slog.Default() when nil.
	Logger *slog.Logger
	// Tracer makes the spans of the agent's start-up, of the requests
	// sent to it and of those it sends; nil makes none.
	Tracer trace.Tracer
	// Propagator writes the current span's context into the _meta of
	// every request and notification sent to the agent (ACP reserves
	// traceparent, tracestate and baggage there), so that an agent that
	// traces continues the trace. Nil sends no _meta, as without tracing.
	Propagator propagation.TextMapPropagator
}

// OpenOptions choose the session to open.
type OpenOptions struct {
	// Cwd is the session's working directory: absolute and existing.
	Cwd string
	// LoadSessionID, when set, re-opens that session instead of opening a
	// new one, the way AgentInfo.ReopenMethod says.
	LoadSessionID string
	// Replay receives the history an agent replays during session/load;
	// nil drops it.
	Replay func(*acpgatev1.PromptEvent)
	// MCPServers are the caller's MCP servers for this session, sent
	// after Config.MCPServers. One over a transport the agent did not
	// advertise fails the open with capability_not_supported (see
	// mcp.go). Their headers may be secrets: they go to the agent only.
	MCPServers []acpsdk.McpServer
	// Started, when set, is called once the agent process has started:
	// it has answered initialize (and authenticate), and session/new or
	// session/load comes next. A caller that bounds start-ups at once
	// gives its slot back there, so that a long session/load, which
	// replays a session's history, does not hold it.
	Started func()
}

// withDefaults fills in Config's durations left zero.
func (cfg Config) withDefaults() Config {
	if cfg.CancelGrace <= 0 {
		cfg.CancelGrace = DefaultCancelGrace
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = DefaultStopGrace
	}
	if cfg.Permission.Timeout <= 0 {
		cfg.Permission.Timeout = DefaultPermissionTimeout
	}
	if cfg.Elicitation.Timeout <= 0 {
		cfg.Elicitation.Timeout = DefaultPermissionTimeout
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	return cfg
}
