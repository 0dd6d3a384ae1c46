package main

import (
	"bytes"
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acpgate/acpgate/internal/exitcode"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/testutil"
)

// fakeGateway is a scripted AgentGatewayServer.
type fakeGateway struct {
	acpgatev1.UnimplementedAgentGatewayServer

	// Prompt: fail with promptErr, or send events; then, with waitCancel,
	// block until Cancel is called (and send afterCancel) or the call ends;
	// finally end with endErr (nil for OK).
	promptErr   error
	events      []*acpgatev1.PromptEvent
	waitCancel  bool
	afterCancel []*acpgatev1.PromptEvent
	endErr      error

	// Cancel answers cancelResp, or fails with cancelErr.
	cancelResp bool
	cancelErr  error

	agents   *acpgatev1.ListAgentsResponse
	sessions *acpgatev1.ListSessionsResponse
	listErr  error

	// ListTurns serves turns in pages of at most turnsPage (all when 0),
	// the page token being the offset; GetTurn finds one of them.
	turns     []*acpgatev1.Turn
	turnsPage int

	// WatchTurn: fail with watchErr, or send watchEvents and end with
	// watchEndErr.
	watchErr    error
	watchEvents []*acpgatev1.PromptEvent
	watchEndErr error

	cancelOnce sync.Once
	cancelled  chan struct{} // closed by the first Cancel call

	mu              sync.Mutex
	prompts         []*acpgatev1.PromptRequest
	watches         []*acpgatev1.WatchTurnRequest
	turnLists       []*acpgatev1.ListTurnsRequest
	cancels         []string
	streamCancelled bool // a Prompt call ended by the client cancelling it
}

func (f *fakeGateway) Prompt(req *acpgatev1.PromptRequest, stream grpc.ServerStreamingServer[acpgatev1.PromptEvent]) error {
	f.mu.Lock()
	f.prompts = append(f.prompts, req)
	f.mu.Unlock()
	if f.promptErr != nil {
		return f.promptErr
	}
	if err := cliSend(stream, f.events); err != nil {
		// The client may let the call go while the events are still
		// being sent (a detached prompt leaves after started).
		if stream.Context().Err() != nil {
			f.mu.Lock()
			f.streamCancelled = true
			f.mu.Unlock()
		}
		return err
	}
	if f.waitCancel {
		select {
		case <-f.cancelled:
			if err := cliSend(stream, f.afterCancel); err != nil {
				return err
			}
		case <-stream.Context().Done():
			f.mu.Lock()
			f.streamCancelled = true
			f.mu.Unlock()
			return stream.Context().Err()
		}
	}
	return f.endErr
}

func (f *fakeGateway) WatchTurn(req *acpgatev1.WatchTurnRequest, stream grpc.ServerStreamingServer[acpgatev1.PromptEvent]) error {
	f.mu.Lock()
	f.watches = append(f.watches, req)
	f.mu.Unlock()
	if f.watchErr != nil {
		return f.watchErr
	}
	if err := cliSend(stream, f.watchEvents); err != nil {
		return err
	}
	return f.watchEndErr
}

func (f *fakeGateway) ListTurns(_ context.Context, req *acpgatev1.ListTurnsRequest) (*acpgatev1.ListTurnsResponse, error) {
	f.mu.Lock()
	f.turnLists = append(f.turnLists, proto.Clone(req).(*acpgatev1.ListTurnsRequest))
	f.mu.Unlock()
	from, _ := strconv.Atoi(req.GetPageToken())
	n := int(req.GetPageSize())
	if f.turnsPage > 0 {
		n = min(n, f.turnsPage)
	}
	to := min(from+n, len(f.turns))
	resp := &acpgatev1.ListTurnsResponse{Turns: f.turns[from:to]}
	if to < len(f.turns) {
		resp.NextPageToken = strconv.Itoa(to)
	}
	return resp, nil
}

func (f *fakeGateway) GetTurn(_ context.Context, req *acpgatev1.GetTurnRequest) (*acpgatev1.Turn, error) {
	for _, t := range f.turns {
		if t.GetTurnId() == req.GetTurnId() {
			return t, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "no turn %q (unknown, or past its retention)", req.GetTurnId())
}

// cliSend sends events on stream, in order.
func cliSend(stream grpc.ServerStreamingServer[acpgatev1.PromptEvent], events []*acpgatev1.PromptEvent) error {
	for _, ev := range events {
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeGateway) Cancel(_ context.Context, req *acpgatev1.CancelRequest) (*acpgatev1.CancelResponse, error) {
	f.mu.Lock()
	f.cancels = append(f.cancels, req.GetSessionId())
	f.mu.Unlock()
	if f.cancelErr != nil {
		return nil, f.cancelErr
	}
	if len(f.afterCancel) > 0 {
		f.cancelOnce.Do(func() { close(f.cancelled) })
	}
	return &acpgatev1.CancelResponse{Cancelled: f.cancelResp}, nil
}

func (f *fakeGateway) ListAgents(context.Context, *acpgatev1.ListAgentsRequest) (*acpgatev1.ListAgentsResponse, error) {
	if f.listErr != nil {
		return nil, f.listErr
	}
	return f.agents, nil
}

func (f *fakeGateway) ListSessions(context.Context, *acpgatev1.ListSessionsRequest) (*acpgatev1.ListSessionsResponse, error) {
	if f.listErr != nil {
		return nil, f.listErr
	}
	return f.sessions, nil
}

func (f *fakeGateway) snapshot() (prompts []*acpgatev1.PromptRequest, cancels []string, streamCancelled bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*acpgatev1.PromptRequest(nil), f.prompts...), append([]string(nil), f.cancels...), f.streamCancelled
}

// cliServe serves f on a loopback port and returns its address.
func cliServe(t *testing.T, f *fakeGateway) string {
	t.Helper()
	if f.cancelled == nil {
		f.cancelled = make(chan struct{})
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	acpgatev1.RegisterAgentGatewayServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// cliDeadAddr is a loopback address nothing listens on.
func cliDeadAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	return addr
}

// cliRun runs a client subcommand and returns its exit code and output.
func cliRun(t *testing.T, name string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code, handled := runClient(t.Context(), name, args, &out, &errOut)
	if !handled {
		t.Fatalf("runClient(%q) not handled", name)
	}
	return code, out.String(), errOut.String()
}

// cliScript numbers events from 1 and stamps them, as the gateway does.
func cliScript(events ...*acpgatev1.PromptEvent) []*acpgatev1.PromptEvent {
	for i, ev := range events {
		ev.Seq = uint64(i + 1)
		ev.Time = timestamppb.New(time.Date(2026, 1, 2, 3, 4, 5, i*1000, time.UTC))
	}
	return events
}

func cliStarted(session string) *acpgatev1.PromptEvent {
	return &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_Started{Started: &acpgatev1.TurnStarted{
		TurnId: "turn-1", SessionId: session, Agent: "demo"}}}
}

func cliChunk(id, text string) *acpgatev1.PromptEvent {
	return &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_AgentMessageChunk{AgentMessageChunk: &acpgatev1.MessageChunk{
		MessageId: id, Text: text}}}
}

