package outcome_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/outcome"
)

var update = flag.Bool("update", false, "rewrite the golden files from the interpreter's current output")

const testSession = "sess-outcome-test"

func answered(result, rpcError string, text string) outcome.Turn {
	var r outcome.Response
	if result != "" {
		r.Result = json.RawMessage(result)
	}
	if rpcError != "" {
		r.Error = json.RawMessage(rpcError)
	}
	return outcome.Turn{
		Ending:       outcome.Answered,
		Response:     r,
		Text:         outcome.WholeText(text),
		FinalMessage: outcome.WholeText(lastMessage(text)),
		SessionID:    testSession,
		TurnID:       "turn-1",
	}
}

func lastMessage(text string) string {
	parts := strings.Split(text, "\n\n")
	return parts[len(parts)-1]
}

func exitCode(n int32) *int32 { return &n }

// The rows of the outcome table. Each row's result is also written as a
// golden file: the terminal event in protojson, which the conformance suite
// expects every client language to see.
var table = []struct {
	name string
	turn outcome.Turn
	// check asserts the row's classification beyond the golden file, so a
	// regenerated golden cannot silently bless a wrong classification.
	check func(t *testing.T, r outcome.Result)
}{
	{
		name: "end_turn_with_several_messages_is_a_completed_outcome",
		turn: answered(`{"stopReason":"end_turn","usage":{"inputTokens":10,"outputTokens":5,"totalTokens":15}}`, "", "first answer\n\nsecond answer"),
		check: func(t *testing.T, r outcome.Result) {
			o := mustOutcome(t, r)
			if o.GetText() != "first answer\n\nsecond answer" || o.GetFinalMessage() != "second answer" {
				t.Errorf("text %q final %q", o.GetText(), o.GetFinalMessage())
			}
			if o.GetStopReason() != "end_turn" || o.GetStopKind() != acpgatev1.StopKind_STOP_KIND_END_TURN {
				t.Errorf("stop %q %v", o.GetStopReason(), o.GetStopKind())
			}
			if o.GetSessionId() != testSession || o.GetTurnId() != "turn-1" {
				t.Errorf("ids %q %q", o.GetSessionId(), o.GetTurnId())
			}
			if o.GetUsage().GetTotalTokens() != 15 || o.GetUsage().ThoughtTokens != nil {
				t.Errorf("usage %v", o.GetUsage())
			}
		},
	},
	{
		name: "end_turn_with_tool_calls_only_is_a_completed_outcome_with_empty_text",
		turn: answered(`{"stopReason":"end_turn"}`, "", ""),
		check: func(t *testing.T, r outcome.Result) {
			o := mustOutcome(t, r)
			if o.GetText() != "" || o.GetFinalMessage() != "" || o.GetUsage() != nil {
				t.Errorf("the gateway invented something: %v", o)
			}
		},
	},
	{
		name: "end_turn_with_the_text_omitted_gives_its_lengths_and_says_so",
		turn: func() outcome.Turn {
			t := answered(`{"stopReason":"end_turn"}`, "", "first answer\n\nsecond ünïcödé")
			t.OmitText = true
			return t
		}(),
		check: func(t *testing.T, r outcome.Result) {
			o := mustOutcome(t, r)
			if o.GetText() != "" || o.GetFinalMessage() != "" || !o.GetTextOmitted() ||
				o.GetTextOmission() != acpgatev1.TextOmission_TEXT_OMISSION_REQUESTED {
				t.Errorf("text %q final %q omitted %v (%v)", o.GetText(), o.GetFinalMessage(), o.GetTextOmitted(), o.GetTextOmission())
			}
			if want := len("first answer\n\nsecond ünïcödé"); o.GetTextBytes() != uint64(want) {
				t.Errorf("text_bytes %d, want %d", o.GetTextBytes(), want)
			}
			if want := len("second ünïcödé"); o.GetFinalMessageBytes() != uint64(want) {
				t.Errorf("final_message_bytes %d, want %d", o.GetFinalMessageBytes(), want)
			}
		},
	},
	{
		name: "end_turn_with_no_text_and_the_text_omitted_still_says_it_was_omitted",
		turn: func() outcome.Turn {
			t := answered(`{"stopReason":"end_turn"}`, "", "")
			t.OmitText = true
			return t
		}(),
		check: func(t *testing.T, r outcome.Result) {
			o := mustOutcome(t, r)
			if !o.GetTextOmitted() || o.GetTextBytes() != 0 || o.GetFinalMessageBytes() != 0 {
				t.Errorf("outcome %v", o)
			}
		},
	},
	{
		name: "omitting_the_text_never_omits_a_failures_partial",
		turn: func() outcome.Turn {
			t := answered(`{"stopReason":"refusal"}`, "", "I will not")
			t.OmitText = true
			return t
		}(),
		check: func(t *testing.T, r outcome.Result) {
			e := mustError(t, r)
			mustContain(t, e.GetMessage(), "; partial output: I will not")
			if e.GetPartial().GetText() != "I will not" {
				t.Errorf("partial %v", e.GetPartial())
			}
		},
	},
	{
		name: "refusal_is_a_policy_refusal_with_the_partial_attached",
		turn: answered(`{"stopReason":"refusal"}`, "", "I will not"),
		check: func(t *testing.T, r outcome.Result) {
			e := mustError(t, r)
			if e.GetPolicyRefused().GetDetection() != acpgatev1.RefusalDetection_REFUSAL_DETECTION_STRUCTURED {
				t.Errorf("kind %v", e.GetKind())
			}
			mustContain(t, e.GetMessage(), "refusal", "; partial output: I will not")
			if e.GetPartial().GetText() != "I will not" {
				t.Errorf("partial %v", e.GetPartial())
			}
		},
	},
	{
		name: "max_tokens_is_a_harness_failure_naming_the_reason",
		turn: answered(`{"stopReason":"max_tokens"}`, "", "half an answ"),
		check: func(t *testing.T, r outcome.Result) {
			e := mustError(t, r)
			h := e.GetHarness()
			if h.GetStopKind() != acpgatev1.StopKind_STOP_KIND_MAX_TOKENS || h.GetCancelled() || h.RpcCode != nil {
				t.Errorf("harness %v", h)
			}
			mustContain(t, e.GetMessage(), "max_tokens", "partial output: half an answ")
			if strings.HasPrefix(e.GetMessage(), outcome.CancelledPrefix) {
				t.Errorf("max_tokens is not a cancellation: %s", e.GetMessage())
			}
		},
	},
	{
		name: "max_turn_requests_is_a_harness_failure_naming_the_reason",
		turn: answered(`{"stopReason":"max_turn_requests"}`, "", ""),
		check: func(t *testing.T, r outcome.Result) {
			e := mustError(t, r)
			if e.GetHarness().GetStopKind() != acpgatev1.StopKind_STOP_KIND_MAX_TURN_REQUESTS || e.GetHarness().GetCancelled() {
				t.Errorf("harness %v", e.GetHarness())
			}
			mustContain(t, e.GetMessage(), "max_turn_requests")
			mustNotFabricatePartial(t, e)
		},
	},
	{
		name: "cancelled_is_a_harness_failure_with_the_cancellation_prefix",
		turn: answered(`{"stopReason":"cancelled"}`, "", "half an ans"),
		check: func(t *testing.T, r outcome.Result) {
			e := mustError(t, r)
			if !e.GetHarness().GetCancelled() || e.GetHarness().GetStopKind() != acpgatev1.StopKind_STOP_KIND_CANCELLED {
				t.Errorf("harness %v", e.GetHarness())
			}
			mustHavePrefix(t, e.GetMessage(), outcome.CancelledPrefix)
			mustContain(t, e.GetMessage(), "partial output: half an ans")
		},
	},
	{
		name: "error_code_32000_is_auth_required_with_the_agents_message",
		turn: answered("", `{"code":-32000,"message":"Authentication required"}`, ""),
		check: func(t *testing.T, r outcome.Result) {
			e := mustError(t, r)
			h := e.GetHarness()
			if !h.GetAuthRequired() || h.GetRpcCode() != -32000 || h.GetRpcMessage() != "Authentication required" || h.GetCancelled() {
				t.Errorf("harness %v", h)
			}
			mustContain(t, e.GetMessage(), "requires authentication", "Authentication required", "unattended", "interactive login", "credentials", "configured for the gateway")
			mustNotFabricatePartial(t, e)
		},
	},
	{
		name: "error_code_32800_is_a_cancellation_naming_the_code",
		turn: answered("", `{"code":-32800,"message":"aborted"}`, ""),
		check: func(t *testing.T, r outcome.Result) {
			e := mustError(t, r)
			if !e.GetHarness().GetCancelled() || e.GetHarness().GetRpcCode() != -32800 {
				t.Errorf("harness %v", e.GetHarness())
			}
			mustHavePrefix(t, e.GetMessage(), outcome.CancelledPrefix)
			mustContain(t, e.GetMessage(), "-32800", "aborted")
		},
	},
	{
		name: "an_error_s_data_is_carried_cut_at_4096_bytes",
		turn: answered("", `{"code":-32603,"message":"Internal error","data":"`+strings.Repeat("d", 5000)+`"}`, ""),
		check: func(t *testing.T, r outcome.Result) {
			if got := mustError(t, r).GetHarness().GetRpcData(); len(got) != 4096 || !strings.HasPrefix(got, `"ddd`) {
				t.Errorf("rpc_data of %d bytes (%.10q...), want the first 4096", len(got), got)
			}
		},
	},
	{
		name: "any_other_error_code_is_a_harness_failure_carrying_code_and_message",
		turn: answered("", `{"code":-32603,"message":"the model exploded","data":{"why":"x"}}`, "some text"),
		check: func(t *testing.T, r outcome.Result) {
			e := mustError(t, r)
			h := e.GetHarness()
			if h.RpcCode == nil || h.GetRpcCode() != -32603 || h.GetAuthRequired() || h.GetCancelled() || h.GetRpcData() != `{"why":"x"}` {
				t.Errorf("harness %v", h)
			}
			mustContain(t, e.GetMessage(), "-32603", "the model exploded", "partial output: some text")
		},
	},
	{
		name: "error_code_zero_is_a_code_not_the_absence_of_one",
		turn: answered("", `{"code":0,"message":"zero"}`, ""),
		check: func(t *testing.T, r outcome.Result) {
			h := mustError(t, r).GetHarness()
			if h == nil || h.RpcCode == nil || h.GetRpcCode() != 0 {
				t.Errorf("rpc_code must be present and 0: %v", h)
			}
		},
	},
	{
		name: "neither_result_nor_error_is_a_protocol_violation",
		turn: answered("", "", ""),
		check: func(t *testing.T, r outcome.Result) {
			e := mustError(t, r)
			if e.GetProtocol() == nil {
				t.Fatalf("kind %v", e.GetKind())
			}
			mustContain(t, e.GetMessage(), "neither result nor error")
		},
	},
	{
		name: "a_null_error_beside_no_result_is_still_neither",
		turn: answered("", `null`, ""),
		check: func(t *testing.T, r outcome.Result) {
			mustContain(t, mustError(t, r).GetProtocol().GetDetail(), "neither result nor error")
		},
	},
	{
		name: "both_result_and_error_is_a_protocol_violation",
		turn: answered(`{"stopReason":"end_turn"}`, `{"code":1,"message":"x"}`, ""),
		check: func(t *testing.T, r outcome.Result) {
			mustContain(t, mustError(t, r).GetProtocol().GetDetail(), "both result and error")
		},
	},
	{
		name: "an_unknown_stop_reason_is_a_protocol_violation_naming_it",
		turn: answered(`{"stopReason":"teleported"}`, "", ""),
		check: func(t *testing.T, r outcome.Result) {
			e := mustError(t, r)
			mustContain(t, e.GetProtocol().GetDetail(), "PromptResponse", `"teleported"`)
		},
	},
	{
		name: "a_missing_stop_reason_is_a_protocol_violation",
		turn: answered(`{"usage":null}`, "", ""),
		check: func(t *testing.T, r outcome.Result) {
			mustContain(t, mustError(t, r).GetProtocol().GetDetail(), "stopReason is missing")
		},
	},
	{
		name: "a_result_that_is_not_an_object_is_a_protocol_violation",
		turn: answered(`"end_turn"`, "", ""),
		check: func(t *testing.T, r outcome.Result) {
			mustContain(t, mustError(t, r).GetProtocol().GetDetail(), "not an ACP PromptResponse")
		},
	},
	{
		name: "an_error_that_is_not_an_error_object_is_a_protocol_violation",
		turn: answered("", `{"message":"no code"}`, ""),
		check: func(t *testing.T, r outcome.Result) {
			mustContain(t, mustError(t, r).GetProtocol().GetDetail(), "not a JSON-RPC error object", "code is missing")
		},
	},
	{
		name: "stdout_closed_with_the_prompt_outstanding_is_transport_stream_ended",
		turn: outcome.Turn{
			Ending:    outcome.StreamEnded,
			Failure:   outcome.Failure{ExitCode: exitCode(3), StderrTail: "panic: boom\n"},
			Text:      outcome.WholeText("got this far"),
			SessionID: testSession,
		},
		check: func(t *testing.T, r outcome.Result) {
			e := mustError(t, r)
			tr := e.GetTransport()
			if tr.GetReason() != acpgatev1.TransportReason_TRANSPORT_REASON_STREAM_ENDED || tr.GetExitCode() != 3 || tr.GetStderrTail() != "panic: boom\n" {
				t.Errorf("transport %v", tr)
			}
			mustContain(t, e.GetMessage(), "closed its stdout", "session/prompt", "status 3", "partial output: got this far")
		},
	},
	{
		name: "a_failed_read_with_the_prompt_outstanding_is_transport_failed_with_the_io_error",
		turn: outcome.Turn{
			Ending:  outcome.TransportFailed,
			Failure: outcome.Failure{Detail: "read |0: frame exceeds 16777216 bytes", Signal: "killed"},
		},
		check: func(t *testing.T, r outcome.Result) {
			e := mustError(t, r)
			tr := e.GetTransport()
			if tr.GetReason() != acpgatev1.TransportReason_TRANSPORT_REASON_TRANSPORT_FAILED || tr.ExitCode != nil || tr.GetSignal() != "killed" {
				t.Errorf("transport %v", tr)
			}
			mustContain(t, e.GetMessage(), "frame exceeds 16777216 bytes", "signal killed")
			mustNotFabricatePartial(t, e)
		},
	},
	{
		name: "an_auth_error_on_session_new_is_classified_like_one_on_session_prompt",
		turn: outcome.Turn{
			Method:   "session/new",
			Ending:   outcome.Answered,
			Response: outcome.Response{Error: json.RawMessage(`{"code":-32000,"message":"Authentication required"}`)},
		},
		check: func(t *testing.T, r outcome.Result) {
			e := mustError(t, r)
			if !e.GetHarness().GetAuthRequired() {
				t.Errorf("harness %v", e.GetHarness())
			}
			mustContain(t, e.GetMessage(), "session/new", "Authentication required")
		},
	},
	{
		name: "a_gateway_cancellation_says_why_in_the_message",
		turn: func() outcome.Turn {
			t := answered(`{"stopReason":"cancelled"}`, "", "")
			t.CancelCause = "the client went away"
			return t
		}(),
		check: func(t *testing.T, r outcome.Result) {
			e := mustError(t, r)
			mustHavePrefix(t, e.GetMessage(), outcome.CancelledPrefix+" (the client went away)")
		},
	},
}

