package main

// The prompt subcommand: one turn, streamed.

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/acpgate/acpgate/internal/exitcode"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// clientStdin is where `prompt -` reads its text; tests replace it.
var clientStdin io.Reader = os.Stdin

var promptCommand = clientCommand{
	name: "prompt", usage: "(--agent NAME | --session ID) [--json] [--cwd DIR] [--request-id ID [--detach]] TEXT...|-",
	brief:    "run one prompt turn and stream the answer",
	synopsis: "[--addr ADDR] (--agent NAME | --session ID) [--json] [--cwd DIR] [--request-id ID] [--detach] [--on-disconnect cancel|continue] TEXT... | -",
	summary: `Runs one prompt turn and streams it. The agent's answer goes to stdout as it
arrives (exactly the turn's outcome text, plus a final newline); thoughts,
tool calls, plans and permission decisions go to stderr. TEXT is the prompt;
"-" reads it from stdin. With --json, every event is printed to stdout as one
protojson line and nothing else is printed to stdout.

With --request-id, running the same prompt again with the same id starts no
new turn: it attaches to the first one and streams it from its start. With
--detach, the command prints the turn's id as soon as the turn has started
and exits 0, leaving the turn running; follow it with acpgate watch.
With --request-id, Ctrl-C detaches too (the turn runs on; a second Ctrl-C
at once cancels it); without one, Ctrl-C cancels the turn.

On a terminal, until the output starts, a status line on stderr says what
the command waits on: the agent's start (cold or warm), then the agent.`,
	run: runPrompt,
}

// disconnectPolicies are --on-disconnect's values.
var disconnectPolicies = map[string]acpgatev1.DisconnectPolicy{
	"cancel":   acpgatev1.DisconnectPolicy_DISCONNECT_POLICY_CANCEL,
	"continue": acpgatev1.DisconnectPolicy_DISCONNECT_POLICY_CONTINUE,
}