func cliThought(text string) *acpgatev1.PromptEvent {
	return &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_AgentThoughtChunk{AgentThoughtChunk: &acpgatev1.MessageChunk{Text: text}}}
}

func cliOutcome(session, text, final string) *acpgatev1.PromptEvent {
	return &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_Outcome{Outcome: &acpgatev1.PromptOutcome{
		Text: text, FinalMessage: final, StopKind: acpgatev1.StopKind_STOP_KIND_END_TURN, StopReason: "end_turn",
		SessionId: session, TurnId: "turn-1"}}}
}

func cliError(e *acpgatev1.HarnessError) *acpgatev1.PromptEvent {
	return &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_Error{Error: e}}
}

func cliCancelledError() *acpgatev1.HarnessError {
	return &acpgatev1.HarnessError{
		Message: "the prompt turn was cancelled by the client",
		Kind: &acpgatev1.HarnessError_Harness{Harness: &acpgatev1.HarnessFailure{
			StopKind: acpgatev1.StopKind_STOP_KIND_CANCELLED, Cancelled: true}},
	}
}

func TestCLIPromptPrintsChunksAndSeparatesMessages(t *testing.T) {
	str := func(s string) *string { return &s }
	f := &fakeGateway{events: cliScript(
		cliStarted("s1"),
		cliChunk("m1", "Hel"),
		cliThought("pondering"),
		cliThought(" more"),
		cliChunk("m1", "lo"),
		cliChunk("m2", "World"),
		&acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_ToolCall{ToolCall: &acpgatev1.ToolCall{
			ToolCallId: "t1", Title: "Read file", Kind: "read", Status: "pending"}}},
		&acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_ToolCallUpdate{ToolCallUpdate: &acpgatev1.ToolCallUpdate{
			ToolCallId: "t1", Status: str("completed")}}},
		cliChunk("", "after"),
		&acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_Plan{Plan: &acpgatev1.Plan{Entries: []*acpgatev1.PlanEntry{
			{Content: "look", Status: "completed"}, {Content: "answer", Status: "in_progress"}}}}},
		cliChunk("", " tools"),
		&acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_PermissionRequested{PermissionRequested: &acpgatev1.PermissionRequest{
			RequestId: "p1",
			ToolCall:  &acpgatev1.ToolCallUpdate{ToolCallId: "t2", Title: str("Write file")},
			Options: []*acpgatev1.PermissionOption{
				{OptionId: "yes", Name: "Allow", Kind: "allow_once"}, {OptionId: "no", Name: "Reject", Kind: "reject_once"}},
		}}},
		&acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_PermissionRequested{PermissionRequested: &acpgatev1.PermissionRequest{
			RequestId: "p1",
			ToolCall:  &acpgatev1.ToolCallUpdate{ToolCallId: "t2", Title: str("Write file")},
			Options: []*acpgatev1.PermissionOption{
				{OptionId: "yes", Name: "Allow", Kind: "allow_once"}, {OptionId: "no", Name: "Reject", Kind: "reject_once"}},
			Decision: &acpgatev1.PermissionDecision{OptionId: "no", DecidedBy: acpgatev1.PermissionDecider_PERMISSION_DECIDER_POLICY, Reason: "policy reject"},
		}}},
		&acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_CurrentMode{CurrentMode: &acpgatev1.CurrentMode{ModeId: "code"}}},
		&acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_Usage{Usage: &acpgatev1.Usage{}}},
		cliChunk("", "line\n"),
		cliChunk("m3", "!"),
		cliOutcome("s1", "Hello\n\nWorld\n\nafter tools\n\nline\n\n\n!", "!"),
	)}
	addr := cliServe(t, f)

	code, stdout, stderr := cliRun(t, "prompt", "--addr", addr, "--agent", "demo", "--cwd", "sub", "say", "hello")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	// stdout is exactly the outcome's text plus a final newline.
	if want := "Hello\n\nWorld\n\nafter tools\n\nline\n\n\n!\n"; stdout != want {
		t.Errorf("stdout = %q, want %q", stdout, want)
	}
	for _, want := range []string{
		"· thinking: pondering more\n",
		"· tool: Read file [pending]\n",
		"· tool: Read file [completed]\n",
		"· plan: [completed] look; [in_progress] answer\n",
		"· permission: Write file: waiting for a client (request p1; options allow_once=yes, reject_once=no)\n",
		"· permission: Write file → Reject (reject_once), by policy: policy reject\n",
		"· mode: code\n",
		"· end_turn (session s1)\n",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "acpgate:") {
		t.Errorf("stderr reports an error:\n%s", stderr)
	}
	prompts, _, _ := f.snapshot()
	want := &acpgatev1.PromptRequest{Agent: "demo", Cwd: "sub", Text: "say hello"}
	if len(prompts) != 1 || !proto.Equal(prompts[0], want) {
		t.Errorf("requests = %v, want [%v]", prompts, want)
	}
}

func TestCLIPromptOutcomeText(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events []*acpgatev1.PromptEvent
		stdout string
	}{
		{"newline_kept", []*acpgatev1.PromptEvent{cliChunk("", "done\n"), cliOutcome("s", "done\n", "done\n")}, "done\n"},
		{"empty_answer", []*acpgatev1.PromptEvent{cliOutcome("s", "", "")}, ""},
		{"unstreamed_text", []*acpgatev1.PromptEvent{cliOutcome("s", "hi", "hi")}, "hi\n"},
		{"id_to_none", []*acpgatev1.PromptEvent{cliChunk("a", "x"), cliChunk("", "y"), cliOutcome("s", "x\n\ny", "y")}, "x\n\ny\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeGateway{events: cliScript(append([]*acpgatev1.PromptEvent{cliStarted("s")}, tc.events...)...)}
			addr := cliServe(t, f)
			code, stdout, stderr := cliRun(t, "prompt", "--addr", addr, "--session", "s", "hi")
			if code != 0 || stdout != tc.stdout {
				t.Errorf("exit %d, stdout %q; want 0, %q; stderr:\n%s", code, stdout, tc.stdout, stderr)
			}
		})
	}
}