func TestOutcomeTable(t *testing.T) {
	in := outcome.Interpreter{}
	for _, row := range table {
		t.Run(row.name, func(t *testing.T) {
			r := in.Interpret(row.turn)
			mustBeExactlyOne(t, r)
			row.check(t, r)
			compareGolden(t, row.name, r)
		})
	}
}

func TestGatewayErrorsAreClassifiedAndWorded(t *testing.T) {
	in := outcome.Interpreter{}
	cases := []struct {
		name  string
		err   *acpgatev1.HarnessError
		check func(*testing.T, *acpgatev1.HarnessError)
	}{
		{"a_spawn_failure_is_transport_spawn_failed", in.SpawnFailed(`exec: "no-such-agent": executable file not found in $PATH`),
			func(t *testing.T, e *acpgatev1.HarnessError) {
				if e.GetTransport().GetReason() != acpgatev1.TransportReason_TRANSPORT_REASON_SPAWN_FAILED {
					t.Errorf("kind %v", e.GetKind())
				}
				mustContain(t, e.GetMessage(), "could not be started", "no-such-agent")
			}},
		{"an_unsupported_protocol_version_names_both_versions", in.UnsupportedProtocolVersion(2, 1),
			func(t *testing.T, e *acpgatev1.HarnessError) {
				mustContain(t, e.GetProtocol().GetDetail(), "version 2", "version 1")
			}},
		{"an_unadvertised_auth_method_lists_the_advertised_ones", in.AuthMethodNotAdvertised("api-key", []string{"oauth", "cloud"}),
			func(t *testing.T, e *acpgatev1.HarnessError) {
				if !e.GetHarness().GetAuthRequired() {
					t.Errorf("kind %v", e.GetKind())
				}
				mustContain(t, e.GetMessage(), `"api-key"`, "oauth, cloud")
			}},
		{"an_expired_cancel_grace_is_a_cancellation_saying_the_agent_was_stopped", in.CancelGraceExpired(10*time.Second, "cancel requested by a client", outcome.WholeText("so far")),
			func(t *testing.T, e *acpgatev1.HarnessError) {
				if !e.GetHarness().GetCancelled() || e.GetHarness().GetStopKind() != acpgatev1.StopKind_STOP_KIND_UNSPECIFIED {
					t.Errorf("kind %v", e.GetKind())
				}
				mustHavePrefix(t, e.GetMessage(), outcome.CancelledPrefix+" (cancel requested by a client)")
				mustContain(t, e.GetMessage(), "did not acknowledge", "10s", "stopped", "partial output: so far")
			}},
		{"a_missing_capability_names_the_primitive", in.CapabilityNotSupported("session/load"),
			func(t *testing.T, e *acpgatev1.HarnessError) {
				if e.GetCapabilityNotSupported().GetPrimitive() != "session/load" {
					t.Errorf("kind %v", e.GetKind())
				}
			}},
		{"a_session_that_cannot_be_reopened_names_both_missing_capabilities", in.ReopenNotSupported(),
			func(t *testing.T, e *acpgatev1.HarnessError) {
				if e.GetCapabilityNotSupported().GetPrimitive() != "session/load" || e.GetRetryable() {
					t.Errorf("kind %v, retryable %v", e.GetKind(), e.GetRetryable())
				}
				mustContain(t, e.GetMessage(), "sessionCapabilities.resume", "loadSession")
			}},
		{"a_stale_target_carries_its_detail", in.StaleTarget("permission request 7 was already decided"),
			func(t *testing.T, e *acpgatev1.HarnessError) {
				mustContain(t, e.GetStaleTarget().GetDetail(), "already decided")
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.err.GetMessage() == "" || c.err.GetKind() == nil {
				t.Fatalf("incomplete error %v", c.err)
			}
			c.check(t, c.err)
		})
	}
}

