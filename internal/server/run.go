package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/acpgate/acpgate/internal/access"
	"github.com/acpgate/acpgate/internal/config"
	"github.com/acpgate/acpgate/internal/metrics"
	"github.com/acpgate/acpgate/internal/store"
	"github.com/acpgate/acpgate/internal/store/memory"
	"github.com/acpgate/acpgate/internal/store/postgres"
	"github.com/acpgate/acpgate/internal/store/sqlite"
)

// RunOptions configure Run.
type RunOptions struct {
	// Config is the validated configuration; Config.Listen is where Run
	// listens.
	Config *config.Config
	// Version is reported to agents in clientInfo.
	Version string
	// Logger receives the gateway's logs; slog.Default() when nil.
	Logger *slog.Logger
	// LookupEnv resolves the environment (the default state directory);
	// os.LookupEnv when nil.
	LookupEnv func(string) (string, bool)
	// TempDir makes a session's temporary directory; see Options.TempDir.
	TempDir func(agent string) (string, error)
	// SandboxLauncher is the acpgate executable; see Options.
	SandboxLauncher string
	// Security is the listener's TLS and caller authentication; when nil
	// it is built from Config (NewSecurity).
	Security *access.Security
	// Ready, when set, is called with the listening address once the
	// server accepts calls.
	Ready func(net.Addr)
	// MetricsReady, when set, is called with the metrics endpoint's
	// address once it serves (only when Config.Metrics.Listen is set).
	MetricsReady func(net.Addr)
	// AdminReady, when set, is called with the admin services' address
	// once they serve (only when Config.Admin.Listen is set).
	AdminReady func(net.Addr)
	// Exit ends the process when shutdown overruns its hard bound
	// (ShutdownGrace + ShutdownOverrun); os.Exit when nil.
	Exit func(code int)
}

// ShutdownOverrun is how long past shutdown_grace the process may take to
// stop its last agents before Run ends it regardless (RunOptions.Exit).
const ShutdownOverrun = 3 * time.Second

// Run serves the gateway until ctx ends, then shuts it down within
// Config.ShutdownGrace (see GRPCServer.Shutdown), and returns once every
// agent is stopped. It is `acpgate serve` without the command line, so the
// start-up and shutdown sequence exists once.
func Run(ctx context.Context, opts RunOptions) error {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	tp, log, stopTracing, err := startTracing(ctx, opts.Config, opts.Version, opts.LookupEnv, log)
	if err != nil {
		return err
	}
	// Deferred first, so it runs last: the spans of the shutdown itself
	// (cancelled turns, stopped agents) are flushed too.
	defer stopTracing()
	sec := opts.Security
	if sec == nil {
		if sec, err = access.NewSecurity(opts.Config, log); err != nil {
			return err
		}
	}
	st, err := OpenStore(opts.Config, opts.LookupEnv, log)
	if err != nil {
		return err
	}
	defer st.Close()
	var m *metrics.Metrics
	if opts.Config.Metrics.Listen != "" {
		m = metrics.New(metricsLimits(opts.Config))
	}
	gw, err := New(Options{Config: opts.Config, Version: opts.Version, Logger: log, TempDir: opts.TempDir, Store: st, SandboxLauncher: opts.SandboxLauncher, Metrics: m, TracerProvider: tracerProvider(tp)})
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", opts.Config.Listen)
	if err != nil {
		gw.Close()
		return err
	}
	checkDescriptors(opts.Config.Limits.MaxConnections, log)
	lis = limitConnections(lis, opts.Config.Limits.MaxConnections, "limits.max_connections", log, m)
	srv := NewGRPCServer(gw, sec)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	if opts.Ready != nil {
		opts.Ready(lis.Addr())
	}
	ms, err := serveMetrics(opts.Config.Metrics.Listen, m, log, opts.MetricsReady, metricsTimeouts())
	if err != nil {
		srv.Stop()
		gw.Close()
		return err
	}
	as, err := serveAdmin(opts.Config.Admin.Listen, log, opts.AdminReady)
	if err != nil {
		ms.stop(context.Background())
		srv.Stop()
		gw.Close()
		return err
	}
	// A replica that loses its lease does not stop: it gives up what it
	// owned and joins again (see Gateway.leaseLost).
	select {
	case <-ctx.Done():
		log.Info("shutting down", "grace", opts.Config.ShutdownGrace)
		stopWatchdog := shutdownWatchdog(opts.Config.ShutdownGrace+ShutdownOverrun, opts.Exit, log)
		defer stopWatchdog()
	case err := <-served:
		as.stop(context.Background())
		ms.stop(context.Background())
		gw.Close()
		return fmt.Errorf("the server stopped: %w", err)
	}
	graceCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opts.Config.ShutdownGrace)
	defer cancel()
	srv.Shutdown(graceCtx, gw)
	// Metrics and channelz are served through the drain, so that it can
	// be watched; by now graceCtx may have ended, and then both close at
	// once.
	as.stop(graceCtx)
	ms.stop(graceCtx)
	if err := <-served; err != nil && !errors.Is(err, net.ErrClosed) {
		log.Warn("serve returned", "err", err)
	}
	log.Info("stopped")
	return nil
}

