package main

// The client subcommands: prompt, agents, sessions, cancel and version.
//
// Every subcommand except version talks to a running gateway over gRPC
// (plaintext; --addr, default $ACPGATE_ADDR or 127.0.0.1:7070).
//
// # Exit codes
//
// A prompt exits with the code of its terminal event; a call the gateway
// rejected with a non-OK status exits with the status's code class. The
// table is also rendered by exitCodeTable for the README.
//
//	code  meaning
//	   0  success; for prompt, the turn completed (outcome, end_turn)
//	   2  usage error: bad flags or arguments
//	   3  error.transport: the channel to the agent broke
//	   4  error.protocol: the agent broke the ACP wire contract (also: the
//	      gateway ended a Prompt stream without a terminal event)
//	   5  error.harness: the agent reported a failure (not cancelled, not
//	      auth_required); also an error class this client does not know
//	   6  error.policy_refused: the agent refused the prompt
//	   7  error.harness with cancelled: the turn was cancelled (also: the
//	      command was interrupted before the gateway reported an ending)
//	   8  error.harness with auth_required: the agent needs credentials
//	   9  error.capability_not_supported
//	  10  error.stale_target
//	  64  status INVALID_ARGUMENT: the gateway rejected the request
//	  65  status NOT_FOUND, FAILED_PRECONDITION, RESOURCE_EXHAUSTED or any
//	      other non-OK status not listed here
//	  69  status UNAVAILABLE or DEADLINE_EXCEEDED: the gateway (or the agent)
//	      could not be reached, or the gateway is draining
//
// # Interrupting a prompt
//
// The Prompt call runs on its own context, not on the command's ctx, so
// that the cancellation terminal can still be read after ctx is cancelled
// (Ctrl-C). On cancellation:
//
//   - once the turn has started (the `started` event named its session),
//     the client calls Cancel on that session and keeps reading the stream
//     until the gateway sends the terminal event (normally error.harness
//     with cancelled, exit 7). If Cancel fails, or no terminal arrives
//     within clientCancelWait, the call itself is cancelled, which also
//     cancels the turn on the gateway;
//   - before the turn has started, the call itself is cancelled: the gateway
//     abandons the set-up and no turn runs.
//
// Either way an interrupted prompt exits 7 unless the turn ended otherwise
// first.

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
	"unicode"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// Exit codes of the client subcommands; see the package documentation of
// this file and exitCodeTable.
const (
	exitOK                 = 0
	exitUsage              = 2
	exitTransport          = 3
	exitProtocol           = 4
	exitHarness            = 5
	exitPolicyRefused      = 6
	exitCancelled          = 7
	exitAuthRequired       = 8
	exitCapability         = 9
	exitStaleTarget        = 10
	exitInvalidArgument    = 64
	exitRejected           = 65
	exitGatewayUnavailable = 69
)

// exitCodes is the exit-code table, in order; exitCodeTable renders it.
var exitCodes = []struct {
	code    int
	meaning string
}{
	{exitOK, "Success. For `prompt`: the turn completed (`outcome`, `end_turn`)."},
	{exitUsage, "Usage error: bad flags or arguments."},
	{exitTransport, "`error.transport`: the channel to the agent broke."},
	{exitProtocol, "`error.protocol`: the agent broke the ACP wire contract (also: the gateway ended the stream without a terminal event)."},
	{exitHarness, "`error.harness`: the agent reported a failure (neither cancelled nor auth_required); also an error class this client does not know."},
	{exitPolicyRefused, "`error.policy_refused`: the agent refused the prompt."},
	{exitCancelled, "`error.harness` with `cancelled`: the turn was cancelled (also: the command was interrupted before the gateway reported an ending)."},
	{exitAuthRequired, "`error.harness` with `auth_required`: the agent needs credentials configured for the gateway."},
	{exitCapability, "`error.capability_not_supported`: the request needs a capability the agent did not advertise."},
	{exitStaleTarget, "`error.stale_target`: the request's target no longer applies."},
	{exitInvalidArgument, "gRPC status `INVALID_ARGUMENT`: the gateway rejected the request as malformed."},
	{exitRejected, "gRPC status `NOT_FOUND`, `FAILED_PRECONDITION`, `RESOURCE_EXHAUSTED` or any other non-OK status not listed here: no turn ran."},
	{exitGatewayUnavailable, "gRPC status `UNAVAILABLE` or `DEADLINE_EXCEEDED`: the gateway or the agent could not be reached, or the gateway is draining."},
}

