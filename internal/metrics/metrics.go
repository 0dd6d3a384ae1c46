// Package metrics is acpgate's Prometheus instrumentation: the gateway's
// own metrics (turns, agents, sessions, streaming, usage, the journal),
// the gRPC server's, and the process and Go runtime collectors, all in one
// registry per gateway.
//
// Every metric of the gateway's own is named acpgate_* and labelled by
// agent (a configured name: a bounded set), never by session, turn or
// principal: those are unbounded.
//
// A nil *Metrics and a nil *Agent record nothing, so a gateway without
// metrics calls the same methods at the cost of a nil check. The per-chunk
// calls (Agent.Chunk) are a few atomic additions on children resolved once
// per turn: no lock, no allocation, no label lookup.
package metrics

import (
	"context"
	"net/http"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
)

// Label values of acpgate_turns_ended_total.
const (
	// ClassOutcome is the class of a completed turn.
	ClassOutcome = "outcome"
	// ReasonNone is the reason of a turn whose class says it all.
	ReasonNone = ""
)

// Limits are the configured limits, exported as gauges.
type Limits struct {
	// MaxSessions is limits.max_sessions.
	MaxSessions int
	// AgentMaxSessions is each agent's max_sessions, by agent (0: none).
	AgentMaxSessions map[string]int
	// MaxConnections is limits.max_connections.
	MaxConnections int
}

// Metrics is one gateway's registry and instruments.
type Metrics struct {
	reg     *prometheus.Registry
	grpc    *grpcprom.ServerMetrics
	cluster *Cluster
	// webhooks instruments turn-ending notifications (webhooks.go).
	webhooks *Webhooks

	turnsStarted     *prometheus.CounterVec
	turnsEnded       *prometheus.CounterVec
	turnDuration     *prometheus.HistogramVec
	firstChunk       *prometheus.HistogramVec
	agentStart       *prometheus.HistogramVec
	agentStartFailed *prometheus.CounterVec
	agentStartWait   *prometheus.HistogramVec
	sessionsOpen     *prometheus.GaugeVec
	turnsRunning     *prometheus.GaugeVec
	chunks           *prometheus.CounterVec
	chunkBytes       *prometheus.CounterVec
	tokens           *prometheus.CounterVec
	cost             *prometheus.CounterVec
	journalWrite     *prometheus.HistogramVec
	journalBytes     *prometheus.CounterVec
	warmReady        *prometheus.GaugeVec
	warmStarting     *prometheus.GaugeVec
	sessionStarts    *prometheus.CounterVec
	connections      prometheus.Gauge
}

// latencyBuckets span a millisecond to a minute; turnBuckets a tenth of a
// second to an hour.
var (
	latencyBuckets = prometheus.ExponentialBucketsRange(0.001, 60, 16)
	turnBuckets    = prometheus.ExponentialBucketsRange(0.1, 3600, 16)
)