func TestAPartialOverTheMessageBoundIsCutOnACharacterBoundaryWithAMarker(t *testing.T) {
	// "é" is two bytes; placing it at bytes 3999-4000 straddles the bound.
	text := strings.Repeat("a", outcome.MessagePartialBytes-1) + "é" + strings.Repeat("b", 3000)
	r := outcome.Interpreter{}.Interpret(answered(`{"stopReason":"max_tokens"}`, "", text))
	e := mustError(t, r)
	msg := e.GetMessage()
	if !utf8.ValidString(msg) {
		t.Fatal("the message is not valid UTF-8")
	}
	quoted := msg[strings.Index(msg, "partial output: ")+len("partial output: "):]
	shown, _, found := strings.Cut(quoted, "… [")
	if !found {
		t.Fatalf("no explicit cut marker: %q", quoted[len(quoted)-100:])
	}
	if len(shown) != outcome.MessagePartialBytes-1 || strings.Contains(shown, "é") {
		t.Errorf("the cut must fall before the straddling character: %d bytes shown", len(shown))
	}
	mustContain(t, msg, "3999 of 7001 bytes shown")
	if e.GetPartial().GetText() != text || e.GetPartial().GetTruncated() || e.GetPartial().GetTotalBytes() != uint64(len(text)) {
		t.Errorf("partial.text must carry the whole partial: %d bytes, truncated %v", len(e.GetPartial().GetText()), e.GetPartial().GetTruncated())
	}
}

