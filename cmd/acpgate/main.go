// Command acpgate runs Agent Client Protocol agents behind a gRPC service,
// and is that service's command-line client.
//
//	acpgate serve [--config FILE] [--listen ADDR]   run the gateway
//	acpgate demo-agent                              the built-in ACP agent, on stdio
//	acpgate prompt (--agent NAME | --session ID) TEXT...
//	acpgate agents | sessions | cancel ID | version
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/acpgate/acpgate/internal/sandbox"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	ctx := context.Background()
	switch args[0] {
	case "serve":
		return runServe(ctx, args[1:], stderr)
	case "demo-agent":
		return runDemoAgent(ctx, args[1:], stderr)
	case sandbox.Command:
		// The launcher of a confined agent (see package sandbox); not
		// in the usage: only the gateway runs it.
		return sandbox.Main(args[1:], stderr)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if code, ok := runClient(ctx, args[0], args[1:], stdout, stderr); ok {
		return code
	}
	fmt.Fprintf(stderr, "acpgate: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintf(w, `acpgate runs Agent Client Protocol agents behind a gRPC service.

Usage: acpgate COMMAND [flags]

  serve     [--config FILE] [--listen ADDR] [--state-dir DIR]
            run the gateway (without --config: the built-in demo agent, as "demo")
  demo-agent
            the built-in demo ACP agent, speaking ACP on stdin/stdout
%s
Run "acpgate COMMAND -h" for a command's flags.
`, clientUsage())
}
