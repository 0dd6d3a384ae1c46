package outcome

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// Every message the gateway words about a turn's ending is worded in this
// file, once. Clients branch on HarnessError's kind, but people read the
// message: the same failure must read the same way whichever code path
// produced it.

// CancelledPrefix starts the message of every cancelled turn, whatever
// cancelled it. It is part of the contract (documented on
// acpgatev1.HarnessFailure.cancelled) so clients that match on text rather
// than on the cancelled flag can rely on it too.
const CancelledPrefix = "the prompt turn was cancelled"

// MessagePartialBytes bounds the partial output quoted in an error message.
//
// It bounds a message, not the data: PartialOutput.text carries the whole
// partial (up to the interpreter's cap). The bound only keeps an enormous
// partial answer from bloating logs and status lines that show the message.
const MessagePartialBytes = 4000

// messageResultBytes bounds an off-contract result quoted in a protocol
// violation message; the point is to show its shape, not to carry it.
const messageResultBytes = 512

func refusedMessage(method string) string {
	return fmt.Sprintf("the agent refused the prompt: %s answered stopReason %q", method, "refusal")
}

func stoppedShortMessage(method, label string) string {
	return fmt.Sprintf("the prompt turn stopped before completing: %s answered stopReason %q", method, label)
}

func cancelledMessage(method, cause string) string {
	return fmt.Sprintf("%s%s: %s answered stopReason %q", CancelledPrefix, causeSuffix(cause), method, "cancelled")
}

func cancelledByErrorMessage(method, cause string, code int64, agentMessage string) string {
	return fmt.Sprintf("%s%s: the agent answered %s with error code %d (%s) instead of stopReason %q",
		CancelledPrefix, causeSuffix(cause), method, code, agentMessage, "cancelled")
}

func cancelGraceExpiredMessage(grace time.Duration, cause string) string {
	return fmt.Sprintf("%s%s: the agent did not acknowledge session/cancel within the grace period of %s and was stopped",
		CancelledPrefix, causeSuffix(cause), grace)
}

func causeSuffix(cause string) string {
	if cause == "" {
		return ""
	}
	return " (" + cause + ")"
}

func authRequiredMessage(method string, code int64, agentMessage string) string {
	return fmt.Sprintf("the agent requires authentication: %s failed with code %d (%s); "+
		"an unattended gateway cannot complete an interactive login, so the agent's credentials "+
		"must be configured for the gateway (its env or auth_method)", method, code, agentMessage)
}

func rpcErrorMessage(method string, code int64, agentMessage string) string {
	return fmt.Sprintf("%s failed with code %d: %s", method, code, agentMessage)
}

func neitherResultNorErrorMessage(method string) string {
	return fmt.Sprintf("the agent's response to %s carried neither result nor error", method)
}

func bothResultAndErrorMessage(method string) string {
	return fmt.Sprintf("the agent's response to %s carried both result and error", method)
}

func malformedErrorMessage(method, problem, raw string) string {
	return fmt.Sprintf("the agent's error response to %s is not a JSON-RPC error object (%s): %s",
		method, problem, quoteBounded(raw))
}

func notPromptResponseMessage(method, problem, raw string) string {
	return fmt.Sprintf("the agent's result for %s is not an ACP PromptResponse (%s): %s",
		method, problem, quoteBounded(raw))
}

func malformedResultMessage(method, problem, raw string) string {
	return fmt.Sprintf("the agent's result for %s does not decode as its ACP response (%s): %s",
		method, problem, quoteBounded(raw))
}

func streamEndedMessage(method string, f Failure) string {
	return fmt.Sprintf("the agent closed its stdout while %s was outstanding, so no answer can arrive%s",
		method, f.exitSuffix())
}

func transportFailedMessage(method string, f Failure) string {
	return fmt.Sprintf("communicating with the agent failed while %s was outstanding: %s%s",
		method, f.Detail, f.exitSuffix())
}

const gatewayStoppedMessage = "the gateway stopped while the turn ran; the turn's agent stopped with it"

func journalFailedMessage(detail string) string {
	return "the gateway could not write the turn's journal, so it cancelled the turn: " + detail
}

func startWaitExpiredMessage(detail string) string {
	return "the gateway did not start the agent, which was never spawned; retry later: " + detail
}

