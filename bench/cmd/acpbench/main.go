// Command acpbench is acpgate's benchmark harness: it measures the gateway
// side by side with clients that talk ACP to the agent directly, and writes
// the report (docs/benchmarks.md).
//
//	acpbench run [-smoke] [-runs N] [-out FILE]   run every section, write the report
//	acpbench client -job JSON                     one measurement (used by run)
//	acpbench report -json FILE [-out FILE]        render a report again from run's -json output
//	acpbench hops -trace FILE                     where a traced gateway's goroutines waited to run
//	acpbench agent                                the naive floor's agent, on stdin and stdout (bench/internal/clients)
//	acpbench relay [-listen ADDR]                 the least a gRPC gateway does, for the gateway client (bench/internal/clients)
//
// It is a module of its own (bench/go.mod, with the product module replaced
// by the working tree), so that the product's dependencies and tests are the
// product's. Run it from the repository, e.g. `go -C bench run ./cmd/acpbench
// run` or `make bench`: it builds acpgate and the test agent from the working
// tree first, in the product module. Relative -out and -json paths are
// relative to the working directory. See docs/benchmarks.md for what is
// measured and how.
//
// This package is the driver and its sections: it builds and starts the
// gateways, runs each measurement in a client process and fills in the
// report. What a client process runs is bench/internal/clients, the job
// and result passed between the two bench/internal/job, the report and
// its Markdown bench/internal/report, and the readings of /proc
// bench/internal/proc.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/acpgate/acpgate/bench/internal/clients"
	"github.com/acpgate/acpgate/bench/internal/job"
	"github.com/acpgate/acpgate/bench/internal/report"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "run":
		os.Exit(runDriver(os.Args[2:]))
	case "client":
		os.Exit(runClient(os.Args[2:]))
	case "report":
		os.Exit(runReport(os.Args[2:]))
	case "hog":
		os.Exit(clients.RunHog(os.Args[2:]))
	case "hops":
		os.Exit(runHops(os.Args[2:]))
	case "agent":
		os.Exit(clients.RunNaiveAgent(os.Args[2:]))
	case "relay":
		os.Exit(runRelay(os.Args[2:]))
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: acpbench run [-smoke] [-runs N] [-out FILE] [-json FILE] | acpbench report -json FILE [-out FILE] | acpbench client -job JSON | acpbench hops -trace FILE")
	os.Exit(2)
}

// runClient runs one Job and prints its Result as JSON on stdout.
func runClient(args []string) int {
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	spec := fs.String("job", "", "the Job, as JSON")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var j job.Job
	if err := json.Unmarshal([]byte(*spec), &j); err != nil {
		fmt.Fprintln(os.Stderr, "acpbench client: -job:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), j.Timeout)
	defer cancel()
	var r job.Result
	switch j.Client {
	case "floor", "floor-sdk", job.FloorContained:
		r = clients.RunFloor(ctx, j)
	case job.FloorLoaded:
		stop, err := clients.StartLoad(j.Load)
		if err != nil {
			fmt.Fprintln(os.Stderr, "acpbench client:", err)
			return 1
		}
		r = clients.RunFloor(ctx, j)
		stop()
		r.Load = j.Load
	case "peer":
		r = clients.RunPeer(ctx, j)
	case "gateway", job.GatewayStream, job.GatewayStreamMemory, job.GatewayEach, job.Relay:
		r = clients.RunGateway(ctx, j)
	case job.Watch:
		r = clients.RunWatch(ctx, j)
	default:
		fmt.Fprintf(os.Stderr, "acpbench client: unknown client %q\n", j.Client)
		return 2
	}
	fmt.Println(mustJSON(r))
	return 0
}

// runReport renders the Markdown report from the raw results of a run.
func runReport(args []string) int {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	in := fs.String("json", "", "raw results written by acpbench run -json")
	out := fs.String("out", "", "write the report here (default: standard output)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	b, err := os.ReadFile(*in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "acpbench report:", err)
		return 1
	}
	var r report.Report
	if err := json.Unmarshal(b, &r); err != nil {
		fmt.Fprintln(os.Stderr, "acpbench report:", err)
		return 1
	}
	if *out == "" {
		fmt.Print(r.Markdown())
		return 0
	}
	if err := os.WriteFile(*out, []byte(r.Markdown()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "acpbench report:", err)
		return 1
	}
	return 0
}

// runRelay serves the relay (bench/internal/clients) on -listen.
func runRelay(args []string) int {
	fs := flag.NewFlagSet("relay", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "the address to serve on")
	o := clients.DefaultRelayOptions()
	fs.IntVar(&o.Nice, "nice", o.Nice, "start agents this many nice levels below the relay")
	fs.IntVar(&o.Starts, "starts", o.Starts, "start at most this many agents at once (0: unbounded)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "acpbench relay:", err)
		return 1
	}
	fmt.Fprintln(os.Stderr, clients.RelayListening+lis.Addr().String())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := clients.ServeRelay(ctx, lis, o); err != nil {
		fmt.Fprintln(os.Stderr, "acpbench relay:", err)
		return 1
	}
	return 0
}
