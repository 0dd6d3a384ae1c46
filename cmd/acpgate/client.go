package main

// The client subcommands: prompt, agents, sessions, open, close,
// cancel, permit and version.
//
// Every subcommand except version talks to a running gateway over gRPC
// (plaintext; --addr, default $ACPGATE_ADDR or 127.0.0.1:7070).
//
// Each concept has its file: exitcode.go (the exit-code policy), dial.go
// (reaching the gateway; a rejected call's exit code), interrupt.go,
// prompt.go (the streaming subcommand), commands.go (the one-call
// subcommands), render_human.go and render_json.go (the output).

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
)

// defaultAddr is the gateway address used when --addr is not given and
// ACPGATE_ADDR is empty.
const defaultAddr = "127.0.0.1:7070"

// clientUsage summarises the client subcommands, for the top-level usage.
func clientUsage() string {
	return `  prompt    (--agent NAME | --session ID) [--json] [--cwd DIR] TEXT...|-
            run one prompt turn and stream the answer
  agents    [--json]           list the configured agents
  sessions  [--json]           list the open sessions
  open      --agent NAME [--cwd DIR] [--load ID] [--json]
            open a session (prints its id) for prompt --session
  close     SESSION_ID         close a session and stop its agent
  cancel    SESSION_ID         cancel the turn running on a session
  permit    SESSION_ID REQUEST_ID [OPTION_ID]
            answer a permission request (no OPTION_ID: cancelled)
  version                      print the version
`
}

// runClient runs the client subcommand name with its arguments. handled is
// false when name is not a client subcommand.
func runClient(ctx context.Context, name string, args []string, stdout, stderr io.Writer) (exitCode int, handled bool) {
	switch name {
	case "prompt":
		return runPrompt(ctx, args, stdout, stderr), true
	case "agents":
		return runAgents(ctx, args, stdout, stderr), true
	case "sessions":
		return runSessions(ctx, args, stdout, stderr), true
	case "cancel":
		return runCancel(ctx, args, stdout, stderr), true
	case "open":
		return runOpen(ctx, args, stdout, stderr), true
	case "close":
		return runClose(ctx, args, stdout, stderr), true
	case "permit":
		return runPermit(ctx, args, stdout, stderr), true
	case "version":
		return runVersion(args, stdout, stderr), true
	}
	return 0, false
}

// version is acpgate's version: the main module's version from the build
// information, or "devel" for a build without one.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok || bi.Main.Version == "" || bi.Main.Version == "(devel)" {
		return "devel"
	}
	return bi.Main.Version
}

func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("version", "", "print acpgate's version", stderr)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() != 0 {
		return usageError(fs, stderr, "version takes no arguments")
	}
	fmt.Fprintf(stdout, "acpgate %s\n", version())
	return exitOK
}

// newFlagSet returns a FlagSet for a subcommand whose usage prints synopsis
// and the flags to stderr.
func newFlagSet(name, synopsis, summary string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s\n\n%s\n", strings.TrimSpace("acpgate "+name+" "+synopsis), summary)
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprintln(stderr, "\nflags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

// addrFlag registers --addr on fs.
func addrFlag(fs *flag.FlagSet) *string {
	def := defaultAddr
	if env := os.Getenv("ACPGATE_ADDR"); env != "" {
		def = env
	}
	return fs.String("addr", def, "gateway address (host:port or a gRPC target); default from $ACPGATE_ADDR")
}

// parseFlags parses args; ok is false when the command must exit with code
// (0 for -h, 2 for a bad flag; the flag package has printed why).
func parseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	return 0, true
}

// usageError prints msg and the usage and returns the usage exit code.
func usageError(fs *flag.FlagSet, stderr io.Writer, msg string) int {
	fmt.Fprintf(stderr, "acpgate %s: %s\n", fs.Name(), msg)
	fs.Usage()
	return exitUsage
}