func TestAPartialExactlyAtTheBoundIsShownWhole(t *testing.T) {
	text := strings.Repeat("z", outcome.MessagePartialBytes)
	msg := mustError(t, outcome.Interpreter{}.Interpret(answered(`{"stopReason":"refusal"}`, "", text))).GetMessage()
	if !strings.HasSuffix(msg, "partial output: "+text) {
		t.Errorf("a partial of exactly the bound is shown whole, unmarked")
	}
}

func TestPartialOutputOverTheCapIsTruncatedAndSaysSo(t *testing.T) {
	text := strings.Repeat("ü", 600) // 1200 bytes
	in := outcome.Interpreter{PartialCap: 1001}
	p := mustError(t, in.Interpret(answered(`{"stopReason":"cancelled"}`, "", text))).GetPartial()
	if !p.GetTruncated() || p.GetTotalBytes() != 1200 || len(p.GetText()) != 1000 || !utf8.ValidString(p.GetText()) {
		t.Errorf("partial: truncated %v total %d kept %d", p.GetTruncated(), p.GetTotalBytes(), len(p.GetText()))
	}
}

func TestAnEmptyPartialIsNeverFabricated(t *testing.T) {
	for _, result := range []string{`{"stopReason":"refusal"}`, `{"stopReason":"max_tokens"}`, `{"stopReason":"cancelled"}`} {
		mustNotFabricatePartial(t, mustError(t, outcome.Interpreter{}.Interpret(answered(result, "", ""))))
	}
}