// exitCodeTable renders the client's exit codes as a Markdown table.
func exitCodeTable() string {
	var b strings.Builder
	b.WriteString("| exit code | meaning |\n|---|---|\n")
	for _, e := range exitCodes {
		fmt.Fprintf(&b, "| %d | %s |\n", e.code, e.meaning)
	}
	return b.String()
}

// defaultAddr is the gateway address used when --addr is not given and
// ACPGATE_ADDR is empty.
const defaultAddr = "127.0.0.1:7070"

// clientStdin is where `prompt -` reads its text; tests replace it.
var clientStdin io.Reader = os.Stdin

// clientCancelWait is how long an interrupted prompt waits, after asking the
// gateway to cancel the turn, for the terminal event before it abandons the
// call. It exceeds the gateway's default cancel grace (10s) so that the
// gateway's own verdict normally arrives first.
var clientCancelWait = 30 * time.Second

// clientCancelTimeout bounds the Cancel call an interrupted prompt makes.
const clientCancelTimeout = 5 * time.Second

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

// dial returns a client for the gateway at addr.
func dial(addr string, stderr io.Writer) (acpgatev1.AgentGatewayClient, func(), int) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintf(stderr, "acpgate: invalid --addr %q: %v\n", addr, err)
		return nil, nil, exitUsage
	}
	return acpgatev1.NewAgentGatewayClient(conn), func() { _ = conn.Close() }, exitOK
}

// statusExit reports a failed call and returns its exit code. interrupted
// says whether the command's context was cancelled, which explains a
// CANCELED status.
func statusExit(err error, interrupted bool, stderr io.Writer) int {
	st := status.Convert(err)
	if interrupted && (st.Code() == codes.Canceled || st.Code() == codes.DeadlineExceeded) {
		fmt.Fprintln(stderr, "acpgate: cancelled: interrupted")
		return exitCancelled
	}
	fmt.Fprintf(stderr, "acpgate: %s: %s\n", codeName(st.Code()), st.Message())
	for _, d := range st.Details() {
		if he, ok := d.(*acpgatev1.HarnessError); ok {
			label, _ := classify(he)
			fmt.Fprintf(stderr, "acpgate: %s: %s\n", label, he.GetMessage())
			printHarnessExtras(he, stderr)
		}
	}
	switch st.Code() {
	case codes.Unavailable, codes.DeadlineExceeded:
		return exitGatewayUnavailable
	case codes.InvalidArgument:
		return exitInvalidArgument
	default:
		return exitRejected
	}
}

