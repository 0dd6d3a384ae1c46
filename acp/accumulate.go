package acp

import "strings"

// accumulator reassembles the agent's streamed answer into messages.
//
// ACP streams an answer as agent_message_chunk updates and says nothing
// about where one message ends, except through messageId when the agent
// sends one. The rules:
//   - chunks with the same messageId form one message; a changed messageId
//     (including to or from none) starts a new one;
//   - without messageId, a message runs until the agent turns to tools
//     (tool_call, tool_call_update, a permission request) or the turn ends;
//   - thoughts, plans, usage and other informational updates do not split a
//     message, since they are commentary on the same answer;
//   - only text content counts as text; a message with no text is not a
//     message, so no empty entry is ever joined into the result.
//
// Text is kept as the chunks' own strings and joined once, when the turn
// ends: appending to a growing buffer would copy the answer again at every
// doubling, which for a long answer was the largest single cost of a turn.
type accumulator struct {
	done    []message // completed messages with text
	current message
	id      string
	open    bool
}

// message is one message's text, as the chunks that carried it.
type message struct {
	parts []string
	size  int
}

func (a *accumulator) chunk(c chunkInfo) {
	if a.open && c.messageID != a.id {
		a.split()
	}
	if !a.open {
		a.open, a.id = true, c.messageID
	}
	if c.isText && c.text != "" {
		a.current.parts = append(a.current.parts, c.text)
		a.current.size += len(c.text)
	}
}

// split ends the current message, if any.
func (a *accumulator) split() {
	if !a.open {
		return
	}
	a.open = false
	if a.current.size > 0 {
		a.done = append(a.done, a.current)
	}
	a.current = message{}
}

// messageSeparator joins a turn's messages in PromptOutcome.text.
const messageSeparator = "\n\n"

// finish ends the turn's last message and returns the turn's text and its
// final message. The text is built with one copy; the final message is the
// text's own tail, not a second copy.
func (a *accumulator) finish() (text, final string) {
	a.split()
	if len(a.done) == 0 {
		return "", ""
	}
	total := len(messageSeparator) * (len(a.done) - 1)
	for _, m := range a.done {
		total += m.size
	}
	var b strings.Builder
	b.Grow(total)
	for i, m := range a.done {
		if i > 0 {
			b.WriteString(messageSeparator)
		}
		for _, p := range m.parts {
			b.WriteString(p)
		}
	}
	text = b.String()
	last := a.done[len(a.done)-1].size
	a.done = nil
	return text, text[len(text)-last:]
}