func TestAnUnknownEndingIsAnErrorNotAPanic(t *testing.T) {
	r := outcome.Interpreter{}.Interpret(outcome.Turn{})
	mustBeExactlyOne(t, r)
	if r.Error.GetTransport() == nil {
		t.Errorf("kind %v", r.Error.GetKind())
	}
}

func FuzzInterpretAlwaysYieldsExactlyOne(f *testing.F) {
	for _, row := range table {
		f.Add(uint8(row.turn.Ending), []byte(row.turn.Response.Result), []byte(row.turn.Response.Error), row.turn.Text.Kept, row.turn.Failure.Detail, row.turn.OmitText)
	}
	f.Add(uint8(1), []byte(`{"stopReason":"end_turn","usage":{"inputTokens":"x"}}`), []byte(nil), "", "", false)
	f.Add(uint8(1), []byte(nil), []byte(`{"code":1e400,"message":7}`), "\xff\xfe", "", true)
	f.Fuzz(func(t *testing.T, ending uint8, result, rpcError []byte, text, detail string, omit bool) {
		turn := outcome.Turn{
			Ending:   outcome.Ending(ending % 5),
			Response: outcome.Response{Result: nilIfEmpty(result), Error: nilIfEmpty(rpcError)},
			Failure:  outcome.Failure{Detail: detail},
			Text:     outcome.WholeText(text),
			OmitText: omit,
		}
		r := outcome.Interpreter{PartialCap: 64}.Interpret(turn)
		mustBeExactlyOne(t, r)
		if r.Error != nil {
			if r.Error.GetMessage() == "" || r.Error.GetKind() == nil {
				t.Fatalf("incomplete error: %v", r.Error)
			}
			if (text == "") != (r.Error.GetPartial() == nil) {
				t.Fatalf("partial presence %v for text %q", r.Error.GetPartial() != nil, text)
			}
			if len(r.Error.GetPartial().GetText()) > 64 {
				t.Fatalf("partial over its cap: %d", len(r.Error.GetPartial().GetText()))
			}
		}
		if r.Outcome != nil && r.Outcome.GetStopReason() != "end_turn" {
			t.Fatalf("an outcome other than end_turn: %v", r.Outcome)
		}
		if o := r.Outcome; o != nil {
			if o.GetTextOmitted() != omit || (o.GetTextOmission() == acpgatev1.TextOmission_TEXT_OMISSION_REQUESTED) != omit {
				t.Fatalf("text_omitted %v (%v) for omit %v", o.GetTextOmitted(), o.GetTextOmission(), omit)
			}
			if omit && (o.GetText() != "" || o.GetTextBytes() != uint64(len(text))) {
				t.Fatalf("omitted outcome carries text %q or the wrong length %d (want %d)", o.GetText(), o.GetTextBytes(), len(text))
			}
			if !omit && (o.GetText() != text || o.GetTextBytes() != 0) {
				t.Fatalf("outcome text %q (bytes %d), want %q", o.GetText(), o.GetTextBytes(), text)
			}
		}
	})
}

