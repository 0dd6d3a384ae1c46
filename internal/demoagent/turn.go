package demoagent

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	acp "github.com/coder/acp-go-sdk"
)

// Mode names, which are also the keywords (except modeDefault).
const (
	modeRefuse   = "refuse"
	modeTruncate = "truncate"
	modeLoop     = "loop"
	modeSlow     = "slow"
	modeFail     = "fail"
	modeTools    = "tools"
	modeRead     = "read"
	modeThink    = "think"
	modeDefault  = "default"
)

// keywords in precedence order: the first that matches wins.
var keywords = []struct {
	name string
	re   *regexp.Regexp
}{
	{modeRefuse, wordRE(modeRefuse)},
	{modeTruncate, wordRE(modeTruncate)},
	{modeLoop, wordRE(modeLoop)},
	{modeSlow, wordRE(modeSlow)},
	{modeFail, wordRE(modeFail)},
	{modeTools, wordRE(modeTools)},
	// read needs a path: the next whitespace-separated token.
	{modeRead, regexp.MustCompile(`(?i)\bread\s+(\S+)`)},
	{modeThink, wordRE(modeThink)},
}

func wordRE(word string) *regexp.Regexp {
	return regexp.MustCompile(`(?i)\b` + regexp.QuoteMeta(word) + `\b`)
}

// The fixed texts of the turns.
const (
	refuseText   = "I can't help with that."
	truncateText = "Here is a long answer. It starts well and keeps going for a while, " +
		"but the demo agent cuts it short before the end, as if it had run out of"
	failMessage   = "the demo agent was asked to fail"
	keywordsText  = "refuse, truncate, loop, slow, fail, tools, read <path>, think"
	keywordsReply = "I am the acpgate demo agent. Put one of these words in a prompt " +
		"to choose how the turn goes: " + keywordsText + ". Anything else gets this answer."
	thought1 = "The prompt asks me to think first, so here is my reasoning. "
	thought2 = "Nothing in it needs a tool; a plain answer will do."
	// echoLimit caps how much of the request the default turn echoes, in
	// characters.
	echoLimit = 200
	// firstLineLimit caps the first line quoted by the read turn.
	firstLineLimit = 80
	// wordsPerChunk is how many words each message chunk carries.
	wordsPerChunk = 3
	slowTicks     = 60
	slowTick      = time.Second
)

// mode is the turn a request asks for.
type mode struct {
	name     string
	readPath string // for modeRead: the path as written in the request
}

// classify picks the turn for a request.
func classify(request string) mode {
	for _, k := range keywords {
		sub := k.re.FindStringSubmatch(request)
		if sub == nil {
			continue
		}
		if k.name != modeRead {
			return mode{name: k.name}
		}
		if p := cleanPath(sub[1]); p != "" {
			return mode{name: modeRead, readPath: p}
		}
	}
	return mode{name: modeDefault}
}

// cleanPath strips quotes and trailing punctuation from a path token.
func cleanPath(tok string) string {
	tok = strings.Trim(tok, "\"'`“”‘’")
	tok = strings.TrimRight(tok, ",;:!?)")
	return strings.Trim(tok, "\"'`“”‘’")
}

