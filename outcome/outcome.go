package outcome

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"
	"google.golang.org/protobuf/proto"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// MethodPrompt is the ACP method whose response ends a turn.
const MethodPrompt = "session/prompt"

// DefaultPartialCap is how much of a failed turn's text PartialOutput.text
// carries when the Interpreter sets no cap of its own.
const DefaultPartialCap = 1 << 20

// Ending is how the wait for an agent's response ended. Keeping the three
// apart is the point: a response the agent sent, a stream that ended, and a
// stream that failed are different facts, and only the first says anything
// about what the agent decided.
type Ending int

const (
	// Answered: the id-matched response arrived; Turn.Response holds it.
	Answered Ending = iota + 1
	// StreamEnded: the agent closed its stdout with the request outstanding.
	StreamEnded
	// TransportFailed: reading from or writing to the agent failed with the
	// request outstanding; Turn.Failure.Detail says how.
	TransportFailed
)

// Response is an id-matched JSON-RPC response exactly as the agent sent it.
type Response struct {
	// Result is the raw "result" member; nil when the member was absent.
	Result json.RawMessage
	// Error is the raw "error" member; nil when absent. A JSON null counts
	// as absent, as several JSON-RPC implementations send "error": null.
	Error json.RawMessage
}

// Failure describes a channel that broke before an answer arrived.
type Failure struct {
	// Detail is the underlying error text (for TransportFailed).
	Detail string
	// ExitCode is the agent's exit status, when it has exited.
	ExitCode *int32
	// Signal names the signal that terminated the agent, if one did.
	Signal string
	// StderrTail is the last of what the agent wrote to stderr.
	StderrTail string
}

// Turn is everything known about a turn when it ends.
type Turn struct {
	// Method is the request whose ending is interpreted; MethodPrompt when
	// empty. Errors from session/new and session/load are classified
	// exactly like errors from session/prompt, naming their own method.
	Method string
	// Ending is how the wait for the response ended.
	Ending Ending
	// Response is the agent's answer, when Ending is Answered.
	Response Response
	// Failure describes the broken channel, when Ending is not Answered.
	Failure Failure
	// Text is every agent message of the turn, joined with "\n\n".
	Text Text
	// FinalMessage is the last agent message alone, exactly as streamed.
	FinalMessage Text
	// SessionID is the ACP session the turn ran in.
	SessionID string
	// TurnID is the gateway's identifier of the turn.
	TurnID string
	// OmitText leaves the text out of a completed turn's outcome, which
	// then says so and gives the lengths (PromptRequest.omit_outcome_text).
	// It never changes an error: a partial output is always reported. A
	// text not kept whole is omitted whatever OmitText says.
	OmitText bool
	// Unkept, when Text may not be kept whole, says why the gateway stopped
	// keeping it (TEXT_OMISSION_ANSWER_LIMIT or TEXT_OMISSION_CLIENT_GONE):
	// a completed outcome whose text was not kept whole gives it as its
	// text_omission. A text kept whole all the same is handed over whole.
	Unkept acpgatev1.TextOmission
	// CancelCause, when the gateway itself cancelled the turn, says why
	// (for example "the client went away"). It only words the message of a
	// cancelled ending; it never turns another ending into a cancellation.
	CancelCause string
}

// Text is a turn's text as the gateway kept it: whole, or — when the
// client assembles the answer from the chunks and the outcome leaves it out
// — only its beginning and its length. A gateway streaming a long answer to
// such a client then holds a bounded amount of it, not all of it, and still
// reports a failure's partial output exactly: keep at least
// Interpreter.KeepBytes bytes and the errors are those of the whole text.
type Text struct {
	// Kept is the text, or its first bytes.
	Kept string
	// Bytes is the whole text's length; zero means the kept length: kept
	// whole.
	Bytes int
	// Pieces, when set, hold what is kept in parts, in order, and Kept is
	// empty: the kept text is their concatenation. A long answer arrives
	// as thousands of chunks; joined into one string at the turn's end it
	// was held twice at once, as its chunks and as the string, and that
	// was the peak of a long turn's memory. A completed outcome of a text
	// in pieces leaves its text to Result.TextPieces (see there).
	Pieces []string
}