func nilIfEmpty(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return json.RawMessage(b)
}

func mustBeExactlyOne(t *testing.T, r outcome.Result) {
	t.Helper()
	if (r.Outcome == nil) == (r.Error == nil) {
		t.Fatalf("want exactly one of outcome and error, got outcome=%v error=%v", r.Outcome, r.Error)
	}
}

func mustOutcome(t *testing.T, r outcome.Result) *acpgatev1.PromptOutcome {
	t.Helper()
	if r.Outcome == nil {
		t.Fatalf("want an outcome, got error %v", r.Error)
	}
	return r.Outcome
}

func mustError(t *testing.T, r outcome.Result) *acpgatev1.HarnessError {
	t.Helper()
	if r.Error == nil {
		t.Fatalf("want an error, got outcome %v", r.Outcome)
	}
	if r.Error.GetMessage() == "" {
		t.Fatal("an error without a message")
	}
	return r.Error
}

func mustContain(t *testing.T, s string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(s, p) {
			t.Errorf("%q does not contain %q", s, p)
		}
	}
}

func mustHavePrefix(t *testing.T, s, prefix string) {
	t.Helper()
	if !strings.HasPrefix(s, prefix) {
		t.Errorf("%q does not start with %q", s, prefix)
	}
}

func mustNotFabricatePartial(t *testing.T, e *acpgatev1.HarnessError) {
	t.Helper()
	if e.GetPartial() != nil || strings.Contains(e.GetMessage(), "partial output") {
		t.Errorf("a partial was fabricated for a turn without text: %v", e)
	}
}

