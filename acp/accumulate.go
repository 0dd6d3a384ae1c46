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
type accumulator struct {
	done    []string
	current strings.Builder
	id      string
	open    bool
}

func (a *accumulator) chunk(c chunkInfo) {
	if a.open && c.messageID != a.id {
		a.split()
	}
	if !a.open {
		a.open, a.id = true, c.messageID
	}
	if c.isText {
		a.current.WriteString(c.text)
	}
}

// split ends the current message, if any.
func (a *accumulator) split() {
	if !a.open {
		return
	}
	a.open = false
	if a.current.Len() == 0 {
		return
	}
	a.done = append(a.done, a.current.String())
	a.current.Reset()
}

// messageSeparator joins a turn's messages in PromptOutcome.text.
const messageSeparator = "\n\n"

// finish ends the turn's last message and returns the turn's text and its
// final message.
func (a *accumulator) finish() (text, final string) {
	a.split()
	if len(a.done) == 0 {
		return "", ""
	}
	return strings.Join(a.done, messageSeparator), a.done[len(a.done)-1]
}