// promptText joins the prompt's text blocks: the request the turn answers.
func promptText(blocks []acp.ContentBlock) string {
	var parts []string
	for _, b := range blocks {
		if b.Text != nil {
			parts = append(parts, b.Text.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// turn is one running session/prompt.
type turn struct {
	a      *agent
	ctx    context.Context
	cancel context.CancelFunc
	sid    acp.SessionId
	sess   *session
	cwd    string
	sent   bool // an update was sent: pace the next one
}

// play runs the turn for mode m and returns its stop reason. A non-nil error
// is either the answer itself (fail) or a failure to talk to the client.
func (t *turn) play(m mode, request string) (acp.StopReason, error) {
	switch m.name {
	case modeRefuse:
		return acp.StopReasonRefusal, t.stream([]string{refuseText}) // one short chunk
	case modeTruncate:
		return acp.StopReasonMaxTokens, t.message(truncateText)
	case modeLoop:
		return acp.StopReasonMaxTurnRequests, t.loop()
	case modeSlow:
		return acp.StopReasonEndTurn, t.slow()
	case modeFail:
		return "", &acp.RequestError{Code: -32603, Message: failMessage}
	case modeTools:
		return acp.StopReasonEndTurn, t.tools()
	case modeRead:
		return acp.StopReasonEndTurn, t.read(m.readPath)
	case modeThink:
		id := newMessageID()
		for _, th := range []string{thought1, thought2} {
			if err := t.send(acp.SessionUpdate{AgentThoughtChunk: &acp.SessionUpdateAgentThoughtChunk{
				Content:   acp.TextBlock(th),
				MessageId: &id,
			}}); err != nil {
				return "", err
			}
		}
		return acp.StopReasonEndTurn, t.answer(request)
	default:
		return acp.StopReasonEndTurn, t.answer(request)
	}
}

// answer is the default turn: a plan and two messages.
func (t *turn) answer(request string) error {
	plan := []acp.PlanEntry{
		{Content: "Read the prompt", Priority: acp.PlanEntryPriorityHigh, Status: acp.PlanEntryStatusInProgress},
		{Content: "Echo the prompt back", Priority: acp.PlanEntryPriorityMedium, Status: acp.PlanEntryStatusPending},
		{Content: "Explain the keywords", Priority: acp.PlanEntryPriorityLow, Status: acp.PlanEntryStatusPending},
	}
	if err := t.plan(plan); err != nil {
		return err
	}
	plan[0].Status, plan[1].Status = acp.PlanEntryStatusCompleted, acp.PlanEntryStatusInProgress
	if err := t.plan(plan); err != nil {
		return err
	}
	if err := t.message(echo(request)); err != nil {
		return err
	}
	plan[1].Status, plan[2].Status = acp.PlanEntryStatusCompleted, acp.PlanEntryStatusInProgress
	if err := t.plan(plan); err != nil {
		return err
	}
	if err := t.message(keywordsReply); err != nil {
		return err
	}
	plan[2].Status = acp.PlanEntryStatusCompleted
	return t.plan(plan)
}

func echo(request string) string {
	request = strings.TrimSpace(request)
	if request == "" {
		return "You sent no text."
	}
	return `You said: "` + cut(request, echoLimit) + `"`
}

// loop plans, calls a tool twice without getting anywhere, and stops.
func (t *turn) loop() error {
	plan := []acp.PlanEntry{
		{Content: "Look for the answer", Priority: acp.PlanEntryPriorityHigh, Status: acp.PlanEntryStatusInProgress},
		{Content: "Look again", Priority: acp.PlanEntryPriorityMedium, Status: acp.PlanEntryStatusPending},
		{Content: "Write the answer", Priority: acp.PlanEntryPriorityMedium, Status: acp.PlanEntryStatusPending},
	}
	if err := t.plan(plan); err != nil {
		return err
	}
	for attempt := 1; attempt <= 2; attempt++ {
		id := t.a.nextToolCallID(t.sess)
		if err := t.send(acp.StartToolCall(id, fmt.Sprintf("Looking for the answer (attempt %d)", attempt),
			acp.WithStartKind(acp.ToolKindSearch),
			acp.WithStartStatus(acp.ToolCallStatusInProgress),
			acp.WithStartRawInput(map[string]any{"attempt": attempt}),
		)); err != nil {
			return err
		}
		if err := t.send(acp.UpdateToolCall(id,
			acp.WithUpdateStatus(acp.ToolCallStatusCompleted),
			acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock("Nothing found; trying again."))}),
		)); err != nil {
			return err
		}
		if attempt == 1 {
			plan[0].Status, plan[1].Status = acp.PlanEntryStatusCompleted, acp.PlanEntryStatusInProgress
			if err := t.plan(plan); err != nil {
				return err
			}
		}
	}
	return nil
}

// slow streams one chunk per slowTick, slowTicks times.
func (t *turn) slow() error {
	id := newMessageID()
	for i := 1; i <= slowTicks; i++ {
		if i > 1 {
			if err := sleep(t.ctx, slowTick); err != nil {
				return err
			}
		}
		if err := t.emit(acp.SessionUpdate{AgentMessageChunk: &acp.SessionUpdateAgentMessageChunk{
			Content:   acp.TextBlock(fmt.Sprintf("Slow chunk %d of %d. ", i, slowTicks)),
			MessageId: &id,
		}}); err != nil {
			return err
		}
	}
	return nil
}

// tools is a turn of one tool call and no text.
func (t *turn) tools() error {
	id := t.a.nextToolCallID(t.sess)
	if err := t.send(acp.StartToolCall(id, "Listing the demo agent's keywords",
		acp.WithStartKind(acp.ToolKindOther),
		acp.WithStartStatus(acp.ToolCallStatusInProgress),
	)); err != nil {
		return err
	}
	return t.send(acp.UpdateToolCall(id,
		acp.WithUpdateStatus(acp.ToolCallStatusCompleted),
		acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock(keywordsText))}),
		acp.WithUpdateRawOutput(map[string]any{"keywords": []string{
			modeRefuse, modeTruncate, modeLoop, modeSlow, modeFail, modeTools, modeRead, modeThink,
		}}),
	))
}