// WholeText is s, kept whole.
func WholeText(s string) Text { return Text{Kept: s} }

// WholePieces is the concatenation of pieces, kept whole, without joining
// them.
func WholePieces(pieces []string) Text { return Text{Pieces: pieces} }

// Len is the whole text's length in bytes.
func (t Text) Len() int { return max(t.keptLen(), t.Bytes) }

// Whole reports whether all of the text is kept.
func (t Text) Whole() bool { return t.keptLen() == t.Len() }

// String is the kept text in one string (the pieces joined, if it is in
// pieces).
func (t Text) String() string {
	if t.Pieces == nil {
		return t.Kept
	}
	return strings.Join(t.Pieces, "")
}

// keptLen is the kept text's length.
func (t Text) keptLen() int {
	n := len(t.Kept) // 0 with Pieces
	for _, p := range t.Pieces {
		n += len(p)
	}
	return n
}

// head is at least the kept text's first n bytes (all of it when shorter),
// in one string: what the bounded quotes of a text (a partial output, a
// message) read, without joining a long text in pieces.
func (t Text) head(n int) string {
	if t.Pieces == nil {
		return t.Kept
	}
	var b strings.Builder
	for _, p := range t.Pieces {
		if b.Len() >= n {
			break
		}
		b.WriteString(p[:min(len(p), n-b.Len())])
	}
	return b.String()
}

// completed is the outcome of a turn that ended with end_turn.
func completed(t Turn, usage *acpgatev1.Usage) *acpgatev1.PromptOutcome {
	o := &acpgatev1.PromptOutcome{
		StopKind:   acpgatev1.StopKind_STOP_KIND_END_TURN,
		StopReason: string(acpsdk.StopReasonEndTurn),
		SessionId:  t.SessionID,
		TurnId:     t.TurnID,
		Usage:      usage,
	}
	if omission := textOmission(t); omission != acpgatev1.TextOmission_TEXT_OMISSION_UNSPECIFIED {
		// The lengths stay, so that the omission is visible and an empty
		// text still only ever means the agent said nothing. A text that
		// was not kept whole is never handed over as though it were the
		// answer.
		o.TextOmitted, o.TextOmission = true, omission
		o.TextBytes = uint64(t.Text.Len())
		o.FinalMessageBytes = uint64(t.FinalMessage.Len())
		return o
	}
	o.Text, o.FinalMessage = t.Text.Kept, t.FinalMessage.Kept
	return o
}

// completedResult is completed's outcome as a Result: with a text in
// pieces, the outcome's text and final message are its TextPieces and
// FinalPieces.
func completedResult(t Turn, usage *acpgatev1.Usage) Result {
	r := Result{Outcome: completed(t, usage)}
	if !r.Outcome.GetTextOmitted() && (t.Text.Pieces != nil || t.FinalMessage.Pieces != nil) {
		r.TextPieces, r.FinalPieces = piecesOf(t.Text), piecesOf(t.FinalMessage)
	}
	return r
}

// piecesOf is a whole text as pieces.
func piecesOf(t Text) []string {
	if t.Pieces != nil || t.Kept == "" {
		return t.Pieces
	}
	return []string{t.Kept}
}

// textOmission is why a completed turn's outcome leaves its text out, or
// TEXT_OMISSION_UNSPECIFIED when it carries the text.
func textOmission(t Turn) acpgatev1.TextOmission {
	switch {
	case t.OmitText:
		return acpgatev1.TextOmission_TEXT_OMISSION_REQUESTED
	case t.Text.Whole() && t.FinalMessage.Whole():
		return acpgatev1.TextOmission_TEXT_OMISSION_UNSPECIFIED
	case t.Unkept != acpgatev1.TextOmission_TEXT_OMISSION_UNSPECIFIED:
		return t.Unkept
	default:
		// A caller that cut the text without saying why: the only cut a
		// gateway makes on its own is for its answer bound.
		return acpgatev1.TextOmission_TEXT_OMISSION_ANSWER_LIMIT
	}
}

