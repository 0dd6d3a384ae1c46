package main

// The watch subcommand: follow a turn that runs (or ran) without being the
// command that started it.

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/acpgate/acpgate/internal/exitcode"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

var watchCommand = clientCommand{
	name: "watch", usage: "[--json] [--after N] TURN_ID", brief: "stream a turn's events, as prompt does, to its end",
	synopsis: "[--addr ADDR] [--json] [--after N] TURN_ID",
	summary: `Streams a turn's events, from its journal and then live, and shows them as
prompt does, ending with its terminal; the exit code is the terminal's, as for
prompt. TURN_ID is what prompt --detach printed. --after N starts after the
event with seq N, to resume a watch that was cut off. Interrupting a watch
leaves the turn running.`,
	run: runWatch,
}

func runWatch(ctx context.Context, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	addr := addrFlag(fs)
	asJSON := fs.Bool("json", false, "print each event as one protojson line")
	after := fs.Uint64("after", 0, "stream only the events with seq greater than N")
	positional, code, ok := parseInterspersed(fs, args)
	if !ok {
		return code
	}
	if len(positional) != 1 || positional[0] == "" {
		return usageError(fs, stderr, "give exactly one TURN_ID")
	}
	turnID := positional[0]

	client, closeConn, code := dial(*addr, stderr)
	if code != exitcode.OK {
		return code
	}
	defer closeConn()

	var p *progress // the status line while nothing streams (progress.go)
	if !*asJSON {
		var stop func()
		p, stdout, stderr, stop = startProgress(ctx, client, "waiting on the turn", "", stdout, stderr)
		defer stop()
	}
	// Watching is reading: an interrupt ends the call, never the turn.
	stream, err := client.WatchTurn(ctx, &acpgatev1.WatchTurnRequest{TurnId: turnID, AfterSeq: *after})
	if err != nil {
		return statusExit(err, ctx.Err() != nil, stderr)
	}
	var sink eventSink
	if *asJSON {
		sink = &jsonSink{out: stdout, err: stderr}
	} else {
		sink = progressSink{eventSink: newHumanSink(stdout, stderr), p: p}
	}
	seen := &terminalSeen{eventSink: sink}
	code, lastSeq := showTurn(ctx, stream, seen, nil, stderr)
	if !seen.seen && (ctx.Err() != nil || lastSeq > *after) {
		// Cut off mid-turn, not turned away.
		fmt.Fprintf(stderr, "· the turn goes on without this watch; resume with: acpgate watch --after %d %s\n", max(lastSeq, *after), turnID)
	}
	return code
}

// terminalSeen is a sink that notes whether the terminal event was shown.
type terminalSeen struct {
	eventSink
	seen bool
}

func (s *terminalSeen) outcome(ev *acpgatev1.PromptEvent) {
	s.seen = true
	s.eventSink.outcome(ev)
}

func (s *terminalSeen) failed(ev *acpgatev1.PromptEvent, label string) {
	s.seen = true
	s.eventSink.failed(ev, label)
}

// parseInterspersed parses args as parseFlags does, but lets flags follow
// the positional arguments too ("watch TURN_ID --after 5"), and returns the
// positional arguments.
func parseInterspersed(fs *flag.FlagSet, args []string) (positional []string, code int, ok bool) {
	for {
		if code, ok := parseFlags(fs, args); !ok {
			return nil, code, false
		}
		if fs.NArg() == 0 {
			return positional, 0, true
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}