// shutdownWatchdog is the hard bound on shutdown: if it has not finished
// within bound (a wait that should not exist, somewhere), the process exits
// anyway, through exit (os.Exit when nil). Every agent's process tree dies
// with it (see agentproc's containment), so nothing is left behind. The
// returned stop disarms it once shutdown has finished.
func shutdownWatchdog(bound time.Duration, exit func(int), log *slog.Logger) (stop func()) {
	if exit == nil {
		exit = os.Exit
	}
	t := time.AfterFunc(bound, func() {
		log.Error("shutdown did not finish within its grace; exiting", "grace", bound-ShutdownOverrun)
		exit(1)
	})
	return func() { t.Stop() }
}

// postgresOpenTimeout bounds connecting to the postgres store's database
// and migrating its schema at start-up (waiting for another replica's
// migration included): a database that cannot be reached fails the start
// with its error rather than hanging it.
const postgresOpenTimeout = time.Minute

// OpenStore opens the turn store the configuration names: the sqlite file
// in state_dir (created if missing), a PostgreSQL database, or memory.
func OpenStore(cfg *config.Config, lookupEnv func(string) (string, bool), log *slog.Logger) (store.Store, error) {
	switch cfg.Store {
	case config.StoreMemory:
		log.Info("turn store", "store", "memory", "durable", false)
		return memory.New(), nil
	case config.StorePostgres:
		ctx, cancel := context.WithTimeout(context.Background(), postgresOpenTimeout)
		defer cancel()
		st, err := postgres.Open(ctx, postgres.Options{
			DSN: cfg.Postgres.DSN, MaxConns: cfg.Postgres.MaxConns, StatementTimeout: cfg.Postgres.StatementTimeout})
		if err != nil {
			return nil, err
		}
		log.Info("turn store", "store", "postgres", "max_conns", cfg.Postgres.MaxConns, "statement_timeout", cfg.Postgres.StatementTimeout)
		return st, nil
	}
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	dir := cfg.StateDir
	if dir == "" {
		var err error
		if dir, err = config.DefaultStateDir(lookupEnv); err != nil {
			return nil, err
		}
	}
	st, err := sqlite.Open(dir)
	if err != nil {
		return nil, err
	}
	log.Info("turn store", "store", "sqlite", "state_dir", dir)
	if damaged := st.DamagedTurns(); len(damaged) > 0 {
		log.Error("turns whose journals are damaged (files missing or shorter than their records): reading them answers DATA_LOSS; the other turns are served",
			"turns", damaged, "journals", filepath.Join(dir, "journals"))
	}
	return st, nil
}