// Result is the interpretation of a turn: exactly one of Outcome and Error
// is non-nil.
type Result struct {
	Outcome *acpgatev1.PromptOutcome
	Error   *acpgatev1.HarnessError
	// TextPieces and FinalPieces are a completed outcome's text and final
	// message when the turn's text came in pieces (Text.Pieces): Outcome's
	// text and final_message are then empty, and the outcome is encoded
	// with these in their place, from the pieces' own memory. Joined gives
	// the outcome with them set.
	TextPieces, FinalPieces []string
}

// Joined is r with a completed outcome's text and final message in the
// outcome, joined from their pieces (a copy of the outcome, when they were
// in pieces).
func (r Result) Joined() Result {
	if r.Outcome == nil || (r.TextPieces == nil && r.FinalPieces == nil) {
		return r
	}
	o := proto.CloneOf(r.Outcome)
	o.Text, o.FinalMessage = strings.Join(r.TextPieces, ""), strings.Join(r.FinalPieces, "")
	return Result{Outcome: o}
}

// Interpreter turns a turn's ending into its Result.
type Interpreter struct {
	// PartialCap bounds PartialOutput.text in bytes; DefaultPartialCap when
	// zero or negative.
	PartialCap int
}

// Interpret classifies the ending of a turn. It never panics and always
// returns exactly one of an outcome and an error; every error has a
// non-empty message.
func (in Interpreter) Interpret(t Turn) Result {
	method := t.Method
	if method == "" {
		method = MethodPrompt
	}
	switch t.Ending {
	case Answered:
		return in.answered(method, t)
	case StreamEnded:
		return in.fail(t.Text, streamEndedMessage(method, t.Failure),
			transport(acpgatev1.TransportReason_TRANSPORT_REASON_STREAM_ENDED, t.Failure))
	case TransportFailed:
		return in.fail(t.Text, transportFailedMessage(method, t.Failure),
			transport(acpgatev1.TransportReason_TRANSPORT_REASON_TRANSPORT_FAILED, t.Failure))
	default:
		// A caller bug, not an agent behaviour; still an honest error
		// rather than a panic or an invented outcome.
		f := t.Failure
		f.Detail = fmt.Sprintf("the gateway recorded no ending for %s (ending %d)", method, t.Ending)
		return in.fail(t.Text, transportFailedMessage(method, f),
			transport(acpgatev1.TransportReason_TRANSPORT_REASON_TRANSPORT_FAILED, f))
	}
}

func (in Interpreter) answered(method string, t Turn) Result {
	resultPresent := isPresent(t.Response.Result)
	errorPresent := isPresent(t.Response.Error)
	switch {
	case resultPresent && errorPresent:
		return in.fail(t.Text, bothResultAndErrorMessage(method), protocol(bothResultAndErrorMessage(method)))
	case errorPresent:
		return in.rpcError(method, t)
	case !resultPresent && t.Response.Result == nil:
		return in.fail(t.Text, neitherResultNorErrorMessage(method), protocol(neitherResultNorErrorMessage(method)))
	}
	if method != MethodPrompt {
		// Handshake results are decoded by their caller, which knows their
		// type; the interpreter classifies only their failures. Reaching
		// here is a caller bug, reported as what it is rather than guessed.
		return Result{Error: in.MalformedResult(method, "the interpreter decodes only session/prompt results", t.Response.Result)}
	}
	response, problem := decodePromptResponse(t.Response.Result)
	if problem != "" {
		msg := notPromptResponseMessage(method, problem, string(t.Response.Result))
		return in.fail(t.Text, msg, protocol(msg))
	}
	switch response.StopReason {
	case acpsdk.StopReasonEndTurn:
		return completedResult(t, usageOf(response.Usage))
	case acpsdk.StopReasonRefusal:
		return in.fail(t.Text, refusedMessage(method), &acpgatev1.HarnessError{
			Kind: &acpgatev1.HarnessError_PolicyRefused{PolicyRefused: &acpgatev1.PolicyRefusal{
				Detection: acpgatev1.RefusalDetection_REFUSAL_DETECTION_STRUCTURED,
			}},
		})
	case acpsdk.StopReasonCancelled:
		return withCause(in.fail(t.Text, cancelledMessage(method, t.CancelCause), harness(&acpgatev1.HarnessFailure{
			StopKind:  acpgatev1.StopKind_STOP_KIND_CANCELLED,
			Cancelled: true,
		})), t.CancelCause)
	default: // max_tokens, max_turn_requests: decodePromptResponse admits no others.
		return in.fail(t.Text, stoppedShortMessage(method, string(response.StopReason)), harness(&acpgatev1.HarnessFailure{
			StopKind: StopKindOf(response.StopReason),
		}))
	}
}