// New builds a registry with every collector, the limits set.
func New(limits Limits) *Metrics {
	reg := prometheus.NewRegistry()
	agent := []string{"agent"}
	m := &Metrics{
		reg:  reg,
		grpc: grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram()),
		turnsStarted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "acpgate_turns_started_total", Help: "Turns started (admitted and journaled).",
		}, agent),
		turnsEnded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "acpgate_turns_ended_total", Help: "Turns ended, by class (outcome, or the HarnessError class) and reason (transport reason, harness stop kind, cancelled, auth_required).",
		}, []string{"agent", "class", "reason"}),
		turnDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "acpgate_turn_duration_seconds", Help: "Turn duration, from admission to terminal, by class.", Buckets: turnBuckets,
		}, []string{"agent", "class"}),
		firstChunk: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "acpgate_turn_first_chunk_seconds", Help: "Time from a turn's admission to its first agent message chunk.", Buckets: latencyBuckets,
		}, agent),
		agentStart: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "acpgate_agent_start_seconds", Help: "Agent start-up, from spawn through the ACP handshake, of the starts that succeeded.", Buckets: latencyBuckets,
		}, agent),
		agentStartWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "acpgate_agent_start_wait_seconds", Help: "Time a caller's agent start-up waited for one of limits.max_starting_agents before its spawn, of the start-ups that waited.", Buckets: latencyBuckets,
		}, agent),
		agentStartFailed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "acpgate_agent_start_failures_total", Help: "Agent start-ups that failed, by the HarnessError class (or cancelled).",
		}, []string{"agent", "class"}),
		sessionsOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "acpgate_sessions_open", Help: "Sessions open (agent started), one-shot turns' included.",
		}, agent),
		turnsRunning: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "acpgate_turns_running", Help: "Turns running.",
		}, agent),
		chunks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "acpgate_stream_events_total", Help: "Events a turn streamed (journaled), other than its started event and terminal.",
		}, agent),
		chunkBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "acpgate_stream_bytes_total", Help: "Encoded bytes of the events counted by acpgate_stream_events_total.",
		}, agent),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "acpgate_tokens_total", Help: "Tokens agents reported in completed turns' usage, by direction (input, output).",
		}, []string{"agent", "direction"}),
		cost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "acpgate_cost_total", Help: "Cost agents reported (usage_update), by currency: the increase of each session's cumulative cost.",
		}, []string{"agent", "currency"}),
		journalWrite: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "acpgate_journal_write_seconds", Help: "Latency of the turn journal's writes to the store.", Buckets: latencyBuckets,
		}, agent),
		journalBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "acpgate_journal_write_bytes_total", Help: "Bytes of events written to the turn store.",
		}, agent),
		warmReady: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "acpgate_agent_warm_ready", Help: "Warm agent processes ready to be taken: started, initialized and authenticated, with no session.",
		}, agent),
		warmStarting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "acpgate_agent_warm_starting", Help: "Warm agent processes being started.",
		}, agent),
		sessionStarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "acpgate_session_starts_total", Help: "Sessions whose agent started, by start: warm (a warm process was taken) or cold (the agent was spawned for the session).",
		}, []string{"agent", "start"}),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "acpgate_connections_open", Help: "Client connections open on the gRPC listener (accepted, not yet closed).",
		}),
	}
	sessionsLimit := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "acpgate_sessions_limit", Help: "limits.max_sessions: sessions open at once, all agents.",
	})
	sessionsLimit.Set(float64(limits.MaxSessions))
	agentLimit := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "acpgate_agent_sessions_limit", Help: "An agent's max_sessions, for agents that have one.",
	}, agent)
	for name, n := range limits.AgentMaxSessions {
		if n > 0 {
			agentLimit.WithLabelValues(name).Set(float64(n))
		}
	}
	connectionsLimit := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "acpgate_connections_limit", Help: "limits.max_connections: client connections open at once on the gRPC listener.",
	})
	connectionsLimit.Set(float64(limits.MaxConnections))
	reg.MustRegister(
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector(),
		m.grpc,
		m.turnsStarted, m.turnsEnded, m.turnDuration, m.firstChunk,
		m.agentStart, m.agentStartWait, m.agentStartFailed, m.sessionsOpen, m.turnsRunning,
		m.chunks, m.chunkBytes, m.tokens, m.cost, m.journalWrite, m.journalBytes,
		m.warmReady, m.warmStarting, m.sessionStarts,
		sessionsLimit, agentLimit, m.connections, connectionsLimit,
	)
	m.cluster = newCluster()
	reg.MustRegister(m.cluster.collectors()...)
	m.webhooks = newWebhooks()
	reg.MustRegister(m.webhooks.collectors()...)
	return m
}

// Handler serves the registry in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	// OpenMetrics, to a scraper that asks for it, is the format that
	// carries exemplars (the trace ids of gRPC latency observations).
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg, EnableOpenMetrics: true})
}

// Registry is the gateway's registry.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Interceptors prepends the gRPC server metrics' interceptors to the
// chains given (outermost, so that every call is counted, refused ones
// included); without metrics it returns them unchanged. exemplar, when
// not nil, gives the labels of the exemplar each observation carries (the
// call's trace id), read from the call's context.
func (m *Metrics) Interceptors(unary []grpc.UnaryServerInterceptor, stream []grpc.StreamServerInterceptor, exemplar func(context.Context) prometheus.Labels) ([]grpc.UnaryServerInterceptor, []grpc.StreamServerInterceptor) {
	if m == nil {
		return unary, stream
	}
	var opts []grpcprom.Option
	if exemplar != nil {
		opts = append(opts, grpcprom.WithExemplarFromContext(exemplar))
	}
	return append([]grpc.UnaryServerInterceptor{m.grpc.UnaryServerInterceptor(opts...)}, unary...),
		append([]grpc.StreamServerInterceptor{m.grpc.StreamServerInterceptor(opts...)}, stream...)
}

// InitializeGRPC creates the gRPC metrics of every method of s at zero.
func (m *Metrics) InitializeGRPC(s *grpc.Server) {
	if m != nil {
		m.grpc.InitializeMetrics(s)
	}
}

// Agent is the instruments of one agent, resolved once.
type Agent struct {
	m    *Metrics
	name string

	chunks, chunkBytes prometheus.Counter
	firstChunk         prometheus.Observer
	journalWrite       prometheus.Observer
	journalBytes       prometheus.Counter
	sessionsOpen       prometheus.Gauge
	turnsRunning       prometheus.Gauge
	currencies         currencies // the cost's labels so far
}

