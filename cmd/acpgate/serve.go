package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/acpgate/acpgate/internal/access"
	"github.com/acpgate/acpgate/internal/config"
	"github.com/acpgate/acpgate/internal/demoagent"
	"github.com/acpgate/acpgate/internal/scratch"
	"github.com/acpgate/acpgate/internal/server"
	"github.com/acpgate/acpgate/internal/store/sqlite"
)

// runServe is `acpgate serve`: run the gateway until SIGINT or SIGTERM.
func runServe(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "configuration file (YAML); without one, the built-in demo agent is served as agent \"demo\"")
	listen := fs.String("listen", "", "address to listen on, overriding the configuration (127.0.0.1:0 picks a free port)")
	stateDir := fs.String("state-dir", "", "directory of the sqlite turn store, overriding state_dir (default: acpgate under $XDG_STATE_HOME, else ~/.local/state)")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	check := fs.Bool("check", false, "check the configuration as serve would at start (strict decoding, every rule, the files it names readable, the exposure rule), then exit: 0 when it is valid, 2 otherwise")
	// Profiling. Documented rather than hidden: a flag the usage hides is
	// found only by reading the source, yet these are what an operator
	// needs to show where a slow gateway spends its time, and the
	// benchmarks' profiles (docs/benchmarks.md) are made with them.
	cpuProfile := fs.String("cpuprofile", "", "profiling: write a CPU profile (go tool pprof) of the whole run to `FILE`")
	allocProfile := fs.String("allocprofile", "", "profiling: write the allocations since start (go tool pprof) to `FILE` after a clean shutdown")
	execTrace := fs.String("trace", "", "profiling: write the runtime's execution trace (go tool trace) of the whole run to `FILE`")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "acpgate serve: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "acpgate serve: --log-level: %v\n", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	// The gateway holds every agent's credentials in its environment and
	// memory. Non-dumpable, its /proc/PID/environ, mem and the like are
	// closed to processes of the same uid without CAP_SYS_PTRACE, and it
	// cannot be ptrace-attached by them (agents in a namespace cannot
	// even name it, having a /proc of their own, and sandboxed agents are
	// kept out by Landlock as well, whatever their privileges; see
	// package sandbox). Agents are not affected: execve makes a process
	// dumpable again. It is set before the containment probe, which must
	// see the conditions turns will have: a non-dumpable gateway cannot
	// write a child's uid map, so in a user namespace the launcher writes
	// its own (see acp's process).
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		log.Warn("could not mark the gateway non-dumpable: agents of the same user may read its environment", "err", err)
	}
	// The launcher gives agents their own /proc and confines sandboxed
	// agents: acpgate-launcher beside this executable, else this executable.
	self, err := os.Executable()
	if err != nil {
		log.Warn("locating the acpgate executable: agents get no /proc of their own, those with sandbox.enabled will not start", "err", err)
	}
	launcher := launcherBeside(self)
	log.Debug("agent launcher", "path", launcher)
	cfg, err := loadConfig(*configPath)
	if err != nil {
		fmt.Fprintf(stderr, "acpgate serve: %v\n", err)
		return 2
	}
	if *listen != "" {
		cfg.Listen = *listen
	}
	if *stateDir != "" {
		// state_dir must be absolute; a flag is relative to where
		// serve runs, as a person typing it expects.
		if cfg.StateDir, err = filepath.Abs(*stateDir); err != nil {
			fmt.Fprintf(stderr, "acpgate serve: --state-dir: %v\n", err)
			return 2
		}
	}
	if err := cfg.ExposureProblem(); err != nil {
		fmt.Fprintf(stderr, "acpgate serve: %v\n", err)
		return 2
	}
	warnMissingCommands(log, cfg)
	if *check {
		fmt.Fprintf(stderr, "acpgate serve: the configuration is valid\n")
		return 0
	}
	// The TLS and auth material is loaded now, so a file that does not
	// parse is a configuration error like any other.
	sec, err := access.NewSecurity(cfg, log)
	if err != nil {
		fmt.Fprintf(stderr, "acpgate serve: %v\n", err)
		return 2
	}
	// Sessions' temporary directories go in this instance's scratch
	// directory, so that what a killed gateway leaves there is removed at
	// the next start.
	scratchDir, err := scratch.Open("")
	if err != nil {
		fmt.Fprintf(stderr, "acpgate serve: %v\n", err)
		return 1
	}
	defer func() {
		if err := scratchDir.Close(); err != nil {
			log.Warn("removing the scratch directory", "err", err)
		}
	}()
	log.Info("session temporary directories", "path", scratchDir.Path())
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	for _, r := range []struct {
		path  string
		start func(string) (func(), error)
	}{{*cpuProfile, startCPUProfile}, {*execTrace, startTrace}} {
		if r.path == "" {
			continue
		}
		end, err := r.start(r.path)
		if err != nil {
			fmt.Fprintf(stderr, "acpgate serve: %v\n", err)
			return 1
		}
		defer end()
	}
	err = server.Run(ctx, server.RunOptions{
		Config:          cfg,
		Version:         version(),
		Logger:          log,
		TempDir:         scratchDir.SessionDir,
		SandboxLauncher: launcher,
		Security:        sec,
		Ready:           func(addr net.Addr) { fmt.Fprintf(stderr, "acpgate listening on %s\n", addr) },
		MetricsReady:    func(addr net.Addr) { fmt.Fprintf(stderr, "acpgate metrics on http://%s/metrics\n", addr) },
		AdminReady:      func(addr net.Addr) { fmt.Fprintf(stderr, "acpgate admin on %s\n", addr) },
	})
	if err != nil {
		fmt.Fprintf(stderr, "acpgate serve: %v\n", err)
		if errors.Is(err, sqlite.ErrInUse) {
			fmt.Fprintln(stderr, stateDirInUseHint)
		}
		return 1
	}
	if *allocProfile != "" {
		if err := writeAllocProfile(*allocProfile); err != nil {
			fmt.Fprintf(stderr, "acpgate serve: %v\n", err)
			return 1
		}
	}
	return 0
}