// codeName is the canonical name of a gRPC code, for example
// "FAILED_PRECONDITION".
func codeName(c codes.Code) string {
	s := c.String()
	if c > codes.Unauthenticated || s == "OK" {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		if i > 0 && unicode.IsUpper(r) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String()
}

// classify names a HarnessError's class and its exit code.
func classify(e *acpgatev1.HarnessError) (label string, code int) {
	switch k := e.GetKind().(type) {
	case *acpgatev1.HarnessError_Transport:
		return "transport", exitTransport
	case *acpgatev1.HarnessError_Protocol:
		return "protocol", exitProtocol
	case *acpgatev1.HarnessError_Harness:
		switch {
		case k.Harness.GetCancelled():
			return "harness", exitCancelled
		case k.Harness.GetAuthRequired():
			return "harness", exitAuthRequired
		}
		return "harness", exitHarness
	case *acpgatev1.HarnessError_PolicyRefused:
		return "policy_refused", exitPolicyRefused
	case *acpgatev1.HarnessError_CapabilityNotSupported:
		return "capability_not_supported", exitCapability
	case *acpgatev1.HarnessError_StaleTarget:
		return "stale_target", exitStaleTarget
	}
	return "error", exitHarness
}

// printHarnessExtras prints what a HarnessError carries beyond its message
// that helps a person: the agent's stderr tail.
func printHarnessExtras(e *acpgatev1.HarnessError, stderr io.Writer) {
	tail := strings.TrimRight(e.GetTransport().GetStderrTail(), "\n")
	if tail == "" {
		return
	}
	fmt.Fprintln(stderr, "· agent stderr (last lines):")
	for _, line := range strings.Split(tail, "\n") {
		fmt.Fprintf(stderr, "  | %s\n", line)
	}
}

// ---------------------------------------------------------------- prompt

func runPrompt(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("prompt", "[--addr ADDR] (--agent NAME | --session ID) [--json] [--cwd DIR] TEXT... | -",
		`Runs one prompt turn and streams it. The agent's answer goes to stdout as it
arrives (exactly the turn's outcome text, plus a final newline); thoughts,
tool calls, plans and permission decisions go to stderr. TEXT is the prompt;
"-" reads it from stdin. With --json, every event is printed to stdout as one
protojson line and nothing else is printed to stdout.`, stderr)
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

// streamPrompt runs the Prompt call and shows its events; see "Interrupting
// a prompt" above for how ctx's cancellation is handled.
func streamPrompt(ctx context.Context, client acpgatev1.AgentGatewayClient, req *acpgatev1.PromptRequest, sink eventSink, stderr io.Writer) int {
	rpcCtx, rpcCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer rpcCancel()

	started := make(chan string, 1) // the session id, once the turn started
	done := make(chan struct{})     // closed when the stream has ended
	var watcher sync.WaitGroup
	watcher.Go(func() {
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		var sessionID string
		select {
		case sessionID = <-started:
		default:
		}
		if sessionID == "" {
			rpcCancel()
			return
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), clientCancelTimeout)
		_, err := client.Cancel(cctx, &acpgatev1.CancelRequest{SessionId: sessionID})
		cancel()
		if err != nil {
			rpcCancel()
			return
		}
		timer := time.NewTimer(clientCancelWait)
		defer timer.Stop()
		select {
		case <-done:
		case <-timer.C:
			rpcCancel()
		}
	})
	defer func() {
		close(done)
		watcher.Wait()
	}()

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
			select {
			case started <- ev.GetStarted().GetSessionId():
			default:
			}
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

// jsonSink prints every event as one protojson line.
// stdout receives nothing else; an error terminal is also reported on
// stderr, as in human mode, for a person watching a pipeline.
type jsonSink struct {
	out, err io.Writer
}

func (s *jsonSink) event(ev *acpgatev1.PromptEvent)   { writeJSONLine(s.out, ev) }
func (s *jsonSink) outcome(ev *acpgatev1.PromptEvent) { writeJSONLine(s.out, ev) }
func (s *jsonSink) failed(ev *acpgatev1.PromptEvent, label string) {
	writeJSONLine(s.out, ev)
	fmt.Fprintf(s.err, "acpgate: %s: %s\n", label, ev.GetError().GetMessage())
}
func (s *jsonSink) abort() {}

// writeJSONLine prints m as one protojson line.
func writeJSONLine(w io.Writer, m proto.Message) {
	b, err := protojson.MarshalOptions{}.Marshal(m)
	if err != nil {
		// Only an invalid message fails to marshal; say so on the line
		// rather than dropping it.
		b = []byte(strconv.Quote(err.Error()))
	}
	b = bytes.ReplaceAll(b, []byte("\n"), nil)
	b = append(b, '\n')
	_, _ = w.Write(b)
}

// humanSink prints the agent's answer to stdout and everything else, one
// "· "-prefixed note per line, to stderr.
//
// stdout receives exactly the text PromptOutcome.text is made of: the
// agent's text chunks, with "\n\n" between messages, where messages split by
// the gateway's rules (a changed message_id, including to or from none, or
// the agent turning to tools). At the end a newline is added if the text
// does not end with one.
type humanSink struct {
	out, err io.Writer

	// Message splitting, as the gateway's accumulator does it.
	open       bool   // a message is in progress
	id         string // its message_id
	curHasText bool   // the current message printed text
	messages   int    // messages that printed text
	outLast    byte   // the last byte written to stdout
	outAny     bool   // something was written to stdout

	run       string // the open run of stderr text ("thinking", "user"), if any
	runLast   byte   // the last byte of the open run
	lineBroke bool   // stderr already broke the line stdout is on

	tools map[string]string // tool call id → title
}

func newHumanSink(out, err io.Writer) *humanSink {
	return &humanSink{out: out, err: err, tools: map[string]string{}}
}

// split ends the current message.
func (s *humanSink) split() { s.open, s.curHasText = false, false }

// writeOut prints answer text to stdout.
func (s *humanSink) writeOut(text string) {
	if text == "" {
		return
	}
	s.closeRun()
	_, _ = io.WriteString(s.out, text)
	s.outLast, s.outAny, s.lineBroke = text[len(text)-1], true, false
}

// endOut ends stdout with a newline.
func (s *humanSink) endOut() {
	s.closeRun()
	if s.outAny && s.outLast != '\n' {
		s.writeOut("\n")
	}
}

// breakLine starts stderr text on a fresh line while stdout is in the middle
// of a line, so that a terminal showing both does not glue a note to the
// answer. It writes only to stderr (stdout stays exactly the answer); when
// stderr goes elsewhere, the cost is an empty line there.
func (s *humanSink) breakLine() {
	if s.outAny && s.outLast != '\n' && !s.lineBroke {
		_, _ = io.WriteString(s.err, "\n")
		s.lineBroke = true
	}
}

// note prints one line to stderr.
func (s *humanSink) note(format string, a ...any) {
	s.closeRun()
	s.breakLine()
	fmt.Fprintf(s.err, "· "+format+"\n", a...)
}

// runText appends streamed text (thoughts, user chunks) to stderr, under
// one prefix per run.
func (s *humanSink) runText(kind, text string) {
	if text == "" {
		return
	}
	if s.run != kind {
		s.closeRun()
		s.breakLine()
		fmt.Fprintf(s.err, "· %s: ", kind)
		s.run = kind
	}
	_, _ = io.WriteString(s.err, text)
	s.runLast = text[len(text)-1]
}

// closeRun ends an open run of stderr text with a newline.
func (s *humanSink) closeRun() {
	if s.run == "" {
		return
	}
	if s.runLast != '\n' {
		_, _ = io.WriteString(s.err, "\n")
	}
	s.run = ""
}

func (s *humanSink) event(ev *acpgatev1.PromptEvent) {
	switch e := ev.GetEvent().(type) {
	case *acpgatev1.PromptEvent_AgentMessageChunk:
		c := e.AgentMessageChunk
		if s.open && c.GetMessageId() != s.id {
			s.split()
		}
		if !s.open {
			s.open, s.id = true, c.GetMessageId()
		}
		if c.GetText() == "" {
			if d := describeContent(c.GetContent()); d != "" {
				s.note("agent sent %s", d)
			}
			return
		}
		if !s.curHasText {
			if s.messages > 0 {
				s.writeOut("\n\n")
			}
			s.messages++
			s.curHasText = true
		}
		s.writeOut(c.GetText())
	case *acpgatev1.PromptEvent_AgentThoughtChunk:
		s.runText("thinking", e.AgentThoughtChunk.GetText())
	case *acpgatev1.PromptEvent_UserMessageChunk:
		s.runText("user", e.UserMessageChunk.GetText())
	case *acpgatev1.PromptEvent_ToolCall:
		s.split()
		tc := e.ToolCall
		title := firstNonEmpty(tc.GetTitle(), tc.GetKind(), tc.GetToolCallId())
		s.tools[tc.GetToolCallId()] = title
		s.note("tool: %s%s", title, bracket(tc.GetStatus()))
	case *acpgatev1.PromptEvent_ToolCallUpdate:
		s.split()
		u := e.ToolCallUpdate
		if u.Title == nil && u.Status == nil {
			return // a content-only update
		}
		title := firstNonEmpty(u.GetTitle(), s.tools[u.GetToolCallId()], u.GetToolCallId())
		s.tools[u.GetToolCallId()] = title
		s.note("tool: %s%s", title, bracket(u.GetStatus()))
	case *acpgatev1.PromptEvent_Plan:
		s.note("plan: %s", describePlan(e.Plan))
	case *acpgatev1.PromptEvent_PermissionRequested:
		s.split()
		s.note("permission: %s", s.describePermission(e.PermissionRequested))
	case *acpgatev1.PromptEvent_CurrentMode:
		s.note("mode: %s", e.CurrentMode.GetModeId())
	}
	// started, usage, available_commands and raw updates are shown by
	// --json only.
}

func (s *humanSink) outcome(ev *acpgatev1.PromptEvent) {
	o := ev.GetOutcome()
	if s.messages == 0 && o.GetText() != "" {
		// The gateway's text is the answer; show it even if its chunks
		// were not streamed.
		s.writeOut(o.GetText())
	}
	s.endOut()
	fmt.Fprintf(s.err, "· end_turn (session %s)\n", o.GetSessionId())
}

func (s *humanSink) failed(ev *acpgatev1.PromptEvent, label string) {
	s.endOut()
	e := ev.GetError()
	fmt.Fprintf(s.err, "acpgate: %s: %s\n", label, e.GetMessage())
	printHarnessExtras(e, s.err)
}

func (s *humanSink) abort() { s.endOut() }

func (s *humanSink) describePermission(p *acpgatev1.PermissionRequest) string {
	tc := p.GetToolCall()
	title := firstNonEmpty(tc.GetTitle(), s.tools[tc.GetToolCallId()], tc.GetToolCallId(), "a tool call")
	d := p.GetDecision()
	if d == nil {
		opts := make([]string, 0, len(p.GetOptions()))
		for _, o := range p.GetOptions() {
			opts = append(opts, fmt.Sprintf("%s=%s", o.GetKind(), o.GetOptionId()))
		}
		return fmt.Sprintf("%s: waiting for a client (request %s; options %s)",
			title, p.GetRequestId(), strings.Join(opts, ", "))
	}
	answer := "cancelled"
	if !d.GetCancelled() {
		answer = d.GetOptionId()
		for _, o := range p.GetOptions() {
			if o.GetOptionId() == d.GetOptionId() {
				answer = firstNonEmpty(o.GetName(), o.GetOptionId())
				if o.GetKind() != "" {
					answer += " (" + o.GetKind() + ")"
				}
				break
			}
		}
	}
	by := strings.ToLower(strings.TrimPrefix(d.GetDecidedBy().String(), "PERMISSION_DECIDER_"))
	if d.GetReason() != "" {
		by += ": " + d.GetReason()
	}
	return fmt.Sprintf("%s → %s, by %s", title, answer, by)
}

func describePlan(p *acpgatev1.Plan) string {
	if len(p.GetEntries()) == 0 {
		return "(empty)"
	}
	parts := make([]string, 0, len(p.GetEntries()))
	for _, e := range p.GetEntries() {
		parts = append(parts, fmt.Sprintf("[%s] %s", firstNonEmpty(e.GetStatus(), "pending"), oneLine(e.GetContent())))
	}
	return strings.Join(parts, "; ")
}

func describeContent(c *acpgatev1.ContentBlock) string {
	switch b := c.GetBlock().(type) {
	case *acpgatev1.ContentBlock_Image:
		return "an image (" + firstNonEmpty(b.Image.GetMimeType(), "unknown type") + ")"
	case *acpgatev1.ContentBlock_Audio:
		return "audio (" + firstNonEmpty(b.Audio.GetMimeType(), "unknown type") + ")"
	case *acpgatev1.ContentBlock_ResourceLink:
		return "a link to " + b.ResourceLink.GetUri()
	case *acpgatev1.ContentBlock_Resource:
		return "a resource " + b.Resource.GetUri()
	}
	return ""
}

func bracket(s string) string {
	if s == "" {
		return ""
	}
	return " [" + s + "]"
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// oneLine makes s fit on one line of a table or note.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// ---------------------------------------------------------------- agents

func runAgents(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("agents", "[--addr ADDR] [--json]", "Lists the configured agents.", stderr)
	addr := addrFlag(fs)
	asJSON := fs.Bool("json", false, "print the response as one protojson line")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() != 0 {
		return usageError(fs, stderr, "agents takes no arguments")
	}
	client, closeConn, code := dial(*addr, stderr)
	if code != exitOK {
		return code
	}
	defer closeConn()
	resp, err := client.ListAgents(ctx, &acpgatev1.ListAgentsRequest{})
	if err != nil {
		return statusExit(err, ctx.Err() != nil, stderr)
	}
	if *asJSON {
		writeJSONLine(stdout, resp)
		return exitOK
	}
	if len(resp.GetAgents()) == 0 {
		fmt.Fprintln(stdout, "no agents configured")
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tDESCRIPTION\tPERMISSIONS\tFS\tCAPABILITIES")
	for _, a := range resp.GetAgents() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n",
			oneLine(a.GetName()), firstNonEmpty(oneLine(a.GetDescription()), "-"),
			firstNonEmpty(a.GetPermissionPolicy(), "-"), fsAccess(a), describeCapabilities(a.GetCapabilities()))
	}
	_ = tw.Flush()
	return exitOK
}

// fsAccess renders an agent's file-system access as "r/w", "r/-", "-/-"...
func fsAccess(a *acpgatev1.Agent) string {
	r, w := "-", "-"
	if a.GetFsRead() {
		r = "r"
	}
	if a.GetFsWrite() {
		w = "w"
	}
	return r + "/" + w
}

// describeCapabilities renders what the agent advertised, or says it is not
// known yet.
func describeCapabilities(c *acpgatev1.AgentCapabilities) string {
	if c == nil {
		return "(unknown until a session starts)"
	}
	parts := []string{fmt.Sprintf("acp v%d", c.GetProtocolVersion())}
	if c.GetAgentName() != "" {
		id := c.GetAgentName()
		if c.GetAgentVersion() != "" {
			id += " " + c.GetAgentVersion()
		}
		parts = append(parts, oneLine(id))
	}
	var feats []string
	for _, f := range []struct {
		on   bool
		name string
	}{
		{c.GetLoadSession(), "load"},
		{c.GetPromptImage(), "image"},
		{c.GetPromptAudio(), "audio"},
		{c.GetPromptEmbeddedContext(), "context"},
	} {
		if f.on {
			feats = append(feats, f.name)
		}
	}
	if len(feats) > 0 {
		parts = append(parts, strings.Join(feats, ","))
	}
	if len(c.GetAuthMethods()) > 0 {
		parts = append(parts, "auth: "+strings.Join(c.GetAuthMethods(), ","))
	}
	return strings.Join(parts, "; ")
}

// -------------------------------------------------------------- sessions

func runSessions(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("sessions", "[--addr ADDR] [--json]", "Lists the open sessions.", stderr)
	addr := addrFlag(fs)
	asJSON := fs.Bool("json", false, "print the response as one protojson line")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() != 0 {
		return usageError(fs, stderr, "sessions takes no arguments")
	}
	client, closeConn, code := dial(*addr, stderr)
	if code != exitOK {
		return code
	}
	defer closeConn()
	resp, err := client.ListSessions(ctx, &acpgatev1.ListSessionsRequest{})
	if err != nil {
		return statusExit(err, ctx.Err() != nil, stderr)
	}
	if *asJSON {
		writeJSONLine(stdout, resp)
		return exitOK
	}
	if len(resp.GetSessions()) == 0 {
		fmt.Fprintln(stdout, "no open sessions")
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tAGENT\tSTATE\tTURNS\tCWD")
	for _, s := range resp.GetSessions() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n",
			oneLine(s.GetId()), oneLine(s.GetAgent()), stateName(s.GetState()), s.GetTurns(), s.GetCwd())
	}
	_ = tw.Flush()
	return exitOK
}

// stateName renders SESSION_STATE_RUNNING as "running".
func stateName(s acpgatev1.SessionState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "SESSION_STATE_"))
}

