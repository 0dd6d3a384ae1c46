package main

// Output for people: a prompt's events (humanSink) and the one-call
// subcommands' answers.

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/outcome"
)

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
	case *acpgatev1.PromptEvent_ElicitationRequested:
		s.split()
		s.note("elicitation: %s", describeElicitation(e.ElicitationRequested))
	}
	// started, usage, available_commands, raw updates and heartbeats
	// (which only say the stream is alive) are shown by --json only.
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
	fmt.Fprintln(s.err, retryNote(e))
}

// retryNote says whether running the same prompt again may end otherwise
// (HarnessError.retryable): what a person decides next.
func retryNote(e *acpgatev1.HarnessError) string {
	if e.GetRetryable() {
		return "· retryable: running the same prompt again may succeed"
	}
	return "· not retryable: the same prompt would end the same way; change it, the agent or its configuration"
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

// The answers of the one-call subcommands (commands.go), for people.

// printAgents prints ListAgents' answer as a table.
func printAgents(stdout io.Writer, resp *acpgatev1.ListAgentsResponse) {
	rows := make([][]string, 0, len(resp.GetAgents()))
	for _, a := range resp.GetAgents() {
		rows = append(rows, []string{oneLine(a.GetName()), firstNonEmpty(oneLine(a.GetDescription()), "-"),
			firstNonEmpty(a.GetPermissionPolicy(), "-"), fsAccess(a), describeWarm(a), describeCapabilities(a.GetCapabilities())})
	}
	printTable(stdout, "no agents configured", []string{"NAME", "DESCRIPTION", "PERMISSIONS", "FS", "WARM", "CAPABILITIES"}, rows)
	for _, a := range resp.GetAgents() {
		if f := a.GetLastStartupFailure(); f != nil {
			fmt.Fprintf(stdout, "%s: last start-up failed at %s: %s\n", oneLine(a.GetName()), f.GetAt().AsTime().Local().Format(time.TimeOnly), oneLine(f.GetMessage()))
		}
	}
}

// describeWarm renders an agent's warm pool: ready of target, and those
// starting; "-" for an agent that keeps none.
func describeWarm(a *acpgatev1.Agent) string {
	if a.GetWarmTarget() == 0 {
		return "-"
	}
	s := fmt.Sprintf("%d/%d ready", a.GetWarmReady(), a.GetWarmTarget())
	if n := a.GetWarmStarting(); n > 0 {
		s += fmt.Sprintf(", %d starting", n)
	}
	return s
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

// printSessions prints ListSessions' answer as a table.
func printSessions(stdout io.Writer, resp *acpgatev1.ListSessionsResponse) {
	rows := make([][]string, 0, len(resp.GetSessions()))
	for _, s := range resp.GetSessions() {
		rows = append(rows, []string{oneLine(s.GetId()), oneLine(s.GetAgent()), stateName(s.GetState()),
			strconv.FormatUint(s.GetTurns(), 10), s.GetCwd()})
	}
	printTable(stdout, "no open sessions", []string{"ID", "AGENT", "STATE", "TURNS", "CWD"}, rows)
}

// turnColumns are the columns of printTurns and the lines of printTurn.
var turnColumns = []string{"TURN", "STATE", "AGENT", "SESSION", "ATTEMPT", "REQUEST", "STARTED", "ENDED", "SEQ", "ENDING"}

// turnCells renders a turn as turnColumns' cells.
func turnCells(t *acpgatev1.Turn) []string {
	return []string{oneLine(t.GetTurnId()), strings.ToLower(strings.TrimPrefix(t.GetState().String(), "TURN_STATE_")),
		oneLine(t.GetAgent()), firstNonEmpty(oneLine(t.GetSessionId()), "-"), strconv.FormatUint(uint64(t.GetAttempt()), 10),
		firstNonEmpty(t.GetRequestId(), "-"), timeCell(t.GetStartedAt()), timeCell(t.GetEndedAt()),
		strconv.FormatUint(t.GetLastSeq(), 10), turnEnding(t)}
}

// turnEnding says how a turn ended: "outcome", or its error's name
// (errorName), marked "(retryable)" where running the prompt again may
// succeed; "-" while it runs.
func turnEnding(t *acpgatev1.Turn) string {
	switch {
	case t.GetTerminal().GetOutcome() != nil:
		return "outcome"
	case t.GetTerminal().GetError() != nil:
		e := t.GetTerminal().GetError()
		if e.GetRetryable() {
			return errorName(e) + " (retryable)"
		}
		return errorName(e)
	}
	return "-"
}

// errorName names an ending error as a person would: "cancelled" and
// "auth_required" for the harness failures that are those (a cancelled turn
// listed as "harness" reads as the agent's failure), its class as
// outcome.Class names it otherwise.
func errorName(e *acpgatev1.HarnessError) string {
	switch h := e.GetHarness(); {
	case h.GetCancelled():
		return "cancelled"
	case h.GetAuthRequired():
		return "auth_required"
	}
	return outcome.Class(e)
}

// timeCell renders a time in UTC to the second, or "-" when it is absent.
func timeCell(ts *timestamppb.Timestamp) string {
	if ts == nil {
		return "-"
	}
	return ts.AsTime().UTC().Format(time.RFC3339)
}

// printTurns prints the turns listed as a table.
func printTurns(stdout io.Writer, resp *acpgatev1.ListTurnsResponse) {
	rows := make([][]string, 0, len(resp.GetTurns()))
	for _, t := range resp.GetTurns() {
		rows = append(rows, turnCells(t))
	}
	printTable(stdout, "no turns", turnColumns, rows)
	if resp.GetNextPageToken() != "" {
		fmt.Fprintln(stdout, "(more turns: --limit 0 lists them all)")
	}
}

// printTurn prints GetTurn's answer, one field a line, and an error
// terminal's message.
func printTurn(stdout io.Writer, t *acpgatev1.Turn) {
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	for i, cell := range turnCells(t) {
		fmt.Fprintf(tw, "%s\t%s\n", strings.ToLower(turnColumns[i]), cell)
	}
	if e := t.GetTerminal().GetError(); e != nil {
		fmt.Fprintf(tw, "message\t%s\n", oneLine(e.GetMessage()))
	}
	_ = tw.Flush()
}

// stateName renders SESSION_STATE_RUNNING as "running".
func stateName(s acpgatev1.SessionState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "SESSION_STATE_"))
}

// printTable prints rows under header in aligned columns, or the line none
// when there are no rows.
func printTable(stdout io.Writer, none string, header []string, rows [][]string) {
	if len(rows) == 0 {
		fmt.Fprintln(stdout, none)
		return
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	for _, cells := range append([][]string{header}, rows...) {
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	_ = tw.Flush()
}

func describeElicitation(r *acpgatev1.ElicitationRequest) string {
	d := r.GetDecision()
	if d == nil {
		return fmt.Sprintf("%q: waiting for a client (request %s)", r.GetMessage(), r.GetRequestId())
	}
	return fmt.Sprintf("%q: %s by %s (%s)", r.GetMessage(), d.GetAction(), d.GetDecidedBy(), d.GetReason())
}