func TestCLIPromptReadsStdin(t *testing.T) {
	f := &fakeGateway{events: cliScript(cliStarted("s"), cliOutcome("s", "", ""))}
	addr := cliServe(t, f)
	old := clientStdin
	t.Cleanup(func() { clientStdin = old })
	clientStdin = strings.NewReader("from\nstdin\n")
	if code, _, stderr := cliRun(t, "prompt", "--addr", addr, "--session", "s", "-"); code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	prompts, _, _ := f.snapshot()
	if len(prompts) != 1 || prompts[0].GetText() != "from\nstdin\n" || prompts[0].GetSessionId() != "s" {
		t.Errorf("requests = %v", prompts)
	}
}

func TestCLIPromptErrorArms(t *testing.T) {
	exit := int32(137)
	rpc := int32(-32603)
	for _, tc := range []struct {
		name  string
		err   *acpgatev1.HarnessError
		code  int
		label string
	}{
		{"transport", &acpgatev1.HarnessError{Kind: &acpgatev1.HarnessError_Transport{Transport: &acpgatev1.TransportFailure{
			Reason: acpgatev1.TransportReason_TRANSPORT_REASON_STREAM_ENDED, ExitCode: &exit, StderrTail: "boom\nbang\n"}}}, 3, "transport"},
		{"protocol", &acpgatev1.HarnessError{Kind: &acpgatev1.HarnessError_Protocol{Protocol: &acpgatev1.ProtocolViolation{Detail: "x"}}}, 4, "protocol"},
		{"harness", &acpgatev1.HarnessError{Kind: &acpgatev1.HarnessError_Harness{Harness: &acpgatev1.HarnessFailure{RpcCode: &rpc, RpcMessage: "internal"}}}, 5, "harness"},
		{"max_tokens", &acpgatev1.HarnessError{Kind: &acpgatev1.HarnessError_Harness{Harness: &acpgatev1.HarnessFailure{StopKind: acpgatev1.StopKind_STOP_KIND_MAX_TOKENS}}}, 5, "harness"},
		{"policy_refused", &acpgatev1.HarnessError{Kind: &acpgatev1.HarnessError_PolicyRefused{PolicyRefused: &acpgatev1.PolicyRefusal{
			Detection: acpgatev1.RefusalDetection_REFUSAL_DETECTION_STRUCTURED}}}, 6, "policy_refused"},
		{"cancelled", cliCancelledError(), 7, "harness"},
		{"auth_required", &acpgatev1.HarnessError{Kind: &acpgatev1.HarnessError_Harness{Harness: &acpgatev1.HarnessFailure{AuthRequired: true}}}, 8, "harness"},
		{"capability_not_supported", &acpgatev1.HarnessError{Kind: &acpgatev1.HarnessError_CapabilityNotSupported{
			CapabilityNotSupported: &acpgatev1.CapabilityNotSupported{Primitive: "session/load"}}}, 9, "capability_not_supported"},
		{"stale_target", &acpgatev1.HarnessError{Kind: &acpgatev1.HarnessError_StaleTarget{StaleTarget: &acpgatev1.StaleTarget{Detail: "gone"}}}, 10, "stale_target"},
		{"gateway", &acpgatev1.HarnessError{Retryable: true, Kind: &acpgatev1.HarnessError_Gateway{Gateway: &acpgatev1.GatewayFailure{Detail: "disk full"}}}, 11, "gateway"},
		{"unknown_class", &acpgatev1.HarnessError{}, 5, "error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err.Message == "" {
				tc.err.Message = "the " + tc.name + " failure; partial output: part"
			}
			tc.err.Partial = &acpgatev1.PartialOutput{Text: "part", TotalBytes: 4}
			f := &fakeGateway{events: cliScript(cliStarted("s1"), cliChunk("", "part"), cliError(tc.err))}
			addr := cliServe(t, f)

			code, stdout, stderr := cliRun(t, "prompt", "--addr", addr, "--agent", "demo", "go")
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.code, stderr)
			}
			if stdout != "part\n" {
				t.Errorf("stdout = %q, want %q", stdout, "part\n")
			}
			if want := "acpgate: " + tc.label + ": " + tc.err.Message + "\n"; !strings.Contains(stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, stderr)
			}
			if strings.Contains(stderr, "end_turn") {
				t.Errorf("a failed turn reported end_turn:\n%s", stderr)
			}
			if tc.name == "transport" && !strings.Contains(stderr, "  | boom\n  | bang\n") {
				t.Errorf("stderr lacks the agent's stderr tail:\n%s", stderr)
			}

			// --json: the same exit code, and stdout holds only the events.
			code, stdout, _ = cliRun(t, "prompt", "--addr", addr, "--json", "--agent", "demo", "go")
			if code != tc.code {
				t.Errorf("--json: exit %d, want %d", code, tc.code)
			}
			cliCheckJSONLines(t, stdout, f.events)
		})
	}
}

// cliCheckJSONLines checks that stdout is one protojson line per event and
// that each line round-trips to its event.
func cliCheckJSONLines(t *testing.T, stdout string, events []*acpgatev1.PromptEvent) {
	t.Helper()
	if !strings.HasSuffix(stdout, "\n") {
		t.Errorf("--json output does not end with a newline: %q", stdout)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if len(lines) != len(events) {
		t.Fatalf("--json printed %d lines for %d events:\n%s", len(lines), len(events), stdout)
	}
	for i, line := range lines {
		var got acpgatev1.PromptEvent
		if err := protojson.Unmarshal([]byte(line), &got); err != nil {
			t.Errorf("line %d is not protojson: %v\n%s", i+1, err, line)
			continue
		}
		if !proto.Equal(&got, events[i]) {
			t.Errorf("line %d = %v, want %v", i+1, &got, events[i])
		}
	}
}

func TestCLIPromptJSON(t *testing.T) {
	f := &fakeGateway{events: cliScript(
		cliStarted("s1"),
		cliChunk("m1", "multi\nline \"quoted\""),
		cliThought("hmm"),
		&acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_Raw{Raw: &acpgatev1.RawUpdate{Kind: "future", Json: "{\n \"a\": 1\n}"}}},
		cliOutcome("s1", "multi\nline \"quoted\"", "multi\nline \"quoted\""),
	)}
	addr := cliServe(t, f)
	code, stdout, stderr := cliRun(t, "prompt", "--addr", addr, "--json", "--session", "s1", "hi")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	cliCheckJSONLines(t, stdout, f.events)
	if stderr != "" {
		t.Errorf("--json wrote to stderr on success:\n%s", stderr)
	}
}