// ---------------------------------------------------------------- cancel

func runCancel(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("cancel", "[--addr ADDR] SESSION_ID", "Cancels the turn running on a session.", stderr)
	addr := addrFlag(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 || fs.Arg(0) == "" {
		return usageError(fs, stderr, "give exactly one SESSION_ID")
	}
	id := fs.Arg(0)
	client, closeConn, code := dial(*addr, stderr)
	if code != exitOK {
		return code
	}
	defer closeConn()
	resp, err := client.Cancel(ctx, &acpgatev1.CancelRequest{SessionId: id})
	if err != nil {
		return statusExit(err, ctx.Err() != nil, stderr)
	}
	if resp.GetCancelled() {
		fmt.Fprintf(stdout, "session %s: the running turn was asked to cancel\n", id)
	} else {
		fmt.Fprintf(stdout, "session %s: no turn was running\n", id)
	}
	return exitOK
}

// ---------------------------------------------------------------- open, close, permit

func runOpen(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("open", "[--addr ADDR] --agent NAME [--cwd DIR] [--load SESSION_ID] [--json]",
		"Opens a session on an agent and prints its id, for prompt --session, cancel, permit and close.", stderr)
	addr := addrFlag(fs)
	agent := fs.String("agent", "", "the configured agent")
	cwd := fs.String("cwd", "", "the working directory, relative to the agent's workspace")
	load := fs.String("load", "", "resume this ACP session (session/load), when the agent supports it")
	asJSON := fs.Bool("json", false, "print the Session as one protojson line")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() != 0 {
		return usageError(fs, stderr, "open takes no arguments")
	}
	if *agent == "" {
		return usageError(fs, stderr, "--agent is required")
	}
	client, closeConn, code := dial(*addr, stderr)
	if code != exitOK {
		return code
	}
	defer closeConn()
	sess, err := client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: *agent, Cwd: *cwd, LoadSessionId: *load})
	if err != nil {
		return statusExit(err, ctx.Err() != nil, stderr)
	}
	if *asJSON {
		writeJSONLine(stdout, sess)
		return exitOK
	}
	fmt.Fprintln(stdout, sess.GetId())
	return exitOK
}