// rpcError classifies a JSON-RPC error response.
func (in Interpreter) rpcError(method string, t Turn) Result {
	rpc, problem := decodeRPCError(t.Response.Error)
	if problem != "" {
		msg := malformedErrorMessage(method, problem, string(t.Response.Error))
		return in.fail(t.Text, msg, protocol(msg))
	}
	code := int32(rpc.Code)
	failure := &acpgatev1.HarnessFailure{RpcCode: &code, RpcMessage: rpc.Message, RpcData: rpc.Data}
	var msg string
	switch rpc.Code {
	case CodeAuthRequired:
		failure.AuthRequired = true
		msg = authRequiredMessage(method, rpc.Code, rpc.Message)
	case CodeRequestCancelled:
		failure.Cancelled = true
		msg = cancelledByErrorMessage(method, t.CancelCause, rpc.Code, rpc.Message)
	default:
		msg = rpcErrorMessage(method, rpc.Code, rpc.Message)
	}
	return withCause(in.fail(t.Text, msg, harness(failure)), t.CancelCause)
}

// JSON-RPC error codes with a meaning of their own in ACP.
const (
	// CodeAuthRequired is ACP's "authentication required".
	CodeAuthRequired = -32000
	// CodeRequestCancelled is the JSON-RPC "request cancelled" code. A
	// conforming agent answers a cancelled prompt with stopReason
	// cancelled; one that answers with this code is still reporting a
	// cancellation, not an opaque failure.
	CodeRequestCancelled = -32800
)

type rpcErrorObject struct {
	Code    *json.Number    `json:"code"`
	Message *string         `json:"message"`
	Data    json.RawMessage `json:"data"`
}

type decodedRPCError struct {
	Code    int64
	Message string
	Data    string // the error's data, as JSON, cut at maxRPCData bytes
}

// maxRPCData bounds the error data a terminal carries: an agent's data
// may be a stack trace or a whole document.
const maxRPCData = 4096

func decodeRPCError(raw json.RawMessage) (decodedRPCError, string) {
	var obj rpcErrorObject
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&obj); err != nil {
		return decodedRPCError{}, err.Error()
	}
	if obj.Code == nil {
		return decodedRPCError{}, "code is missing"
	}
	code, err := obj.Code.Int64()
	if err != nil || code < -1<<31 || code > 1<<31-1 {
		return decodedRPCError{}, fmt.Sprintf("code %s is not a 32-bit integer", obj.Code.String())
	}
	var message string
	if obj.Message != nil {
		message = *obj.Message
	}
	data := string(bytes.TrimSpace(obj.Data))
	if data == "null" {
		data = ""
	}
	if len(data) > maxRPCData {
		data = data[:maxRPCData]
	}
	return decodedRPCError{Code: code, Message: message, Data: data}, ""
}

func decodePromptResponse(raw json.RawMessage) (acpsdk.PromptResponse, string) {
	var response acpsdk.PromptResponse
	if err := json.Unmarshal(raw, &response); err != nil {
		return response, err.Error()
	}
	switch response.StopReason {
	case "":
		return response, "stopReason is missing"
	case acpsdk.StopReasonEndTurn, acpsdk.StopReasonMaxTokens, acpsdk.StopReasonMaxTurnRequests,
		acpsdk.StopReasonRefusal, acpsdk.StopReasonCancelled:
		return response, ""
	default:
		return response, fmt.Sprintf("unknown stopReason %q", response.StopReason)
	}
}