// stateDirInUseHint is what to do when another gateway holds the state
// directory: two gateways cannot share one sqlite store.
const stateDirInUseHint = "acpgate serve: another gateway uses that state directory; stop it, or give this one its own: " +
	"--state-dir DIR (or state_dir in the configuration), or XDG_STATE_HOME (the default is acpgate under it), " +
	"or `store: memory` in the configuration to keep no turns across restarts"

func loadConfig(path string) (*config.Config, error) {
	if path != "" {
		return config.Load(path, os.LookupEnv)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("locating the acpgate executable for the demo agent: %w", err)
	}
	return config.Default(self), nil
}

// runDemoAgent is `acpgate demo-agent`: the built-in ACP agent on stdio.
func runDemoAgent(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	delay := fs.Duration("chunk-delay", 0, "pause between streamed updates (default 30ms; negative for none)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := demoagent.Run(ctx, os.Stdin, os.Stdout, demoagent.Options{ChunkDelay: *delay, Logger: log}); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(stderr, "acpgate demo-agent: %v\n", err)
		return 1
	}
	return 0
}

// launcherName is the small launcher's executable (cmd/acpgate-launcher).
const launcherName = "acpgate-launcher"

// launcherBeside is the launcher agents start through: acpgate-launcher in
// self's directory when there is one, else self (acpgate is a launcher
// too, only a slower one to start: see cmd/acpgate-launcher). "" when self
// is "".
func launcherBeside(self string) string {
	if self == "" {
		return ""
	}
	p := filepath.Join(filepath.Dir(self), launcherName)
	if info, err := os.Stat(p); err == nil && info.Mode().IsRegular() && info.Mode()&0o111 != 0 {
		return p
	}
	return self
}