func runPrompt(ctx context.Context, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	addr := addrFlag(fs)
	agent := fs.String("agent", "", "run one-shot on this configured agent")
	session := fs.String("session", "", "run on this open session")
	asJSON := fs.Bool("json", false, "print each event as one protojson line")
	cwd := fs.String("cwd", "", "one-shot working directory, relative to the agent's workspace")
	requestID := fs.String("request-id", "", "idempotency key: the same prompt with the same id attaches to its turn instead of running again")
	detach := fs.Bool("detach", false, "print the turn id once the turn has started and exit, leaving it running (implies --on-disconnect continue)")
	onDisconnect := fs.String("on-disconnect", "", "what happens to the turn if this command goes away before its end: cancel or continue (default: continue with --request-id, else cancel)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	policy, knownPolicy := disconnectPolicies[*onDisconnect]
	switch {
	case (*agent == "") == (*session == ""):
		return usageError(fs, stderr, "give exactly one of --agent and --session")
	case *cwd != "" && *session != "":
		return usageError(fs, stderr, "--cwd applies to --agent (one-shot) only")
	case *onDisconnect != "" && !knownPolicy:
		return usageError(fs, stderr, "--on-disconnect is cancel or continue")
	case *detach && policy == acpgatev1.DisconnectPolicy_DISCONNECT_POLICY_CANCEL:
		return usageError(fs, stderr, "--detach leaves the turn running; it cannot be combined with --on-disconnect cancel")
	case fs.NArg() == 0:
		return usageError(fs, stderr, "no prompt text (give TEXT, or - to read stdin)")
	}
	text := strings.Join(fs.Args(), " ")
	if fs.NArg() == 1 && fs.Arg(0) == "-" {
		b, err := io.ReadAll(clientStdin)
		if err != nil {
			fmt.Fprintf(stderr, "acpgate: reading the prompt from stdin: %v\n", err)
			return exitcode.Usage
		}
		text = string(b)
	}
	if strings.TrimSpace(text) == "" {
		return usageError(fs, stderr, "the prompt text is empty")
	}

	client, closeConn, code := dial(*addr, stderr)
	if code != exitcode.OK {
		return code
	}
	defer closeConn()

	req := &acpgatev1.PromptRequest{SessionId: *session, Agent: *agent, Text: text, Cwd: *cwd,
		RequestId: *requestID, OnDisconnect: policy}
	if *detach {
		// Said explicitly, whatever the default: the turn must outlive
		// this command.
		req.OnDisconnect = acpgatev1.DisconnectPolicy_DISCONNECT_POLICY_CONTINUE
	}
	var p *progress // the status line while nothing streams (progress.go)
	if !*asJSON {
		var stop func()
		p, stdout, stderr, stop = startProgress(ctx, client, startingPhase(req), req.GetAgent(), stdout, stderr)
		defer stop()
	}
	var sink eventSink
	if *asJSON {
		sink = &jsonSink{out: stdout, err: stderr} // every event, as the gateway journals them
	} else {
		sink = progressSink{eventSink: newHumanSink(stdout, stderr), p: p}
	}
	var detached func(started *acpgatev1.PromptEvent) // nil: read the turn to its end
	if *detach {
		detached = func(ev *acpgatev1.PromptEvent) {
			if *asJSON {
				writeJSONLine(stdout, ev)
				return
			}
			fmt.Fprintln(stdout, ev.GetStarted().GetTurnId())
		}
	}
	return streamPrompt(ctx, client, req, sink, detached, stderr)
}

// detachesOnInterrupt says whether Ctrl-C leaves req's turn running
// (interrupt.go): it has a request id and does not ask to be cancelled on
// disconnect.
func detachesOnInterrupt(req *acpgatev1.PromptRequest) bool {
	return req.GetRequestId() != "" && req.GetOnDisconnect() != acpgatev1.DisconnectPolicy_DISCONNECT_POLICY_CANCEL
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
// how ctx's cancellation is handled. With detached set, the command is done
// at the `started` event, which detached shows instead of sink, and the
// turn is left running.
func streamPrompt(ctx context.Context, client acpgatev1.AgentGatewayClient, req *acpgatev1.PromptRequest, sink eventSink,
	detached func(started *acpgatev1.PromptEvent), stderr io.Writer) int {
	rpcCtx, rpcCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer rpcCancel()

	turnStarted, stopWatching, interrupted := cancelOnInterrupt(ctx, client, rpcCancel, detachesOnInterrupt(req), stderr)
	defer stopWatching()

	stream, err := client.Prompt(rpcCtx, req)
	if err != nil {
		return statusExit(err, ctx.Err() != nil, stderr)
	}
	// Once detached, the abandoned call's ending is no failure to report.
	quiet := &detachedWriter{w: stderr, st: interrupted}
	code, _ := showTurn(ctx, stream, sink, func(ev *acpgatev1.PromptEvent) (done bool) {
		if detached != nil {
			detached(ev)
			return true
		}
		turnStarted(ev)
		return false
	}, quiet)
	if interrupted.detached.Load() {
		return exitcode.OK
	}
	return code
}

// detachedWriter passes writes to w until the prompt has detached.
type detachedWriter struct {
	w  io.Writer
	st *interruption
}

func (d *detachedWriter) Write(p []byte) (int, error) {
	if d.st.detached.Load() {
		return len(p), nil
	}
	return d.w.Write(p)
}

// turnStream is a stream of one turn's events: a Prompt or a WatchTurn
// call.
type turnStream interface {
	Recv() (*acpgatev1.PromptEvent, error)
}

// showTurn reads stream to its end, shows its events on sink and returns
// the exit code: the terminal event's, or why the stream ended without one.
// started, when not nil, is told of the `started` event first, and ends
// the command with exit code 0 when it reports done. lastSeq is the
// seq of the last event read, heartbeats aside: where a watcher resumes.
// ctx is the command's: once it is cancelled, a stream that ends without a
// terminal was interrupted.
func showTurn(ctx context.Context, stream turnStream, sink eventSink, started func(*acpgatev1.PromptEvent) (done bool), stderr io.Writer) (code int, lastSeq uint64) {
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
				return terminal, lastSeq
			}
			sink.abort()
			return statusExit(err, ctx.Err() != nil, stderr), lastSeq
		}
		if terminal >= 0 {
			continue // nothing follows the terminal event
		}
		if ev.GetSeq() > 0 {
			lastSeq = ev.GetSeq()
		}
		switch ev.GetEvent().(type) {
		case *acpgatev1.PromptEvent_Started:
			if started != nil && started(ev) {
				return exitcode.OK, lastSeq
			}
			sink.event(ev)
		case *acpgatev1.PromptEvent_Outcome:
			sink.outcome(ev)
			terminal = exitcode.OK
		case *acpgatev1.PromptEvent_Error:
			label, code := exitcode.Classify(ev.GetError())
			sink.failed(ev, label)
			terminal = code
		default:
			sink.event(ev)
		}
	}
	if terminal >= 0 {
		return terminal, lastSeq
	}
	sink.abort()
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "acpgate: cancelled: interrupted")
		return exitcode.Cancelled, lastSeq
	}
	fmt.Fprintln(stderr, "acpgate: protocol: the gateway ended the stream without a terminal event")
	return exitcode.Protocol, lastSeq
}
