// Command acpgate-pprof is `acpgate serve` with CPU and allocation profiles,
// for the benchmark harness: the same gateway (server.New, NewGRPCServer,
// Shutdown), which has no profiling endpoint of its own.
//
//	acpgate-pprof --config FILE --cpuprofile cpu.prof --allocprofile allocs.prof
//
// It prints "acpgate listening on HOST:PORT" on stderr like acpgate serve,
// profiles from start to SIGTERM, and writes the profiles on the way out.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/acpgate/acpgate/internal/config"
	"github.com/acpgate/acpgate/server"
)

func main() { os.Exit(run()) }

func run() int {
	configPath := flag.String("config", "", "configuration file (YAML)")
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	cpuPath := flag.String("cpuprofile", "", "write a CPU profile here")
	allocPath := flag.String("allocprofile", "", "write an allocation profile here")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg, err := config.Load(*configPath, os.LookupEnv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "acpgate-pprof:", err)
		return 2
	}
	cfg.Listen = *listen
	if *cpuPath != "" {
		f, err := os.Create(*cpuPath)
		if err != nil {
			fmt.Fprintln(os.Stderr, "acpgate-pprof:", err)
			return 1
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "acpgate-pprof:", err)
			return 1
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	gw, err := server.New(server.Options{Config: cfg, Version: "bench", Logger: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, "acpgate-pprof:", err)
		return 1
	}
	lis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		gw.Close()
		fmt.Fprintln(os.Stderr, "acpgate-pprof:", err)
		return 1
	}
	srv := server.NewGRPCServer(gw)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	fmt.Fprintf(os.Stderr, "acpgate listening on %s\n", lis.Addr())

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	grace, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv.Shutdown(grace, gw)
	<-served
	if *allocPath != "" {
		f, err := os.Create(*allocPath)
		if err == nil {
			err = pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "acpgate-pprof:", err)
			return 1
		}
	}
	return 0
}