// cliHeartbeat is a heartbeat as the gateway sends it: seq 0, outside the
// numbering of the other events.
func cliHeartbeat(lastSeq uint64) *acpgatev1.PromptEvent {
	return &acpgatev1.PromptEvent{Time: timestamppb.New(time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC)),
		Event: &acpgatev1.PromptEvent_Heartbeat{Heartbeat: &acpgatev1.Heartbeat{LastSeq: lastSeq}}}
}

func TestAPromptIgnoresHeartbeatsForPeopleAndPrintsThemInJSON(t *testing.T) {
	events := cliScript(cliStarted("s1"), cliChunk("m1", "Hel"), cliChunk("m1", "lo"), cliOutcome("s1", "Hello", "Hello"))
	// Heartbeats carry seq 0 between the numbered events.
	events = []*acpgatev1.PromptEvent{events[0], cliHeartbeat(1), events[1], cliHeartbeat(2), cliHeartbeat(2), events[2], events[3]}
	f := &fakeGateway{events: events}
	addr := cliServe(t, f)

	code, stdout, stderr := cliRun(t, "prompt", "--addr", addr, "--session", "s1", "hi")
	if code != exitcode.OK || stdout != "Hello\n" {
		t.Errorf("exit %d, stdout %q; want 0, %q; stderr:\n%s", code, stdout, "Hello\n", stderr)
	}
	if stderr != "· end_turn (session s1)\n" {
		t.Errorf("stderr = %q, want only the end_turn note", stderr)
	}

	code, stdout, stderr = cliRun(t, "prompt", "--addr", addr, "--json", "--session", "s1", "hi")
	if code != exitcode.OK || stderr != "" {
		t.Errorf("--json: exit %d, stderr %q", code, stderr)
	}
	cliCheckJSONLines(t, stdout, events)
}

func TestAPromptSendsItsRequestIDAndDisconnectPolicy(t *testing.T) {
	continueTurn, cancelTurn := acpgatev1.DisconnectPolicy_DISCONNECT_POLICY_CONTINUE, acpgatev1.DisconnectPolicy_DISCONNECT_POLICY_CANCEL
	for _, tc := range []struct {
		args      []string
		requestID string
		policy    acpgatev1.DisconnectPolicy
	}{
		{nil, "", acpgatev1.DisconnectPolicy_DISCONNECT_POLICY_UNSPECIFIED},
		{[]string{"--request-id", "job-7"}, "job-7", acpgatev1.DisconnectPolicy_DISCONNECT_POLICY_UNSPECIFIED},
		{[]string{"--request-id", "job-7", "--on-disconnect", "cancel"}, "job-7", cancelTurn},
		{[]string{"--on-disconnect", "continue"}, "", continueTurn},
		{[]string{"--request-id", "job-7", "--detach"}, "job-7", continueTurn},
		{[]string{"--detach"}, "", continueTurn},
		{[]string{"--detach", "--on-disconnect", "continue"}, "", continueTurn},
	} {
		f := &fakeGateway{events: cliScript(cliStarted("s1"), cliOutcome("s1", "ok", "ok"))}
		addr := cliServe(t, f)
		args := append(append([]string{"--addr", addr, "--agent", "demo"}, tc.args...), "hi")
		if code, _, stderr := cliRun(t, "prompt", args...); code != exitcode.OK {
			t.Errorf("%q: exit %d; stderr:\n%s", tc.args, code, stderr)
			continue
		}
		prompts, _, _ := f.snapshot()
		if len(prompts) != 1 || prompts[0].GetRequestId() != tc.requestID || prompts[0].GetOnDisconnect() != tc.policy {
			t.Errorf("%q: requests = %v, want request_id %q and on_disconnect %v", tc.args, prompts, tc.requestID, tc.policy)
		}
	}
}

func TestADetachedPromptPrintsTheTurnIDAtStartAndLeavesTheTurnRunning(t *testing.T) {
	for _, asJSON := range []bool{false, true} {
		// The fake turn never ends: only the command can end the call.
		f := &fakeGateway{events: cliScript(cliStarted("s1"), cliChunk("", "never shown")), waitCancel: true}
		addr := cliServe(t, f)
		args := []string{"--addr", addr, "--agent", "demo", "--request-id", "job-7", "--detach", "long task"}
		if asJSON {
			args = append([]string{"--json"}, args...)
		}
		code, stdout, stderr := cliRun(t, "prompt", args...)
		if code != exitcode.OK || stderr != "" {
			t.Errorf("--json=%v: exit %d, stderr %q; want 0 and nothing on stderr", asJSON, code, stderr)
		}
		if asJSON {
			cliCheckJSONLines(t, stdout, f.events[:1])
		} else if stdout != "turn-1\n" {
			t.Errorf("stdout = %q, want the turn id", stdout)
		}
		// The call was let go, not the turn cancelled.
		cliWaitFor(t, func() bool { _, _, sc := f.snapshot(); return sc })
		if _, cancels, _ := f.snapshot(); len(cancels) != 0 {
			t.Errorf("a detached prompt called Cancel on %q", cancels)
		}
	}
}

func TestADetachedPromptThatIsRejectedExitsAsAnAttachedOneWould(t *testing.T) {
	addr := cliServe(t, &fakeGateway{promptErr: status.Error(codes.AlreadyExists, "request_id \"job-7\" was used for another prompt")})
	code, stdout, stderr := cliRun(t, "prompt", "--addr", addr, "--agent", "demo", "--request-id", "job-7", "--detach", "hi")
	if code != exitcode.Rejected || stdout != "" || !strings.Contains(stderr, "acpgate: ALREADY_EXISTS: ") {
		t.Errorf("exit %d, stdout %q, stderr %q; want %d and ALREADY_EXISTS", code, stdout, stderr, exitcode.Rejected)
	}
}