// compareGolden checks the row's terminal event against its golden file.
func compareGolden(t *testing.T, name string, r outcome.Result) {
	t.Helper()
	event := &acpgatev1.PromptEvent{}
	if r.Outcome != nil {
		event.Event = &acpgatev1.PromptEvent_Outcome{Outcome: r.Outcome}
	} else {
		event.Event = &acpgatev1.PromptEvent_Error{Error: r.Error}
	}
	path := filepath.Join("testdata", "golden", name+".json")
	if *update {
		raw, err := protojson.Marshal(event)
		if err != nil {
			t.Fatal(err)
		}
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, raw, "", "  "); err != nil {
			t.Fatal(err)
		}
		pretty.WriteByte('\n')
		if err := os.WriteFile(path, pretty.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden file: %v (run go test ./outcome -update to create it)", err)
	}
	var golden acpgatev1.PromptEvent
	if err := protojson.Unmarshal(want, &golden); err != nil {
		t.Fatalf("golden %s: %v", path, err)
	}
	if !proto.Equal(&golden, event) {
		got, _ := protojson.Marshal(event)
		t.Errorf("terminal differs from %s\n got: %s\nwant: %s", path, got, want)
	}
}

func TestAnErrorFromATextKeptInPartIsTheErrorFromTheWholeText(t *testing.T) {
	for _, in := range []outcome.Interpreter{{}, {PartialCap: 64}, {PartialCap: 5000}} {
		keep := in.KeepBytes()
		for _, n := range []int{keep - 2, keep - 1, keep, keep + 1, keep + 7, 3 * keep} {
			for shift := range 5 {
				// Three-byte characters, shifted so that every cut falls
				// inside one in some case.
				whole := (strings.Repeat("x", shift) + strings.Repeat("ab€", n/5+1))[:n]
				checkKeptInPart(t, in, whole)
			}
		}
	}
}

func checkKeptInPart(t *testing.T, in outcome.Interpreter, whole string) {
	t.Helper()
	keep := in.KeepBytes()
	n := len(whole)
	for _, ending := range []string{`{"stopReason":"refusal"}`, `{"stopReason":"max_tokens"}`, `{"stopReason":"cancelled"}`} {
		full := answered(ending, "", whole)
		part := full
		part.Text = outcome.Text{Kept: whole[:min(len(whole), keep)], Bytes: len(whole)}
		part.FinalMessage = outcome.Text{Bytes: len(lastMessage(whole))}
		want, got := in.Interpret(full), in.Interpret(part)
		if !proto.Equal(want.Error, got.Error) || want.Error == nil {
			t.Fatalf("cap %d, %d bytes, %s:\nwhole: %v\npart:  %v", in.PartialCap, n, ending, want.Error, got.Error)
		}
	}
}

func TestATextNotKeptWholeIsNeverHandedOverAsTheAnswer(t *testing.T) {
	turn := answered(`{"stopReason":"end_turn"}`, "", "")
	turn.Text = outcome.Text{Kept: "the beginn", Bytes: 100}
	turn.FinalMessage = outcome.Text{Bytes: 40}
	o := mustOutcome(t, outcome.Interpreter{}.Interpret(turn))
	if o.GetText() != "" || !o.GetTextOmitted() || o.GetTextBytes() != 100 || o.GetFinalMessageBytes() != 40 {
		t.Errorf("outcome %v", o)
	}
}