// read asks the client for a file and summarises it.
func (t *turn) read(rel string) error {
	if !t.a.canReadFiles() {
		return t.message(fmt.Sprintf("I can't read %s: the client did not offer fs/read_text_file "+
			"(clientCapabilities.fs.readTextFile) when it initialized the connection.", rel))
	}
	abs := rel
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(t.cwd, rel)
	}
	id := t.a.nextToolCallID(t.sess)
	if err := t.send(acp.StartReadToolCall(id, "Reading "+rel, abs,
		acp.WithStartStatus(acp.ToolCallStatusInProgress))); err != nil {
		return err
	}
	resp, err := t.a.conn.ReadTextFile(t.ctx, acp.ReadTextFileRequest{SessionId: t.sid, Path: abs})
	if err != nil {
		if t.ctx.Err() != nil {
			return t.ctx.Err()
		}
		why := describeClientError(err)
		if uerr := t.send(acp.UpdateToolCall(id,
			acp.WithUpdateStatus(acp.ToolCallStatusFailed),
			acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock(why))}),
		)); uerr != nil {
			return uerr
		}
		return t.message(fmt.Sprintf("I couldn't read %s: %s.", rel, why))
	}
	n, first := summarize(resp.Content)
	if err := t.send(acp.UpdateToolCall(id,
		acp.WithUpdateStatus(acp.ToolCallStatusCompleted),
		acp.WithUpdateRawOutput(map[string]any{"lines": n}),
	)); err != nil {
		return err
	}
	if n == 0 {
		return t.message(rel + " is empty.")
	}
	unit := "lines"
	if n == 1 {
		unit = "line"
	}
	return t.message(fmt.Sprintf("%s has %d %s; first line: %s", rel, n, unit, first))
}

// summarize counts a text's lines (a final newline does not start a line)
// and returns its first line, cut to firstLineLimit characters.
func summarize(content string) (lines int, first string) {
	if content == "" {
		return 0, ""
	}
	lines = strings.Count(content, "\n")
	if !strings.HasSuffix(content, "\n") {
		lines++
	}
	first, _, _ = strings.Cut(content, "\n")
	first = strings.TrimSuffix(first, "\r")
	if strings.TrimSpace(first) == "" {
		return lines, "(blank)"
	}
	return lines, cut(first, firstLineLimit)
}

// describeClientError says why the client's fs/read_text_file failed.
func describeClientError(err error) string {
	var re *acp.RequestError
	if !errors.As(err, &re) {
		return "the request failed: " + err.Error()
	}
	s := fmt.Sprintf("the client answered with error %d (%s", re.Code, re.Message)
	if m, ok := re.Data.(map[string]any); ok {
		if d, ok := m["error"].(string); ok && d != "" {
			s += ": " + d
		}
	}
	return s + ")"
}

// message streams text as one agent message, a few words per chunk.
func (t *turn) message(text string) error {
	return t.stream(chunks(text, wordsPerChunk))
}

// stream sends the chunks of one agent message under a fresh messageId.
func (t *turn) stream(chunks []string) error {
	id := newMessageID()
	for _, c := range chunks {
		if err := t.send(acp.SessionUpdate{AgentMessageChunk: &acp.SessionUpdateAgentMessageChunk{
			Content:   acp.TextBlock(c),
			MessageId: &id,
		}}); err != nil {
			return err
		}
	}
	return nil
}

func (t *turn) plan(entries []acp.PlanEntry) error {
	return t.send(acp.UpdatePlan(append([]acp.PlanEntry(nil), entries...)...))
}

// send paces and emits an update: every update of a turn after the first
// waits the chunk delay.
func (t *turn) send(u acp.SessionUpdate) error {
	if t.sent {
		if err := sleep(t.ctx, t.a.delay); err != nil {
			return err
		}
	}
	return t.emit(u)
}

// emit sends an update now.
func (t *turn) emit(u acp.SessionUpdate) error {
	if err := t.ctx.Err(); err != nil {
		return err
	}
	t.sent = true
	return t.a.conn.SessionUpdate(t.ctx, acp.SessionNotification{SessionId: t.sid, Update: u})
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// chunks splits text after every n-th space; the chunks join back to text.
func chunks(text string, n int) []string {
	parts := strings.SplitAfter(text, " ")
	var out []string
	for i := 0; i < len(parts); i += n {
		if c := strings.Join(parts[i:min(i+n, len(parts))], ""); c != "" {
			out = append(out, c)
		}
	}
	return out
}

// cut shortens s to at most limit characters, marking a cut with "…".
func cut(s string, limit int) string {
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	r := []rune(s)
	return string(r[:limit-1]) + "…"
}