func TestWatchShowsATurnAsPromptWouldAndExitsWithItsTerminal(t *testing.T) {
	transport := &acpgatev1.HarnessError{Message: "the agent exited; partial output: part", Retryable: true,
		Kind: &acpgatev1.HarnessError_Transport{Transport: &acpgatev1.TransportFailure{Reason: acpgatev1.TransportReason_TRANSPORT_REASON_STREAM_ENDED}}}
	events := cliScript(cliStarted("s1"), cliChunk("m1", "part"), cliThought("hmm"), cliError(transport))
	events = append(events[:2:2], append([]*acpgatev1.PromptEvent{cliHeartbeat(2)}, events[2:]...)...)
	f := &fakeGateway{watchEvents: events}
	addr := cliServe(t, f)

	// Flags may follow the turn id.
	code, stdout, stderr := cliRun(t, "watch", "--addr", addr, "turn-1", "--after", "0")
	if code != exitcode.Transport || stdout != "part\n" {
		t.Errorf("exit %d, stdout %q; want %d, %q; stderr:\n%s", code, stdout, exitcode.Transport, "part\n", stderr)
	}
	// The note breaks the answer's line on stderr only, as for prompt.
	if want := "\n· thinking: hmm\nacpgate: transport: the agent exited; partial output: part\n· retryable: running the same prompt again may succeed\n"; stderr != want {
		t.Errorf("stderr = %q, want %q", stderr, want)
	}

	code, stdout, _ = cliRun(t, "watch", "--addr", addr, "--json", "--after", "1", "turn-1")
	if code != exitcode.Transport {
		t.Errorf("--json: exit %d, want %d", code, exitcode.Transport)
	}
	cliCheckJSONLines(t, stdout, events) // heartbeats included

	f.mu.Lock()
	defer f.mu.Unlock()
	want := []*acpgatev1.WatchTurnRequest{{TurnId: "turn-1"}, {TurnId: "turn-1", AfterSeq: 1}}
	if len(f.watches) != len(want) || !proto.Equal(f.watches[0], want[0]) || !proto.Equal(f.watches[1], want[1]) {
		t.Errorf("WatchTurn requests = %v, want %v", f.watches, want)
	}
}

func TestWatchingAnUnknownTurnExitsAsAPromptRejectedWithNotFound(t *testing.T) {
	addr := cliServe(t, &fakeGateway{watchErr: status.Error(codes.NotFound, `no turn "t9" (unknown, or past its retention)`)})
	code, stdout, stderr := cliRun(t, "watch", "--addr", addr, "t9")
	if code != exitcode.Rejected || stdout != "" || stderr != "acpgate: NOT_FOUND: no turn \"t9\" (unknown, or past its retention)\n" {
		t.Errorf("exit %d, stdout %q, stderr %q; want %d and only NOT_FOUND", code, stdout, stderr, exitcode.Rejected)
	}
}

func TestAWatchCutOffMidTurnSaysWhereToResume(t *testing.T) {
	f := &fakeGateway{
		watchEvents: cliScript(cliStarted("s1"), cliChunk("", "half"), cliHeartbeat(0)),
		watchEndErr: status.Error(codes.Unavailable, "gone"),
	}
	f.watchEvents[2].Seq = 0 // a heartbeat is not where to resume
	addr := cliServe(t, f)
	code, stdout, stderr := cliRun(t, "watch", "--addr", addr, "turn-1")
	if code != exitcode.GatewayUnavailable || stdout != "half\n" {
		t.Errorf("exit %d, stdout %q; want %d, %q", code, stdout, exitcode.GatewayUnavailable, "half\n")
	}
	if want := "acpgate: UNAVAILABLE: gone\n· the turn goes on without this watch; resume with: acpgate watch --after 2 turn-1\n"; stderr != want {
		t.Errorf("stderr = %q, want %q", stderr, want)
	}
}