func TestAnOutcomeWhoseTextWasNotKeptSaysWhy(t *testing.T) {
	for _, why := range []acpgatev1.TextOmission{
		acpgatev1.TextOmission_TEXT_OMISSION_ANSWER_LIMIT,
		acpgatev1.TextOmission_TEXT_OMISSION_CLIENT_GONE,
	} {
		turn := answered(`{"stopReason":"end_turn"}`, "", "")
		turn.Text = outcome.Text{Kept: "the beginn", Bytes: 100}
		turn.FinalMessage = outcome.Text{Bytes: 40}
		turn.Unkept = why
		o := mustOutcome(t, outcome.Interpreter{}.Interpret(turn))
		if o.GetText() != "" || !o.GetTextOmitted() || o.GetTextOmission() != why || o.GetTextBytes() != 100 || o.GetFinalMessageBytes() != 40 {
			t.Errorf("%v: outcome %v", why, o)
		}
	}
}

func TestAnOutcomeWhoseTextWasKeptWholeAllTheSameCarriesIt(t *testing.T) {
	turn := answered(`{"stopReason":"end_turn"}`, "", "short\n\nanswer")
	turn.Unkept = acpgatev1.TextOmission_TEXT_OMISSION_ANSWER_LIMIT
	o := mustOutcome(t, outcome.Interpreter{}.Interpret(turn))
	if o.GetText() != "short\n\nanswer" || o.GetFinalMessage() != "answer" || o.GetTextOmitted() ||
		o.GetTextOmission() != acpgatev1.TextOmission_TEXT_OMISSION_UNSPECIFIED {
		t.Errorf("outcome %v", o)
	}
}

// A log line names a failure without the agent's answer: MessageWithoutPartial
// takes the quoted partial output off the message, whatever the agent's own
// words in it, and leaves a message that quotes none as it is.
func TestTheMessageWithoutPartialHoldsNoneOfTheAnswer(t *testing.T) {
	long := strings.Repeat("secret answer é ", 500) // 8,500 bytes: cut in the message
	cases := map[string]outcome.Turn{
		"a refusal with a short partial":       answered(`{"stopReason":"refusal"}`, "", "secret answer"),
		"max_tokens with a long partial":       answered(`{"stopReason":"max_tokens"}`, "", long),
		"an error whose words mimic the label": answered("", `{"code":-32603,"message":"boom; partial output: not the answer"}`, "secret answer"),
	}
	for name, turn := range cases {
		for _, in := range []outcome.Interpreter{{}, {PartialCap: 1001}} {
			e := mustError(t, in.Interpret(turn))
			got := outcome.MessageWithoutPartial(e)
			if strings.Contains(got, "secret answer") || !strings.HasPrefix(e.GetMessage(), got) || got == "" {
				t.Errorf("%s (cap %d): %q from %q", name, in.PartialCap, got, e.GetMessage())
			}
		}
	}
	plain := mustError(t, outcome.Interpreter{}.Interpret(answered(`{"stopReason":"refusal"}`, "", "")))
	if got := outcome.MessageWithoutPartial(plain); got != plain.GetMessage() {
		t.Errorf("a message quoting no partial came back as %q, not %q", got, plain.GetMessage())
	}
}

func TestATextInPiecesEndsExactlyAsTheSameTextInOneString(t *testing.T) {
	pieces := []string{"first", "\n\n", strings.Repeat("é", 5_000), strings.Repeat("x", 3)}
	final := pieces[2:]
	in := outcome.Interpreter{PartialCap: 1_000} // mid-character: the cut steps back
	for _, result := range []string{`{"stopReason":"end_turn"}`, `{"stopReason":"refusal"}`, `{"stopReason":"max_tokens"}`, `{"stopReason":"cancelled"}`} {
		whole := answered(result, "", strings.Join(pieces, ""))
		inPieces := whole
		inPieces.Text, inPieces.FinalMessage = outcome.WholePieces(pieces), outcome.WholePieces(final)
		want, got := in.Interpret(whole), in.Interpret(inPieces)
		if got.Outcome != nil && (got.Outcome.GetText() != "" || len(got.TextPieces) != len(pieces) || len(got.FinalPieces) != len(final)) {
			t.Errorf("%s: the outcome holds %d bytes of text and %d and %d pieces; want none and the pieces", result, len(got.Outcome.GetText()), len(got.TextPieces), len(got.FinalPieces))
		}
		joined := got.Joined()
		if !proto.Equal(joined.Outcome, want.Outcome) || !proto.Equal(joined.Error, want.Error) {
			t.Errorf("%s: in pieces, ends as\n%v %v\nwant\n%v %v", result, joined.Outcome, joined.Error, want.Outcome, want.Error)
		}
	}
}