func handshakeTimeoutMessage(step string, timeout time.Duration) string {
	return fmt.Sprintf("the agent did not answer %s within the handshake timeout of %s and was stopped", step, timeout)
}

func spawnFailedMessage(detail string) string {
	return "the agent could not be started: " + detail
}

func protocolVersionMessage(got, want int) string {
	return fmt.Sprintf("the agent speaks ACP protocol version %d, but the gateway speaks version %d", got, want)
}

func authMethodMessage(method string, advertised []string) string {
	list := "none"
	if len(advertised) > 0 {
		list = strings.Join(advertised, ", ")
	}
	return fmt.Sprintf("the configured auth_method %q is not among the agent's advertised authMethods (%s)", method, list)
}

const reopenMessage = "the agent cannot re-open a session: it advertised neither sessionCapabilities.resume (session/resume) nor loadSession (session/load) at initialize"

func capabilityMessage(primitive string) string {
	return fmt.Sprintf("the agent does not support %s: it did not advertise the capability at initialize", primitive)
}

func mcpTransportMessage(transport, name string, index int, primitive string) string {
	return fmt.Sprintf("the agent does not support MCP servers over %s (mcp_servers[%d] %q is one): it did not advertise %s at initialize, so the session was not opened",
		transport, index, name, primitive)
}

func promptContentMessage(blockType string, index int, primitive string) string {
	return fmt.Sprintf("the agent does not accept %s blocks in prompts (prompt block %d is one): it did not advertise %s at initialize, so the prompt was not sent",
		blockType, index, primitive)
}

// exitSuffix says how the agent process ended, when that is known.
func (f Failure) exitSuffix() string {
	switch {
	case f.Signal != "":
		return fmt.Sprintf(" (the agent was terminated by signal %s)", f.Signal)
	case f.ExitCode != nil:
		return fmt.Sprintf(" (the agent exited with status %d)", *f.ExitCode)
	default:
		return ""
	}
}

// withPartial appends the turn's partial text to a failure message, labelled
// and bounded. Nothing is appended for an empty partial: a "partial output"
// label with nothing behind it would read as though the agent had said
// something.
func withPartial(message string, text Text) string {
	if text.Len() == 0 {
		return message
	}
	return message + partialLabel + boundForMessage(text)
}

// partialLabel introduces the partial output a failure message quotes.
const partialLabel = "; partial output: "

// MessageWithoutPartial is e's message without the partial output it quotes:
// what a log may say of a failure without repeating the agent's answer
// (which a log at INFO must not hold). The message is given back whole when
// it quotes none.
//
// The quote is found as the suffix the message was built with; where that
// cannot be rebuilt (partial.text kept less than the message quoted), the
// message is cut at the label's first occurrence, which may also cut an
// agent's own words that happen to contain the label, but never leaves any
// of the answer behind.
func MessageWithoutPartial(e *acpgatev1.HarnessError) string {
	msg := e.GetMessage()
	p := e.GetPartial()
	if p == nil {
		return msg
	}
	suffix := partialLabel + boundForMessage(Text{Kept: p.GetText(), Bytes: int(p.GetTotalBytes())})
	if base, ok := strings.CutSuffix(msg, suffix); ok {
		return base
	}
	base, _, _ := strings.Cut(msg, partialLabel)
	return base
}

// boundForMessage cuts text to MessagePartialBytes on a UTF-8 character
// boundary and says so explicitly when it cut.
func boundForMessage(text Text) string {
	if text.Len() <= MessagePartialBytes {
		return text.String()
	}
	shown := cutAtRune(text.head(MessagePartialBytes+1), MessagePartialBytes)
	return fmt.Sprintf("%s… [partial output cut for this message: %d of %d bytes shown]", shown, len(shown), text.Len())
}

// quoteBounded renders an off-contract value for a message, cut short.
func quoteBounded(raw string) string {
	if len(raw) <= messageResultBytes {
		return raw
	}
	shown := cutAtRune(raw, messageResultBytes)
	return fmt.Sprintf("%s… [%d of %d bytes shown]", shown, len(shown), len(raw))
}

// cutAtRune returns the longest prefix of s of at most n bytes that does not
// split a UTF-8 character.
func cutAtRune(s string, n int) string {
	if len(s) <= n {
		return s
	}
	end := n
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end]
}