func TestCLIPromptStatus(t *testing.T) {
	detailed, err := status.New(codes.FailedPrecondition, "the agent refused to set up a session").WithDetails(&acpgatev1.HarnessError{
		Message: "the agent requires authentication",
		Kind:    &acpgatev1.HarnessError_Harness{Harness: &acpgatev1.HarnessFailure{AuthRequired: true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		f    *fakeGateway
		code int
		want []string
	}{
		{"invalid_argument", &fakeGateway{promptErr: status.Error(codes.InvalidArgument, "bad request")}, 64, []string{"acpgate: INVALID_ARGUMENT: bad request\n"}},
		{"not_found", &fakeGateway{promptErr: status.Error(codes.NotFound, "unknown agent")}, 65, []string{"acpgate: NOT_FOUND: unknown agent\n"}},
		{"failed_precondition", &fakeGateway{promptErr: detailed.Err()}, 65, []string{
			"acpgate: FAILED_PRECONDITION: the agent refused to set up a session\n",
			"acpgate: harness: the agent requires authentication\n"}},
		{"resource_exhausted", &fakeGateway{promptErr: status.Error(codes.ResourceExhausted, "too many sessions")}, 65, []string{"acpgate: RESOURCE_EXHAUSTED: too many sessions\n"}},
		{"internal", &fakeGateway{promptErr: status.Error(codes.Internal, "oops")}, 65, []string{"acpgate: INTERNAL: oops\n"}},
		{"unavailable", &fakeGateway{promptErr: status.Error(codes.Unavailable, "draining")}, 69, []string{"acpgate: UNAVAILABLE: draining\n"}},
		{"broken_mid_turn", &fakeGateway{events: cliScript(cliStarted("s"), cliChunk("", "half")), endErr: status.Error(codes.Unavailable, "gone")}, 69, []string{"acpgate: UNAVAILABLE: gone\n"}},
		{"no_terminal", &fakeGateway{events: cliScript(cliStarted("s"), cliChunk("", "half"))}, 4, []string{"acpgate: protocol: the gateway ended the stream without a terminal event\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := cliServe(t, tc.f)
			code, stdout, stderr := cliRun(t, "prompt", "--addr", addr, "--agent", "demo", "hi")
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if stdout != "" && stdout != "half\n" {
				t.Errorf("stdout = %q", stdout)
			}
		})
	}

	t.Run("unreachable", func(t *testing.T) {
		addr := cliDeadAddr(t)
		for _, args := range [][]string{
			{"prompt", "--addr", addr, "--agent", "demo", "hi"},
			{"agents", "--addr", addr},
			{"sessions", "--addr", addr},
			{"cancel", "--addr", addr, "s"},
		} {
			code, stdout, stderr := cliRun(t, args[0], args[1:]...)
			if code != 69 || stdout != "" || !strings.HasPrefix(stderr, "acpgate: UNAVAILABLE: ") {
				t.Errorf("%s: exit %d, stdout %q, stderr %q; want 69 and UNAVAILABLE", args[0], code, stdout, stderr)
			}
		}
	})
}

// cliInterrupt runs a prompt against f, cancels its context once ready
// reports true, and returns the result.
func cliInterrupt(t *testing.T, f *fakeGateway, ready func(stdout string) bool) (code int, stdout, stderr string) {
	t.Helper()
	addr := cliServe(t, f)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out, errOut testutil.LockedBuffer
	result := make(chan int, 1)
	go func() {
		code, _ := runClient(ctx, "prompt", []string{"--addr", addr, "--agent", "demo", "long task"}, &out, &errOut)
		result <- code
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !ready(out.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("the prompt never became ready; stdout %q, stderr %q", out.String(), errOut.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case code = <-result:
	case <-time.After(20 * time.Second):
		t.Fatal("the interrupted prompt did not return")
	}
	return code, out.String(), errOut.String()
}

func TestCLIPromptInterrupt(t *testing.T) {
	started := func(stdout string) bool { return strings.Contains(stdout, "partial") }

	t.Run("cancels_the_session_and_reads_the_terminal", func(t *testing.T) {
		f := &fakeGateway{
			events:      cliScript(cliStarted("s1"), cliChunk("", "partial")),
			waitCancel:  true,
			cancelResp:  true,
			afterCancel: []*acpgatev1.PromptEvent{cliError(cliCancelledError())},
		}
		code, stdout, stderr := cliInterrupt(t, f, started)
		if code != 7 {
			t.Errorf("exit %d, want 7; stderr:\n%s", code, stderr)
		}
		if stdout != "partial\n" {
			t.Errorf("stdout = %q", stdout)
		}
		if !strings.Contains(stderr, "acpgate: harness: the prompt turn was cancelled by the client\n") {
			t.Errorf("stderr lacks the cancellation terminal:\n%s", stderr)
		}
		_, cancels, streamCancelled := f.snapshot()
		if len(cancels) != 1 || cancels[0] != "s1" {
			t.Errorf("Cancel calls = %q, want [s1]", cancels)
		}
		if streamCancelled {
			t.Error("the Prompt call was cancelled instead of read to its end")
		}
	})

	t.Run("abandons_the_call_when_no_terminal_comes", func(t *testing.T) {
		old := clientCancelWait
		t.Cleanup(func() { clientCancelWait = old })
		clientCancelWait = 50 * time.Millisecond
		f := &fakeGateway{events: cliScript(cliStarted("s1"), cliChunk("", "partial")), waitCancel: true}
		code, _, stderr := cliInterrupt(t, f, started)
		if code != 7 || !strings.Contains(stderr, "acpgate: cancelled: interrupted\n") {
			t.Errorf("exit %d, want 7 and an interruption; stderr:\n%s", code, stderr)
		}
		cliWaitFor(t, func() bool { _, c, sc := f.snapshot(); return len(c) == 1 && sc })
	})

	t.Run("abandons_the_call_when_cancel_fails", func(t *testing.T) {
		f := &fakeGateway{events: cliScript(cliStarted("s1"), cliChunk("", "partial")), waitCancel: true,
			cancelErr: status.Error(codes.Internal, "no")}
		code, _, stderr := cliInterrupt(t, f, started)
		if code != 7 || !strings.Contains(stderr, "acpgate: cancelled: interrupted\n") {
			t.Errorf("exit %d, want 7 and an interruption; stderr:\n%s", code, stderr)
		}
		cliWaitFor(t, func() bool { _, _, sc := f.snapshot(); return sc })
	})

	t.Run("before_the_turn_started", func(t *testing.T) {
		f := &fakeGateway{waitCancel: true}
		code, stdout, stderr := cliInterrupt(t, f, func(string) bool { p, _, _ := f.snapshot(); return len(p) == 1 })
		if code != 7 || stdout != "" || !strings.Contains(stderr, "acpgate: cancelled: interrupted\n") {
			t.Errorf("exit %d, stdout %q, stderr %q; want 7 and an interruption", code, stdout, stderr)
		}
		cliWaitFor(t, func() bool { _, c, sc := f.snapshot(); return len(c) == 0 && sc })
	})
}

// cliWaitFor waits until cond holds.
func cliWaitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition never held")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestCLIAgents(t *testing.T) {
	f := &fakeGateway{agents: &acpgatev1.ListAgentsResponse{Agents: []*acpgatev1.Agent{
		{Name: "demo", Description: "the built-in\ndemo agent", PermissionPolicy: "reject", FsRead: true, WarmTarget: 2, WarmReady: 1, WarmStarting: 1},
		{Name: "gemini", PermissionPolicy: "ask", FsRead: true, FsWrite: true, Capabilities: &acpgatev1.AgentCapabilities{
			ProtocolVersion: 1, AgentName: "gemini-cli", AgentVersion: "0.9.0", LoadSession: true, PromptImage: true,
			AuthMethods: []string{"oauth-personal"}},
			LastStartupFailure: &acpgatev1.StartupFailure{Message: "warm start-up failed:\nno key", At: timestamppb.Now()}},
	}}}
	addr := cliServe(t, f)
	code, stdout, stderr := cliRun(t, "agents", "--addr", addr)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("want a header, 2 rows and the failure:\n%s", stdout)
	}
	for i, want := range [][]string{
		{"NAME", "DESCRIPTION", "PERMISSIONS", "FS", "WARM", "CAPABILITIES"},
		{"demo", "the built-in demo agent", "reject", "r/-", "1/2 ready, 1 starting", "(unknown until a session starts)"},
		{"gemini", "-", "ask", "r/w", "acp v1; gemini-cli 0.9.0; load,image; auth: oauth-personal"},
		{"gemini: last start-up failed at ", "warm start-up failed: no key"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("line %d lacks %q: %q", i+1, w, lines[i])
			}
		}
	}

	code, stdout, _ = cliRun(t, "agents", "--addr", addr, "--json")
	var got acpgatev1.ListAgentsResponse
	if err := protojson.Unmarshal([]byte(stdout), &got); code != 0 || err != nil || !proto.Equal(&got, f.agents) || strings.Count(stdout, "\n") != 1 {
		t.Errorf("--json: exit %d, err %v, output %q", code, err, stdout)
	}

	empty := cliServe(t, &fakeGateway{agents: &acpgatev1.ListAgentsResponse{}})
	if code, stdout, _ := cliRun(t, "agents", "--addr", empty); code != 0 || stdout != "no agents configured\n" {
		t.Errorf("empty: exit %d, stdout %q", code, stdout)
	}
}

func TestCLISessions(t *testing.T) {
	f := &fakeGateway{sessions: &acpgatev1.ListSessionsResponse{Sessions: []*acpgatev1.Session{
		{Id: "sess-1", Agent: "demo", Cwd: "/srv/a", State: acpgatev1.SessionState_SESSION_STATE_IDLE, Turns: 3},
		{Id: "sess-2", Agent: "gemini", Cwd: "/srv/b c", State: acpgatev1.SessionState_SESSION_STATE_RUNNING, Turns: 1, CurrentTurnId: "t"},
	}}}
	addr := cliServe(t, f)
	t.Setenv("ACPGATE_ADDR", addr) // the default address comes from the environment
	code, stdout, stderr := cliRun(t, "sessions")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	want := [][]string{
		{"ID", "AGENT", "STATE", "TURNS", "CWD"},
		{"sess-1", "demo", "idle", "3", "/srv/a"},
		{"sess-2", "gemini", "running", "1", "/srv/b c"},
	}
	if len(lines) != len(want) {
		t.Fatalf("want a header and 2 rows:\n%s", stdout)
	}
	for i, w := range want {
		if got := strings.Fields(lines[i]); strings.Join(got, " ") != strings.Join(w, " ") {
			t.Errorf("line %d = %q, want fields %q", i+1, lines[i], w)
		}
	}

	code, stdout, _ = cliRun(t, "sessions", "--json")
	var got acpgatev1.ListSessionsResponse
	if err := protojson.Unmarshal([]byte(stdout), &got); code != 0 || err != nil || !proto.Equal(&got, f.sessions) {
		t.Errorf("--json: exit %d, err %v, output %q", code, err, stdout)
	}

	failing := cliServe(t, &fakeGateway{listErr: status.Error(codes.Unavailable, "draining")})
	if code, _, stderr := cliRun(t, "sessions", "--addr", failing); code != 69 || stderr != "acpgate: UNAVAILABLE: draining\n" {
		t.Errorf("failing: exit %d, stderr %q", code, stderr)
	}
	empty := cliServe(t, &fakeGateway{sessions: &acpgatev1.ListSessionsResponse{}})
	if code, stdout, _ := cliRun(t, "sessions", "--addr", empty); code != 0 || stdout != "no open sessions\n" {
		t.Errorf("empty: exit %d, stdout %q", code, stdout)
	}
}

// cliTurns are five turns, newest first: one running, the others ended in
// each way a turn ends.
func cliTurns() []*acpgatev1.Turn {
	at := func(sec int) *timestamppb.Timestamp {
		return timestamppb.New(time.Date(2026, 1, 2, 3, 4, sec, 0, time.UTC))
	}
	ended := func(id string, terminal *acpgatev1.PromptEvent) *acpgatev1.Turn {
		return &acpgatev1.Turn{TurnId: id, Attempt: 1, Agent: "demo", SessionId: "s1", State: acpgatev1.TurnState_TURN_STATE_ENDED,
			StartedAt: at(1), EndedAt: at(2), LastSeq: 4, Terminal: terminal}
	}
	transport := &acpgatev1.HarnessError{Message: "the agent\nexited", Retryable: true,
		Kind: &acpgatev1.HarnessError_Transport{Transport: &acpgatev1.TransportFailure{}}}
	return []*acpgatev1.Turn{
		{TurnId: "t5", RequestId: "job-7", Attempt: 2, Agent: "demo", SessionId: "s2", State: acpgatev1.TurnState_TURN_STATE_RUNNING,
			StartedAt: at(9), LastSeq: 3},
		ended("t4", cliError(transport)),
		ended("t3", cliError(cliCancelledError())),
		ended("t2", cliOutcome("s1", "hi", "hi")),
		{TurnId: "t1", Attempt: 1, Agent: "demo", State: acpgatev1.TurnState_TURN_STATE_ENDED, StartedAt: at(0), EndedAt: at(0), LastSeq: 2,
			Terminal: cliError(&acpgatev1.HarnessError{Kind: &acpgatev1.HarnessError_Transport{Transport: &acpgatev1.TransportFailure{}}})},
	}
}

func TestTurnsListsEveryPageUpToTheLimitAsATable(t *testing.T) {
	f := &fakeGateway{turns: cliTurns(), turnsPage: 2}
	addr := cliServe(t, f)
	code, stdout, stderr := cliRun(t, "turns", "--addr", addr, "--limit", "0", "--agent", "demo")
	if code != exitcode.OK {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	want := []string{
		"TURN STATE AGENT SESSION ATTEMPT REQUEST STARTED ENDED SEQ ENDING",
		"t5 running demo s2 2 job-7 2026-01-02T03:04:09Z - 3 -",
		"t4 ended demo s1 1 - 2026-01-02T03:04:01Z 2026-01-02T03:04:02Z 4 transport (retryable)",
		"t3 ended demo s1 1 - 2026-01-02T03:04:01Z 2026-01-02T03:04:02Z 4 cancelled",
		"t2 ended demo s1 1 - 2026-01-02T03:04:01Z 2026-01-02T03:04:02Z 4 outcome",
		"t1 ended demo - 1 - 2026-01-02T03:04:00Z 2026-01-02T03:04:00Z 2 transport",
	}
	if len(lines) != len(want) {
		t.Fatalf("want a header and %d rows:\n%s", len(want)-1, stdout)
	}
	for i, w := range want {
		if got := strings.Join(strings.Fields(lines[i]), " "); got != w {
			t.Errorf("line %d = %q, want fields %q", i+1, lines[i], w)
		}
	}
	f.mu.Lock()
	lists := f.turnLists
	f.mu.Unlock()
	if len(lists) != 3 || lists[0].GetAgent() != "demo" || lists[2].GetPageToken() != "4" || lists[0].GetPageSize() != maxTurnsPage {
		t.Errorf("ListTurns requests = %v, want three pages of demo's turns", lists)
	}

	// --limit cuts the list, asks for no more than it needs, and says so.
	code, stdout, _ = cliRun(t, "turns", "--addr", addr, "--limit", "3", "--session", "s1")
	lines = strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if code != exitcode.OK || len(lines) != 5 || !strings.HasPrefix(lines[3], "t3 ") || lines[4] != "(more turns: --limit 0 lists them all)" {
		t.Errorf("--limit 3: exit %d, stdout:\n%s", code, stdout)
	}
	f.mu.Lock()
	lists = f.turnLists[3:]
	f.mu.Unlock()
	if len(lists) != 2 || lists[0].GetSessionId() != "s1" || lists[0].GetPageSize() != 3 || lists[1].GetPageSize() != 1 {
		t.Errorf("--limit 3: ListTurns requests = %v, want pages of 3 then 1 of s1's turns", lists)
	}

	code, stdout, _ = cliRun(t, "turns", "--addr", addr, "--json", "--limit", "2")
	var got acpgatev1.ListTurnsResponse
	if err := protojson.Unmarshal([]byte(stdout), &got); code != exitcode.OK || err != nil ||
		!proto.Equal(&got, &acpgatev1.ListTurnsResponse{Turns: f.turns[:2], NextPageToken: "2"}) || strings.Count(stdout, "\n") != 1 {
		t.Errorf("--json: exit %d, err %v, output %q", code, err, stdout)
	}

	empty := cliServe(t, &fakeGateway{})
	if code, stdout, _ := cliRun(t, "turns", "--addr", empty); code != exitcode.OK || stdout != "no turns\n" {
		t.Errorf("empty: exit %d, stdout %q", code, stdout)
	}
}

func TestTurnDescribesOneTurnWithItsErrorMessage(t *testing.T) {
	f := &fakeGateway{turns: cliTurns()}
	addr := cliServe(t, f)
	code, stdout, stderr := cliRun(t, "turn", "--addr", addr, "t4")
	if code != exitcode.OK {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	want := []string{"turn t4", "state ended", "agent demo", "session s1", "attempt 1", "request -",
		"started 2026-01-02T03:04:01Z", "ended 2026-01-02T03:04:02Z", "seq 4", "ending transport (retryable)", "message the agent exited"}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("want %d lines:\n%s", len(want), stdout)
	}
	for i, w := range want {
		if got := strings.Join(strings.Fields(lines[i]), " "); got != w {
			t.Errorf("line %d = %q, want fields %q", i+1, lines[i], w)
		}
	}

	code, stdout, _ = cliRun(t, "turn", "--addr", addr, "--json", "t5")
	var got acpgatev1.Turn
	if err := protojson.Unmarshal([]byte(stdout), &got); code != exitcode.OK || err != nil || !proto.Equal(&got, f.turns[0]) {
		t.Errorf("--json: exit %d, err %v, output %q", code, err, stdout)
	}

	if code, stdout, stderr := cliRun(t, "turn", "--addr", addr, "t9"); code != exitcode.Rejected || stdout != "" || !strings.HasPrefix(stderr, "acpgate: NOT_FOUND: ") {
		t.Errorf("unknown turn: exit %d, stdout %q, stderr %q; want %d and NOT_FOUND", code, stdout, stderr, exitcode.Rejected)
	}
}

func TestCLICancel(t *testing.T) {
	running := cliServe(t, &fakeGateway{cancelResp: true})
	if code, stdout, _ := cliRun(t, "cancel", "--addr", running, "s1"); code != 0 || stdout != "session s1: the running turn was asked to cancel\n" {
		t.Errorf("running: exit %d, stdout %q", code, stdout)
	}
	idle := cliServe(t, &fakeGateway{})
	if code, stdout, _ := cliRun(t, "cancel", "--addr", idle, "s1"); code != 0 || stdout != "session s1: no turn was running\n" {
		t.Errorf("idle: exit %d, stdout %q", code, stdout)
	}
	missing := cliServe(t, &fakeGateway{cancelErr: status.Error(codes.NotFound, "no session s9")})
	if code, _, stderr := cliRun(t, "cancel", "--addr", missing, "s9"); code != 65 || stderr != "acpgate: NOT_FOUND: no session s9\n" {
		t.Errorf("missing: exit %d, stderr %q", code, stderr)
	}
}

func TestCLIUsageErrors(t *testing.T) {
	old := clientStdin
	t.Cleanup(func() { clientStdin = old })
	clientStdin = strings.NewReader(" \n")
	addr := cliDeadAddr(t) // nothing must be dialled
	for _, args := range [][]string{
		{"prompt", "--addr", addr, "--agent", "demo"},
		{"prompt", "--addr", addr, "hello"},
		{"prompt", "--addr", addr, "--agent", "demo", "--session", "s", "hello"},
		{"prompt", "--addr", addr, "--session", "s", "--cwd", "x", "hello"},
		{"prompt", "--addr", addr, "--agent", "demo", "--bogus", "hello"},
		{"prompt", "--addr", addr, "--agent", "demo", "-"},
		{"prompt", "--addr", addr, "--agent", "demo", "", " "},
		{"prompt", "--addr", addr, "--agent", "demo", "--on-disconnect", "later", "hello"},
		{"prompt", "--addr", addr, "--agent", "demo", "--detach", "--on-disconnect", "cancel", "hello"},
		{"agents", "--addr", addr, "extra"},
		{"agents", "--nope"},
		{"sessions", "--addr", addr, "extra"},
		{"cancel", "--addr", addr},
		{"cancel", "--addr", addr, "a", "b"},
		{"watch", "--addr", addr},
		{"turns", "--addr", addr, "extra"},
		{"turns", "--addr", addr, "--limit", "-1"},
		{"turn", "--addr", addr},
		{"turn", "--addr", addr, "t1", "t2"},
		{"watch", "--addr", addr, "t1", "t2"},
		{"watch", "--addr", addr, "t1", "--after", "-1"},
		{"version", "extra"},
		{"version", "--addr", addr},
	} {
		code, stdout, stderr := cliRun(t, args[0], args[1:]...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, "usage: acpgate "+args[0]) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 and the usage", args, code, stdout, stderr)
		}
	}
	if code, _, stderr := cliRun(t, "prompt", "-h"); code != 0 || !strings.Contains(stderr, "usage: acpgate prompt") {
		t.Errorf("-h: exit %d, stderr %q", code, stderr)
	}
	if code, handled := runClient(t.Context(), "serve", nil, &bytes.Buffer{}, &bytes.Buffer{}); handled || code != 0 {
		t.Errorf("runClient(serve) = %d, %v; want not handled", code, handled)
	}
}

func TestCLIVersion(t *testing.T) {
	code, stdout, _ := cliRun(t, "version")
	if code != 0 || !strings.HasPrefix(stdout, "acpgate "+version()+"\n") || version() == "" {
		t.Errorf("exit %d, stdout %q", code, stdout)
	}
}

func TestCLICodeName(t *testing.T) {
	for c, want := range map[codes.Code]string{
		codes.OK: "OK", codes.Canceled: "CANCELLED", codes.InvalidArgument: "INVALID_ARGUMENT", codes.FailedPrecondition: "FAILED_PRECONDITION",
		codes.Unavailable: "UNAVAILABLE", codes.DeadlineExceeded: "DEADLINE_EXCEEDED", codes.Code(42): "Code(42)",
	} {
		if got := codeName(c); got != want {
			t.Errorf("codeName(%v) = %q, want %q", c, got, want)
		}
	}
}