func runClose(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("close", "[--addr ADDR] SESSION_ID", "Closes a session and stops its agent.", stderr)
	addr := addrFlag(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 || fs.Arg(0) == "" {
		return usageError(fs, stderr, "give exactly one SESSION_ID")
	}
	client, closeConn, code := dial(*addr, stderr)
	if code != exitOK {
		return code
	}
	defer closeConn()
	if _, err := client.CloseSession(ctx, &acpgatev1.CloseSessionRequest{SessionId: fs.Arg(0)}); err != nil {
		return statusExit(err, ctx.Err() != nil, stderr)
	}
	fmt.Fprintf(stdout, "session %s: closed\n", fs.Arg(0))
	return exitOK
}

func runPermit(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("permit", "[--addr ADDR] SESSION_ID REQUEST_ID [OPTION_ID]",
		"Answers a permission request of a running turn (the ask policy) with one of its options; without OPTION_ID the request is cancelled.", stderr)
	addr := addrFlag(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if n := fs.NArg(); n < 2 || n > 3 || fs.Arg(0) == "" || fs.Arg(1) == "" {
		return usageError(fs, stderr, "give SESSION_ID, REQUEST_ID and, to choose an option, OPTION_ID")
	}
	client, closeConn, code := dial(*addr, stderr)
	if code != exitOK {
		return code
	}
	defer closeConn()
	req := &acpgatev1.ResolvePermissionRequest{SessionId: fs.Arg(0), RequestId: fs.Arg(1), OptionId: fs.Arg(2)}
	if _, err := client.ResolvePermission(ctx, req); err != nil {
		return statusExit(err, ctx.Err() != nil, stderr)
	}
	answer := "cancelled"
	if req.GetOptionId() != "" {
		answer = "option " + req.GetOptionId()
	}
	fmt.Fprintf(stdout, "session %s: permission request %s answered: %s\n", req.GetSessionId(), req.GetRequestId(), answer)
	return exitOK
}
