package main

// The client subcommands: prompt, watch, agents, sessions, open, close,
// cancel, permit, turns, turn and version.
//
// Every subcommand except version talks to a running gateway over gRPC
// (plaintext; --addr, default $ACPGATE_ADDR or 127.0.0.1:7070).
//
// Each concept has its file: exitcode.go (the exit-code policy), dial.go
// (reaching the gateway; a rejected call's exit code), interrupt.go,
// prompt.go and watch.go (the streaming subcommands), commands.go (the
// one-call subcommands), render_human.go and render_json.go (the output).
//
// Adding a subcommand: one that makes one call is an entry of
// oneCallCommands (commands.go), which names it, describes it, declares its
// flags and makes the call; the shared runner does the rest. One that
// streams gets a file of its own with a clientCommand (as promptCommand in
// prompt.go), listed in clientCommands.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/acpgate/acpgate/internal/exitcode"
)

// defaultAddr is the gateway address used when --addr is not given and
// ACPGATE_ADDR is empty.
const defaultAddr = "127.0.0.1:7070"

// A clientCommand is one client subcommand.
type clientCommand struct {
	name  string
	usage string // its arguments, in acpgate's usage
	brief string // what it does, in acpgate's usage

	synopsis string // its arguments, in its own usage (-h)
	summary  string // what it does, in its own usage

	// run runs it; fs is its FlagSet, which prints its own usage and has no
	// flags yet. A one-call subcommand's run is made by oneCall.
	run commandFunc
}

// commandFunc runs a client subcommand with its arguments and returns its
// exit code.
type commandFunc func(ctx context.Context, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int

// clientCommands are the client subcommands, in the order of acpgate's
// usage. A subcommand that makes one call belongs in oneCallCommands
// (commands.go); one that streams has its own file, as prompt.go.
var clientCommands = slices.Concat(
	[]clientCommand{promptCommand, watchCommand},
	oneCallCommands,
	[]clientCommand{versionCommand},
)

// clientUsage summarises the client subcommands, for the top-level usage:
// a subcommand's name, its arguments and what it does, in columns, or with
// what it does on a line of its own when its arguments are too long.
func clientUsage() string {
	const nameWidth, usageWidth = 10, 19
	var b strings.Builder
	for _, c := range clientCommands {
		if len(c.usage) <= usageWidth-2 {
			fmt.Fprintf(&b, "  %-*s%-*s%s\n", nameWidth, c.name, usageWidth, c.usage, c.brief)
		} else {
			fmt.Fprintf(&b, "  %-*s%s\n  %*s%s\n", nameWidth, c.name, c.usage, nameWidth, "", c.brief)
		}
	}
	return b.String()
}

// runClient runs the client subcommand name with its arguments. handled is
// false when name is not a client subcommand.
func runClient(ctx context.Context, name string, args []string, stdout, stderr io.Writer) (exitCode int, handled bool) {
	for _, c := range clientCommands {
		if c.name == name {
			fs := newFlagSet(c.name, c.synopsis, c.summary, stderr)
			return c.run(ctx, fs, args, stdout, stderr), true
		}
	}
	return 0, false
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
			return exitcode.OK, false
		}
		return exitcode.Usage, false
	}
	return 0, true
}

// usageError prints msg and the usage and returns the usage exit code.
func usageError(fs *flag.FlagSet, stderr io.Writer, msg string) int {
	fmt.Fprintf(stderr, "acpgate %s: %s\n", fs.Name(), msg)
	fs.Usage()
	return exitcode.Usage
}
