package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/acpgate/acpgate/internal/config"
	"github.com/acpgate/acpgate/internal/metrics"
	"github.com/acpgate/acpgate/internal/sessions"
	"github.com/acpgate/acpgate/internal/turn"
	"github.com/acpgate/acpgate/outcome"
)

// agentMetrics is the instruments of the agent named; nil (recording
// nothing) without metrics or for an agent not configured.
func (g *Gateway) agentMetrics(name string) *metrics.Agent {
	return g.sessions.AgentMetrics(name)
}

// noteTurnEnd records a turn's terminal; live is its session, nil when
// its agent did not start.
func (g *Gateway) noteTurnEnd(r *turn.Running, live *sessions.Live, result outcome.Result) {
	m := g.agentMetrics(r.Rec.Agent)
	if m == nil {
		return
	}
	class, reason := metrics.Classify(result.Error)
	u := result.Outcome.GetUsage()
	m.TurnEnded(class, reason, time.Since(r.Rec.StartedAt), u.GetInputTokens(), u.GetOutputTokens())
	if live != nil && u != nil && u.CostAmount != nil {
		m.Cost(u.GetCostCurrency(), live.CostAdded(u.GetCostAmount()))
	}
}

// metricsLimits are the configured limits that metrics report.
func metricsLimits(cfg *config.Config) metrics.Limits {
	l := metrics.Limits{MaxSessions: cfg.Limits.MaxSessions, MaxConnections: cfg.Limits.MaxConnections, AgentMaxSessions: map[string]int{}}
	for _, a := range cfg.Agents {
		l.AgentMaxSessions[a.Name] = a.MaxSessions
	}
	return l
}

// httpTimeouts bounds a connection of an HTTP side listener.
type httpTimeouts struct {
	readHeader, write, idle time.Duration
}

// metricsTimeouts are the bounds of a /metrics connection. Without an idle
// timeout (net/http's default is none), a kept-alive connection that sends
// nothing more stays open for as long as its client likes; without a write
// timeout, so does one that stops reading its response. A scrape writes a
// few hundred KiB at most; a scraper that keeps its connection between
// scrapes a minute apart keeps it.
func metricsTimeouts() httpTimeouts {
	return httpTimeouts{readHeader: 10 * time.Second, write: time.Minute, idle: 2 * time.Minute}
}

// metricsServer is the HTTP server of /metrics; a nil one is not running.
type metricsServer struct {
	srv    *http.Server
	served chan error
	log    *slog.Logger
}

// serveMetrics serves m at /metrics on addr; with no addr it serves
// nothing and returns a nil server.
func serveMetrics(addr string, m *metrics.Metrics, log *slog.Logger, ready func(net.Addr), limits httpTimeouts) (*metricsServer, error) {
	if addr == "" || m == nil {
		return nil, nil
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics.listen: %w", err)
	}
	lis = limitConnections(lis, sideMaxConnections, "metrics.listen (fixed)", log, nil)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	s := &metricsServer{
		srv:    &http.Server{Handler: mux, ReadHeaderTimeout: limits.readHeader, WriteTimeout: limits.write, IdleTimeout: limits.idle},
		served: make(chan error, 1),
		log:    log,
	}
	go func() { s.served <- s.srv.Serve(lis) }()
	log.Info("serving metrics", "addr", lis.Addr().String(), "path", "/metrics")
	if ready != nil {
		ready(lis.Addr())
	}
	return s, nil
}

// stop shuts the server down gracefully until ctx ends, then closes it.
func (s *metricsServer) stop(ctx context.Context) {
	if s == nil {
		return
	}
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close()
	}
	if err := <-s.served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		s.log.Warn("the metrics server stopped", "err", err)
	}
}