// StopKindOf maps an ACP stop reason to its StopKind.
func StopKindOf(reason acpsdk.StopReason) acpgatev1.StopKind {
	switch reason {
	case acpsdk.StopReasonEndTurn:
		return acpgatev1.StopKind_STOP_KIND_END_TURN
	case acpsdk.StopReasonMaxTokens:
		return acpgatev1.StopKind_STOP_KIND_MAX_TOKENS
	case acpsdk.StopReasonMaxTurnRequests:
		return acpgatev1.StopKind_STOP_KIND_MAX_TURN_REQUESTS
	case acpsdk.StopReasonRefusal:
		return acpgatev1.StopKind_STOP_KIND_REFUSAL
	case acpsdk.StopReasonCancelled:
		return acpgatev1.StopKind_STOP_KIND_CANCELLED
	default:
		return acpgatev1.StopKind_STOP_KIND_UNSPECIFIED
	}
}

func usageOf(u *acpsdk.Usage) *acpgatev1.Usage {
	if u == nil {
		return nil
	}
	out := &acpgatev1.Usage{
		InputTokens:  int64p(u.InputTokens),
		OutputTokens: int64p(u.OutputTokens),
		TotalTokens:  int64p(u.TotalTokens),
	}
	if u.ThoughtTokens != nil {
		out.ThoughtTokens = int64p(*u.ThoughtTokens)
	}
	if u.CachedReadTokens != nil {
		out.CachedReadTokens = int64p(*u.CachedReadTokens)
	}
	if u.CachedWriteTokens != nil {
		out.CachedWriteTokens = int64p(*u.CachedWriteTokens)
	}
	return out
}

func int64p(v int) *int64 {
	n := int64(v)
	return &n
}