// Agent returns the instruments of the agent named; nil without metrics.
func (m *Metrics) Agent(name string) *Agent {
	if m == nil {
		return nil
	}
	return &Agent{
		m:            m,
		name:         name,
		chunks:       m.chunks.WithLabelValues(name),
		chunkBytes:   m.chunkBytes.WithLabelValues(name),
		firstChunk:   m.firstChunk.WithLabelValues(name),
		journalWrite: m.journalWrite.WithLabelValues(name),
		journalBytes: m.journalBytes.WithLabelValues(name),
		sessionsOpen: m.sessionsOpen.WithLabelValues(name),
		turnsRunning: m.turnsRunning.WithLabelValues(name),
	}
}

// TurnStarted counts a turn that starts running.
func (a *Agent) TurnStarted() {
	if a == nil {
		return
	}
	a.m.turnsStarted.WithLabelValues(a.name).Inc()
	a.turnsRunning.Inc()
}

// TurnDone counts a turn that stopped running (after TurnEnded).
func (a *Agent) TurnDone() {
	if a != nil {
		a.turnsRunning.Dec()
	}
}

// TurnEnded counts a turn's terminal: its class and reason (see
// outcome.Class and Reason), how long it ran, and the tokens its outcome
// reported.
func (a *Agent) TurnEnded(class, reason string, took time.Duration, inputTokens, outputTokens int64) {
	if a == nil {
		return
	}
	a.m.turnsEnded.WithLabelValues(a.name, class, reason).Inc()
	a.m.turnDuration.WithLabelValues(a.name, class).Observe(took.Seconds())
	if inputTokens > 0 {
		a.m.tokens.WithLabelValues(a.name, "input").Add(float64(inputTokens))
	}
	if outputTokens > 0 {
		a.m.tokens.WithLabelValues(a.name, "output").Add(float64(outputTokens))
	}
}

// Cost adds amount, in currency, to the cost reported (see
// maxCurrencies for the label).
func (a *Agent) Cost(currency string, amount float64) {
	if a == nil || amount <= 0 {
		return
	}
	a.m.cost.WithLabelValues(a.name, a.currencies.label(currency)).Add(amount)
}

// Chunk counts an event streamed of size encoded bytes.
func (a *Agent) Chunk(size int) {
	if a == nil {
		return
	}
	a.chunks.Inc()
	a.chunkBytes.Add(float64(size))
}

// FirstChunk observes the time to a turn's first agent message chunk.
func (a *Agent) FirstChunk(took time.Duration) {
	if a != nil {
		a.firstChunk.Observe(took.Seconds())
	}
}

// JournalWrite observes one write to the store of size bytes.
func (a *Agent) JournalWrite(took time.Duration, size int) {
	if a == nil {
		return
	}
	a.journalWrite.Observe(took.Seconds())
	a.journalBytes.Add(float64(size))
}

// Started observes an agent start-up that succeeded.
func (a *Agent) Started(took time.Duration) {
	if a != nil {
		a.m.agentStart.WithLabelValues(a.name).Observe(took.Seconds())
	}
}

// StartWaited observes an agent start-up that waited took for a start-up
// slot (limits.max_starting_agents) before its spawn.
func (a *Agent) StartWaited(took time.Duration) {
	if a != nil {
		a.m.agentStartWait.WithLabelValues(a.name).Observe(took.Seconds())
	}
}

// ConnectionOpened and ConnectionClosed move the open connections gauge.
func (m *Metrics) ConnectionOpened() {
	if m != nil {
		m.connections.Inc()
	}
}

// ConnectionClosed: see ConnectionOpened.
func (m *Metrics) ConnectionClosed() {
	if m != nil {
		m.connections.Dec()
	}
}

// StartFailed counts an agent start-up that failed, by class.
func (a *Agent) StartFailed(class string) {
	if a != nil {
		a.m.agentStartFailed.WithLabelValues(a.name, class).Inc()
	}
}

// SessionOpened and SessionClosed move the open sessions gauge.
func (a *Agent) SessionOpened() {
	if a != nil {
		a.sessionsOpen.Inc()
	}
}

// SessionClosed: see SessionOpened.
func (a *Agent) SessionClosed() {
	if a != nil {
		a.sessionsOpen.Dec()
	}
}

// Warm sets the gauges of the agent's warm processes: ready to be taken,
// and being started.
func (a *Agent) Warm(ready, starting int) {
	if a == nil {
		return
	}
	a.m.warmReady.WithLabelValues(a.name).Set(float64(ready))
	a.m.warmStarting.WithLabelValues(a.name).Set(float64(starting))
}

// SessionStarted counts a session whose agent started, warm (a warm
// process was taken) or cold.
func (a *Agent) SessionStarted(warm bool) {
	if a == nil {
		return
	}
	start := "cold"
	if warm {
		start = "warm"
	}
	a.m.sessionStarts.WithLabelValues(a.name, start).Inc()
}
