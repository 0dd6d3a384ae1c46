package main

// The prompt subcommand: one turn, streamed.

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// clientStdin is where `prompt -` reads its text; tests replace it.
var clientStdin io.Reader = os.Stdin

var promptCommand = clientCommand{
	name: "prompt", usage: "(--agent NAME | --session ID) [--json] [--cwd DIR] TEXT...|-",
	brief:    "run one prompt turn and stream the answer",
	synopsis: "[--addr ADDR] (--agent NAME | --session ID) [--json] [--cwd DIR] TEXT... | -",
	summary: `Runs one prompt turn and streams it. The agent's answer goes to stdout as it
arrives (exactly the turn's outcome text, plus a final newline); thoughts,
tool calls, plans and permission decisions go to stderr. TEXT is the prompt;
"-" reads it from stdin. With --json, every event is printed to stdout as one
protojson line and nothing else is printed to stdout.`,
	run: runPrompt,
}

func runPrompt(ctx context.Context, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	addr := addrFlag(fs)
	agent := fs.String("agent", "", "run one-shot on this configured agent")
	session := fs.String("session", "", "run on this open session")
	asJSON := fs.Bool("json", false, "print each event as one protojson line")
	cwd := fs.String("cwd", "", "one-shot working directory, relative to the agent's workspace")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	switch {
	case (*agent == "") == (*session == ""):
		return usageError(fs, stderr, "give exactly one of --agent and --session")
	case *cwd != "" && *session != "":
		return usageError(fs, stderr, "--cwd applies to --agent (one-shot) only")
	case fs.NArg() == 0:
		return usageError(fs, stderr, "no prompt text (give TEXT, or - to read stdin)")
	}
	text := strings.Join(fs.Args(), " ")
	if fs.NArg() == 1 && fs.Arg(0) == "-" {
		b, err := io.ReadAll(clientStdin)
		if err != nil {
			fmt.Fprintf(stderr, "acpgate: reading the prompt from stdin: %v\n", err)
			return exitUsage
		}
		text = string(b)
	}
	if strings.TrimSpace(text) == "" {
		return usageError(fs, stderr, "the prompt text is empty")
	}

	client, closeConn, code := dial(*addr, stderr)
	if code != exitOK {
		return code
	}
	defer closeConn()

	req := &acpgatev1.PromptRequest{SessionId: *session, Agent: *agent, Text: text, Cwd: *cwd}
	var sink eventSink
	if *asJSON {
		sink = &jsonSink{out: stdout, err: stderr} // every event, as the gateway cuts them
	} else {
		sink = newHumanSink(stdout, stderr)
		// The answer is printed as it streams, so how it is cut into chunks
		// does not show: fewer, larger chunks cost less at every hop.
		req.CoalesceChunks = true
	}
	return streamPrompt(ctx, client, req, sink, stderr)
}

// eventSink shows a prompt's events.
type eventSink interface {
	// event shows one event before the terminal.
	event(*acpgatev1.PromptEvent)
	// outcome shows the completed turn.
	outcome(*acpgatev1.PromptEvent)
	// failed shows the error terminal; label is its class.
	failed(ev *acpgatev1.PromptEvent, label string)
	// abort ends the output of a stream that ended without a terminal.
	abort()
}

// streamPrompt runs the Prompt call and shows its events; interrupt.go says
// how ctx's cancellation is handled.
func streamPrompt(ctx context.Context, client acpgatev1.AgentGatewayClient, req *acpgatev1.PromptRequest, sink eventSink, stderr io.Writer) int {
	rpcCtx, rpcCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer rpcCancel()

	turnStarted, stopWatching := cancelOnInterrupt(ctx, client, rpcCancel)
	defer stopWatching()

	stream, err := client.Prompt(rpcCtx, req)
	if err != nil {
		return statusExit(err, ctx.Err() != nil, stderr)
	}
	terminal := -1 // the exit code of the terminal event, once seen
	for {
		ev, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			if terminal >= 0 {
				// The turn's verdict is in; a broken stream after it
				// changes nothing.
				return terminal
			}
			sink.abort()
			return statusExit(err, ctx.Err() != nil, stderr)
		}
		if terminal >= 0 {
			continue // nothing follows the terminal event
		}
		switch ev.GetEvent().(type) {
		case *acpgatev1.PromptEvent_Started:
			turnStarted(ev.GetStarted().GetSessionId())
			sink.event(ev)
		case *acpgatev1.PromptEvent_Outcome:
			sink.outcome(ev)
			terminal = exitOK
		case *acpgatev1.PromptEvent_Error:
			label, code := classify(ev.GetError())
			sink.failed(ev, label)
			terminal = code
		default:
			sink.event(ev)
		}
	}
	if terminal >= 0 {
		return terminal
	}
	sink.abort()
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "acpgate: cancelled: interrupted")
		return exitCancelled
	}
	fmt.Fprintln(stderr, "acpgate: protocol: the gateway ended the stream without a terminal event")
	return exitProtocol
}