// isPresent reports whether a raw member was sent with a non-null value.
func isPresent(raw json.RawMessage) bool {
	return raw != nil && !bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// fail completes a HarnessError: it sets the message (with the bounded
// partial appended) and the full partial output.
func (in Interpreter) fail(text Text, message string, e *acpgatev1.HarnessError) Result {
	e.Message = withPartial(message, text)
	e.Partial = in.partial(text)
	e.Retryable = retryable(e, "")
	return Result{Error: e}
}

// withCause completes the retryability of a cancellation whose cause the
// gateway knows.
func withCause(r Result, cause string) Result {
	if r.Error != nil {
		r.Error.Retryable = retryable(r.Error, cause)
	}
	return r
}

// CauseShutdown is the cause of every turn the gateway cancels because it
// is shutting down.
const CauseShutdown = "the gateway is shutting down"

// retryable is the one rule for HarnessError.retryable (the table is in
// the proto): whether running the same prompt again may succeed. A broken
// channel, a gateway that stopped or failed, and a cancellation by the
// gateway's own shutdown may go differently next time; what the agent
// decided (a refusal, a stop reason, an error it reported, a violation of
// the protocol) and a cancellation someone asked for will not.
func retryable(e *acpgatev1.HarnessError, cancelCause string) bool {
	switch e.GetKind().(type) {
	case *acpgatev1.HarnessError_Transport, *acpgatev1.HarnessError_Gateway:
		return true
	case *acpgatev1.HarnessError_Harness:
		return e.GetHarness().GetCancelled() && cancelCause == CauseShutdown
	}
	return false
}

func (in Interpreter) partialCap() int {
	if in.PartialCap <= 0 {
		return DefaultPartialCap
	}
	return in.PartialCap
}

// KeepBytes is how much of a text's beginning the interpreter reads: a
// Text whose Kept holds at least this many bytes (or all of the text)
// yields exactly the errors the whole text would. One byte past the
// longest cut, because a cut on a character boundary looks at the byte
// after it.
func (in Interpreter) KeepBytes() int { return max(in.partialCap(), MessagePartialBytes) + 1 }

func (in Interpreter) partial(text Text) *acpgatev1.PartialOutput {
	if text.Len() == 0 {
		return nil
	}
	kept := cutAtRune(text.head(in.partialCap()+1), in.partialCap())
	return &acpgatev1.PartialOutput{
		Text:       kept,
		Truncated:  len(kept) < text.Len(),
		TotalBytes: uint64(text.Len()),
	}
}

func transport(reason acpgatev1.TransportReason, f Failure) *acpgatev1.HarnessError {
	return &acpgatev1.HarnessError{Kind: &acpgatev1.HarnessError_Transport{Transport: &acpgatev1.TransportFailure{
		Reason:     reason,
		Detail:     f.Detail,
		ExitCode:   f.ExitCode,
		Signal:     f.Signal,
		StderrTail: f.StderrTail,
	}}}
}

func protocol(detail string) *acpgatev1.HarnessError {
	return &acpgatev1.HarnessError{Kind: &acpgatev1.HarnessError_Protocol{Protocol: &acpgatev1.ProtocolViolation{Detail: detail}}}
}

func harness(f *acpgatev1.HarnessFailure) *acpgatev1.HarnessError {
	return &acpgatev1.HarnessError{Kind: &acpgatev1.HarnessError_Harness{Harness: f}}
}

// SpawnFailed is the error for an agent program that could not be started.
func (in Interpreter) SpawnFailed(detail string) *acpgatev1.HarnessError {
	return in.fail(Text{}, spawnFailedMessage(detail), transport(acpgatev1.TransportReason_TRANSPORT_REASON_SPAWN_FAILED, Failure{Detail: detail})).Error
}

// HandshakeTimedOut is the error for an agent that did not complete its
// start-up in time: step names the request that was still unanswered
// (initialize, authenticate, session/new, session/load) when timeout ran
// out. The agent's stderr tail is attached, since an agent that hangs at
// start-up usually says why there.
func (in Interpreter) HandshakeTimedOut(step string, timeout time.Duration, f Failure) *acpgatev1.HarnessError {
	f.Detail = handshakeTimeoutMessage(step, timeout)
	return in.fail(Text{}, f.Detail, transport(acpgatev1.TransportReason_TRANSPORT_REASON_HANDSHAKE_TIMEOUT, f)).Error
}

// ProtocolViolation is the error for an agent that broke the wire contract
// outside a response the interpreter decodes (an undecodable envelope, a
// non-JSON line under strict framing, a malformed handshake result).
func (in Interpreter) ProtocolViolation(detail string, text Text) *acpgatev1.HarnessError {
	return in.fail(text, detail, protocol(detail)).Error
}

// MalformedResult is the error for a handshake result (initialize,
// authenticate, session/new, session/load) that does not decode as the
// response ACP defines for the method.
func (in Interpreter) MalformedResult(method, problem string, raw []byte) *acpgatev1.HarnessError {
	return in.ProtocolViolation(malformedResultMessage(method, problem, string(raw)), Text{})
}

// UnsupportedProtocolVersion is the error for an agent that answered
// initialize with a protocol version the gateway does not speak.
func (in Interpreter) UnsupportedProtocolVersion(got, want int) *acpgatev1.HarnessError {
	return in.ProtocolViolation(protocolVersionMessage(got, want), Text{})
}

// AuthMethodNotAdvertised is the error for a configured auth_method the
// agent did not offer; it lists what the agent did offer.
func (in Interpreter) AuthMethodNotAdvertised(method string, advertised []string) *acpgatev1.HarnessError {
	return in.fail(Text{}, authMethodMessage(method, advertised), harness(&acpgatev1.HarnessFailure{AuthRequired: true})).Error
}

// CancelGraceExpired is the error for a cancelled turn whose agent did not
// answer session/prompt within the grace period and was stopped. cause says
// why the turn was cancelled, as Turn.CancelCause does. stop_kind stays
// unspecified: the agent never answered with a stop reason, and the
// contract reports only what the agent said.
func (in Interpreter) CancelGraceExpired(grace time.Duration, cause string, text Text) *acpgatev1.HarnessError {
	return withCause(in.fail(text, cancelGraceExpiredMessage(grace, cause), harness(&acpgatev1.HarnessFailure{Cancelled: true})), cause).Error
}

// GatewayStopped is the terminal of a turn the journal still showed as
// running when the gateway started: the gateway stopped while it ran.
// text is what the journal holds of the turn's answer.
func (in Interpreter) GatewayStopped(text Text) *acpgatev1.HarnessError {
	return in.fail(text, gatewayStoppedMessage, transport(acpgatev1.TransportReason_TRANSPORT_REASON_GATEWAY_STOPPED, Failure{Detail: gatewayStoppedMessage})).Error
}

// JournalFailed is the error of a turn whose journal the gateway could not
// write.
func (in Interpreter) JournalFailed(detail string, text Text) *acpgatev1.HarnessError {
	return in.fail(text, journalFailedMessage(detail), &acpgatev1.HarnessError{
		Kind: &acpgatev1.HarnessError_Gateway{Gateway: &acpgatev1.GatewayFailure{Detail: detail}},
	}).Error
}

// StartWaitExpired is the error of a turn or session whose agent the
// gateway did not start: it was busy starting others (at its bound on
// start-ups at once) for as long as the start-up could wait. It is the
// gateway's failure, not the agent's, so it is a GatewayFailure, which may
// be retried, and never a handshake timeout, which would blame an agent
// that was never spawned.
func (in Interpreter) StartWaitExpired(detail string) *acpgatev1.HarnessError {
	return in.fail(Text{}, startWaitExpiredMessage(detail), &acpgatev1.HarnessError{
		Kind: &acpgatev1.HarnessError_Gateway{Gateway: &acpgatev1.GatewayFailure{Detail: detail}},
	}).Error
}

// CapabilityNotSupported is the gateway's rejection of a request needing an
// ACP primitive the agent did not advertise.
func (in Interpreter) CapabilityNotSupported(primitive string) *acpgatev1.HarnessError {
	return in.fail(Text{}, capabilityMessage(primitive), &acpgatev1.HarnessError{
		Kind: &acpgatev1.HarnessError_CapabilityNotSupported{CapabilityNotSupported: &acpgatev1.CapabilityNotSupported{Primitive: primitive}},
	}).Error
}

// MCPTransportNotSupported is the gateway's rejection of a caller's MCP
// server (number index of the caller's list, named name) over a transport
// (http, sse) the agent did not opt in to with primitive
// (mcpCapabilities.http, .sse): ACP forbids sending it, and an agent that
// got it anyway might skip it silently.
func (in Interpreter) MCPTransportNotSupported(transport, name string, index int, primitive string) *acpgatev1.HarnessError {
	return in.fail(Text{}, mcpTransportMessage(transport, name, index, primitive), &acpgatev1.HarnessError{
		Kind: &acpgatev1.HarnessError_CapabilityNotSupported{CapabilityNotSupported: &acpgatev1.CapabilityNotSupported{Primitive: primitive}},
	}).Error
}

// ReopenNotSupported is the gateway's rejection of re-opening a session on
// an agent that advertised neither sessionCapabilities.resume nor
// loadSession. The primitive is session/load, the stable one a client
// checks for; the message names both.
func (in Interpreter) ReopenNotSupported() *acpgatev1.HarnessError {
	return in.fail(Text{}, reopenMessage, &acpgatev1.HarnessError{
		Kind: &acpgatev1.HarnessError_CapabilityNotSupported{CapabilityNotSupported: &acpgatev1.CapabilityNotSupported{Primitive: "session/load"}},
	}).Error
}

// PromptContentNotSupported is the gateway's rejection of a prompt whose
// block number index is of a type (image, audio, resource) the agent did
// not opt in to with primitive (promptCapabilities.image, ...): ACP forbids
// sending it, and an agent that got it anyway might drop it silently.
func (in Interpreter) PromptContentNotSupported(blockType string, index int, primitive string) *acpgatev1.HarnessError {
	return in.fail(Text{}, promptContentMessage(blockType, index, primitive), &acpgatev1.HarnessError{
		Kind: &acpgatev1.HarnessError_CapabilityNotSupported{CapabilityNotSupported: &acpgatev1.CapabilityNotSupported{Primitive: primitive}},
	}).Error
}

// StaleTarget is the gateway's rejection of a request whose target no
// longer applies.
func (in Interpreter) StaleTarget(detail string) *acpgatev1.HarnessError {
	return in.fail(Text{}, detail, &acpgatev1.HarnessError{
		Kind: &acpgatev1.HarnessError_StaleTarget{StaleTarget: &acpgatev1.StaleTarget{Detail: detail}},
	}).Error
}
