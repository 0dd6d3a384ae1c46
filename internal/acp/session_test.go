package acp_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/acp"
	"github.com/acpgate/acpgate/internal/acp/agentproc"
	"github.com/acpgate/acpgate/internal/acp/clientreq"
	"github.com/acpgate/acpgate/internal/testutil"
	"github.com/acpgate/acpgate/outcome"
)

var testAgent string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "acp-test")
	if err != nil {
		panic(err)
	}
	testAgent, err = testutil.Build(dir, "github.com/acpgate/acpgate/internal/testagent")
	if err != nil {
		panic(err)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		return goleakRun(m)
	}()
	os.Exit(code)
}

func goleakRun(m *testing.M) int {
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}

// agentConfig is a test agent with the given flags.
func agentConfig(args ...string) acp.Config {
	return acp.Config{
		Agent:       "test",
		Process:     agentproc.Spec{Command: testAgent, Args: args, Env: testutil.BaseEnv()},
		CancelGrace: 2 * time.Second,
		StopGrace:   500 * time.Millisecond,
		Logger:      slog.New(slog.DiscardHandler),
	}
}

func open(t *testing.T, cfg acp.Config) *acp.Session {
	t.Helper()
	s, err := acp.Open(context.Background(), cfg, acp.OpenOptions{Cwd: t.TempDir()})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// recorder collects a turn's events.
type recorder struct {
	mu     sync.Mutex
	events []*acpgatev1.PromptEvent
	seen   chan *acpgatev1.PromptEvent
}

func newRecorder() *recorder { return &recorder{seen: make(chan *acpgatev1.PromptEvent, 100000)} }

func (r *recorder) emit(e *acpgatev1.PromptEvent) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	r.seen <- e
}

func (r *recorder) kinds() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		out = append(out, fmt.Sprintf("%T", e.GetEvent())[len("*acpgatev1.PromptEvent_"):])
	}
	return out
}

// waitFor returns the first event satisfying match.
func (r *recorder) waitFor(t *testing.T, match func(*acpgatev1.PromptEvent) bool) *acpgatev1.PromptEvent {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e := <-r.seen:
			if match(e) {
				return e
			}
		case <-timeout:
			t.Fatal("the awaited event never came")
			return nil
		}
	}
}

func prompt(t *testing.T, s *acp.Session, script string, rec *recorder) outcome.Result {
	t.Helper()
	return promptCtx(context.Background(), t, s, script, rec)
}

func promptCtx(ctx context.Context, t *testing.T, s *acp.Session, script string, rec *recorder) outcome.Result {
	t.Helper()
	if rec == nil {
		rec = newRecorder()
	}
	r, err := s.Prompt(ctx, []acpsdk.ContentBlock{acpsdk.TextBlock(script)}, acp.PromptOptions{TurnID: "turn-x", Emit: rec.emit})
	if err != nil {
		t.Fatalf("prompt: %v", err)
	}
	if (r.Outcome == nil) == (r.Error == nil) {
		t.Fatalf("want exactly one of outcome and error: %+v", r)
	}
	return r
}

func mustError(t *testing.T, r outcome.Result) *acpgatev1.HarnessError {
	t.Helper()
	if r.Error == nil {
		t.Fatalf("want an error, got outcome %v", r.Outcome)
	}
	return r.Error
}

func contains(t *testing.T, s string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(s, p) {
			t.Errorf("%q does not contain %q", s, p)
		}
	}
}

// Every row of the outcome table, reached through a real agent process.
func TestEveryEndingThroughARealProcess(t *testing.T) {
	cases := []struct {
		name   string
		script string
		check  func(*testing.T, outcome.Result)
	}{
		{"end_turn_with_several_messages", "chunk@a Hello, \nchunk@a world.\nusage 1000 42\nchunk@b Second.\nstop_usage end_turn 3 4", func(t *testing.T, r outcome.Result) {
			o := r.Outcome
			if o == nil || o.GetText() != "Hello, world.\n\nSecond." || o.GetFinalMessage() != "Second." || o.GetStopReason() != "end_turn" {
				t.Fatalf("outcome %v error %v", o, r.Error)
			}
			if o.GetSessionId() != "sess-1" || o.GetTurnId() != "turn-x" || o.GetUsage().GetTotalTokens() != 7 || o.GetUsage().GetContextUsed() != 42 {
				t.Errorf("outcome %v", o)
			}
		}},
		{"end_turn_with_tool_calls_only", "tool t1 Read\ntool_done t1\nstop end_turn", func(t *testing.T, r outcome.Result) {
			if r.Outcome == nil || r.Outcome.GetText() != "" {
				t.Fatalf("a tool-only turn is a completed turn with empty text: %v %v", r.Outcome, r.Error)
			}
		}},
		{"refusal", "chunk I will not\nstop refusal", func(t *testing.T, r outcome.Result) {
			e := mustError(t, r)
			if e.GetPolicyRefused() == nil || e.GetPartial().GetText() != "I will not" {
				t.Errorf("%v", e)
			}
		}},
		{"max_tokens", "chunk trunc\nstop max_tokens", func(t *testing.T, r outcome.Result) {
			if h := mustError(t, r).GetHarness(); h.GetStopKind() != acpgatev1.StopKind_STOP_KIND_MAX_TOKENS || h.GetCancelled() {
				t.Errorf("%v", h)
			}
		}},
		{"max_turn_requests", "stop max_turn_requests", func(t *testing.T, r outcome.Result) {
			if h := mustError(t, r).GetHarness(); h.GetStopKind() != acpgatev1.StopKind_STOP_KIND_MAX_TURN_REQUESTS {
				t.Errorf("%v", h)
			}
		}},
		{"cancelled_by_the_agent", "stop cancelled", func(t *testing.T, r outcome.Result) {
			e := mustError(t, r)
			if !e.GetHarness().GetCancelled() || !strings.HasPrefix(e.GetMessage(), outcome.CancelledPrefix+":") {
				t.Errorf("%v", e)
			}
		}},
		{"auth_required", "error -32000 Authentication required", func(t *testing.T, r outcome.Result) {
			e := mustError(t, r)
			if !e.GetHarness().GetAuthRequired() {
				t.Errorf("%v", e)
			}
			contains(t, e.GetMessage(), "Authentication required")
		}},
		{"request_cancelled_code", "error -32800 aborted", func(t *testing.T, r outcome.Result) {
			if h := mustError(t, r).GetHarness(); !h.GetCancelled() || h.GetRpcCode() != -32800 {
				t.Errorf("%v", h)
			}
		}},
		{"another_error_code", "chunk so far\nerror -32603 the model exploded", func(t *testing.T, r outcome.Result) {
			e := mustError(t, r)
			if e.GetHarness().GetRpcCode() != -32603 {
				t.Errorf("%v", e)
			}
			contains(t, e.GetMessage(), "-32603", "the model exploded", "partial output: so far")
		}},
		{"neither_result_nor_error", "neither", func(t *testing.T, r outcome.Result) {
			contains(t, mustError(t, r).GetProtocol().GetDetail(), "neither result nor error")
		}},
		{"unknown_stop_reason", "stop teleported", func(t *testing.T, r outcome.Result) {
			contains(t, mustError(t, r).GetProtocol().GetDetail(), "teleported")
		}},
		{"undecodable_answer", "garbage_response", func(t *testing.T, r outcome.Result) {
			contains(t, mustError(t, r).GetProtocol().GetDetail(), "not valid JSON")
		}},
		{"agent_exits_mid_turn", "chunk partial\nstderr 100\nexit 3", func(t *testing.T, r outcome.Result) {
			e := mustError(t, r)
			tr := e.GetTransport()
			if tr.GetReason() != acpgatev1.TransportReason_TRANSPORT_REASON_STREAM_ENDED || tr.ExitCode == nil || tr.GetExitCode() != 3 {
				t.Errorf("%v", e)
			}
			if len(tr.GetStderrTail()) != 100 {
				t.Errorf("stderr tail of %d bytes", len(tr.GetStderrTail()))
			}
			contains(t, e.GetMessage(), "status 3", "partial output: partial")
		}},
		{"stdout_closed_mid_turn", "close_stdout", func(t *testing.T, r outcome.Result) {
			if tr := mustError(t, r).GetTransport(); tr.GetReason() != acpgatev1.TransportReason_TRANSPORT_REASON_STREAM_ENDED {
				t.Errorf("%v", tr)
			}
		}},
		{"oversized_frame", "oversized 2000000", func(t *testing.T, r outcome.Result) {
			tr := mustError(t, r).GetTransport()
			if tr.GetReason() != acpgatev1.TransportReason_TRANSPORT_REASON_TRANSPORT_FAILED {
				t.Errorf("%v", tr)
			}
			contains(t, tr.GetDetail(), "frame limit")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg := agentConfig()
			cfg.MaxFrameBytes = 1 << 20
			s := open(t, cfg)
			c.check(t, prompt(t, s, c.script, nil))
		})
	}
}

func TestASpawnFailureIsTransportSpawnFailed(t *testing.T) {
	cfg := agentConfig()
	cfg.Process.Command = "/nonexistent/agent"
	_, err := acp.Open(context.Background(), cfg, acp.OpenOptions{Cwd: t.TempDir()})
	var e *acp.Error
	if !errors.As(err, &e) || e.Proto.GetTransport().GetReason() != acpgatev1.TransportReason_TRANSPORT_REASON_SPAWN_FAILED {
		t.Fatalf("err %v", err)
	}
	contains(t, e.Proto.GetMessage(), "/nonexistent/agent")
}

func TestHandshakeFailuresAreClassified(t *testing.T) {
	cases := []struct {
		name  string
		cfg   acp.Config
		load  string
		check func(*testing.T, *acpgatev1.HarnessError)
	}{
		{"auth_required_on_session_new", agentConfig("--session-new-error", "-32000:Authentication required"), "", func(t *testing.T, e *acpgatev1.HarnessError) {
			if !e.GetHarness().GetAuthRequired() {
				t.Errorf("%v", e)
			}
			contains(t, e.GetMessage(), "session/new", "Authentication required")
		}},
		{"unsupported_protocol_version", agentConfig("--protocol-version", "2"), "", func(t *testing.T, e *acpgatev1.HarnessError) {
			contains(t, e.GetProtocol().GetDetail(), "version 2", "version 1")
		}},
		{"agent_exits_on_initialize", agentConfig("--exit-on-initialize", "4"), "", func(t *testing.T, e *acpgatev1.HarnessError) {
			if tr := e.GetTransport(); tr.GetReason() != acpgatev1.TransportReason_TRANSPORT_REASON_STREAM_ENDED || tr.GetExitCode() != 4 {
				t.Errorf("%v", e)
			}
			contains(t, e.GetMessage(), "initialize")
		}},
		{"unadvertised_auth_method", func() acp.Config {
			c := agentConfig("--auth-methods", "oauth,cloud")
			c.AuthMethod = "api-key"
			return c
		}(), "", func(t *testing.T, e *acpgatev1.HarnessError) {
			contains(t, e.GetMessage(), `"api-key"`, "oauth, cloud")
		}},
		{"load_without_capability", agentConfig(), "sess-9", func(t *testing.T, e *acpgatev1.HarnessError) {
			if e.GetCapabilityNotSupported().GetPrimitive() != "session/load" {
				t.Errorf("%v", e)
			}
		}},
		{"strict_framing_violation", func() acp.Config {
			c := agentConfig("--stray-startup")
			c.StrictFraming = true
			return c
		}(), "", func(t *testing.T, e *acpgatev1.HarnessError) {
			contains(t, e.GetProtocol().GetDetail(), "starting up")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := acp.Open(context.Background(), c.cfg, acp.OpenOptions{Cwd: t.TempDir(), LoadSessionID: c.load})
			var e *acp.Error
			if !errors.As(err, &e) {
				t.Fatalf("err %v", err)
			}
			c.check(t, e.Proto)
		})
	}
}

func TestAnAdvertisedAuthMethodIsUsed(t *testing.T) {
	cfg := agentConfig("--auth-methods", "oauth,api-key")
	cfg.AuthMethod = "api-key"
	s := open(t, cfg)
	if got := s.Info().AuthMethods; len(got) != 2 {
		t.Errorf("auth methods %v", got)
	}
}

func TestStrayStdoutLinesAreSkippedAndCounted(t *testing.T) {
	s := open(t, agentConfig("--stray-startup"))
	r := prompt(t, s, "stray Loading model...\nchunk ok\nstop end_turn", nil)
	if r.Outcome.GetText() != "ok" {
		t.Fatalf("%v %v", r.Outcome, r.Error)
	}
	if s.Stats().SkippedLines != 2 {
		t.Errorf("skipped %d", s.Stats().SkippedLines)
	}
}

func TestSessionLoadReplaysHistoryAsEvents(t *testing.T) {
	rec := newRecorder()
	s, err := acp.Open(context.Background(), agentConfig("--load-session"), acp.OpenOptions{Cwd: t.TempDir(), LoadSessionID: "sess-old", Replay: rec.emit})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.ID() != "sess-old" {
		t.Errorf("id %q", s.ID())
	}
	if k := rec.kinds(); strings.Join(k, ",") != "UserMessageChunk,AgentMessageChunk" {
		t.Errorf("replayed %v", k)
	}
}

func TestAnAgentThatAdvertisesResumeIsReopenedWithSessionResumeAndReplaysNothing(t *testing.T) {
	dir := t.TempDir()
	cfg := agentConfig("--sessions-dir", dir, "--load-session", "--resume-session")
	first := open(t, cfg)
	if r := prompt(t, first, "chunk one", nil); r.Error != nil {
		t.Fatal(r.Error)
	}
	id := first.ID()
	first.Close()

	rec := newRecorder()
	s, err := acp.Open(context.Background(), cfg, acp.OpenOptions{Cwd: t.TempDir(), LoadSessionID: id, Replay: rec.emit})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.Info().ReopenMethod(); got != acp.MethodResume {
		t.Errorf("ReopenMethod = %q, want %q", got, acp.MethodResume)
	}
	if k := rec.kinds(); len(k) != 0 {
		t.Errorf("session/resume replayed %v", k)
	}
	if r := prompt(t, s, "history", nil); !strings.Contains(r.Outcome.GetText(), `history via session/resume: "chunk one"`) {
		t.Errorf("the resumed session answered %q, %v", r.Outcome.GetText(), r.Error)
	}
}

func TestReopeningOnAnAgentWithNeitherResumeNorLoadNamesBoth(t *testing.T) {
	_, err := acp.Open(context.Background(), agentConfig(), acp.OpenOptions{Cwd: t.TempDir(), LoadSessionID: "sess-1"})
	var e *acp.Error
	if !errors.As(err, &e) || e.Proto.GetCapabilityNotSupported().GetPrimitive() != "session/load" {
		t.Fatalf("Open: %v", err)
	}
	for _, want := range []string{"sessionCapabilities.resume", "loadSession"} {
		if !strings.Contains(e.Proto.GetMessage(), want) {
			t.Errorf("the message %q does not name %s", e.Proto.GetMessage(), want)
		}
	}
}

func TestMessagesAreSplitByIdAndByTools(t *testing.T) {
	s := open(t, agentConfig())
	rec := newRecorder()
	r := prompt(t, s, strings.Join([]string{
		"chunk one-a", "thought hmm", "plan x|y", "chunk  one-b", // thoughts and plans do not split
		"tool t1 Read", "chunk two", // a tool call does
		"image", "chunk  still two", // non-text content neither splits nor adds text
		"chunk@m3 three", "chunk@m4 four", // a changed id does
		"usage 100 10", "raw mystery_update", "stop end_turn",
	}, "\n"), rec)
	o := r.Outcome
	if o == nil || o.GetText() != "one-a one-b\n\ntwo still two\n\nthree\n\nfour" || o.GetFinalMessage() != "four" {
		t.Fatalf("outcome %q error %v", o.GetText(), r.Error)
	}
	want := "AgentMessageChunk,AgentThoughtChunk,Plan,AgentMessageChunk,ToolCall,AgentMessageChunk,AgentMessageChunk,AgentMessageChunk,AgentMessageChunk,AgentMessageChunk,Usage,Raw"
	if got := strings.Join(rec.kinds(), ","); got != want {
		t.Errorf("events\n got %s\nwant %s", got, want)
	}
	raw := rec.events[len(rec.events)-1].GetRaw()
	if raw.GetKind() != "mystery_update" || !strings.Contains(raw.GetJson(), `"x":1`) {
		t.Errorf("raw %v", raw)
	}
}

func TestAFloodArrivesWholeAndInOrder(t *testing.T) {
	s := open(t, agentConfig())
	var n, bytes int
	r, err := s.Prompt(context.Background(), []acpsdk.ContentBlock{acpsdk.TextBlock("flood 20000 64\nstop end_turn")}, acp.PromptOptions{Emit: func(e *acpgatev1.PromptEvent) {
		n++
		bytes += len(e.GetAgentMessageChunk().GetText())
	}})
	if err != nil || r.Outcome == nil {
		t.Fatalf("%v %v", err, r.Error)
	}
	if n != 20000 || bytes != 20000*64 || len(r.Joined().Outcome.GetText()) != 20000*64 {
		t.Errorf("events %d bytes %d text %d", n, bytes, len(r.Joined().Outcome.GetText()))
	}
	// An answer this long comes in pieces (see answer.PiecesFrom), its
	// short chunks in runs of 64 KiB: the outcome leaves the text to them.
	if want := (20000*64 + 64<<10 - 1) / (64 << 10); len(r.TextPieces) != want || r.Outcome.GetText() != "" {
		t.Errorf("the outcome of a %d-byte answer of 64-byte chunks has %d text pieces and %d bytes of text; want %d pieces and none", 20000*64, len(r.TextPieces), len(r.Outcome.GetText()), want)
	}
}

func TestATurnWhoseOutcomeOmitsTheTextReportsTheSameEndingsKeepingOnlyItsBeginning(t *testing.T) {
	cfg := agentConfig()
	cfg.PartialCap = 100 // the turn keeps about 4 KB of the text, not all 64 KB
	run := func(script string, omit bool) outcome.Result {
		t.Helper()
		// A session each: some endings leave no agent behind.
		r, err := open(t, cfg).Prompt(context.Background(), []acpsdk.ContentBlock{acpsdk.TextBlock(script)}, acp.PromptOptions{OmitText: omit})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	const body = "flood 1000 64\nchunk@m2 the last message\n"
	whole, omitted := run(body+"stop end_turn", false), run(body+"stop end_turn", true)
	o := omitted.Outcome
	if o == nil || !o.GetTextOmitted() || o.GetText() != "" || o.GetFinalMessage() != "" {
		t.Fatalf("outcome %v, error %v", o, omitted.Error)
	}
	if o.GetTextBytes() != uint64(len(whole.Outcome.GetText())) || o.GetFinalMessageBytes() != uint64(len("the last message")) {
		t.Errorf("lengths %d/%d, want %d/%d", o.GetTextBytes(), o.GetFinalMessageBytes(), len(whole.Outcome.GetText()), len("the last message"))
	}
	for _, stop := range []string{"stop refusal", "stop max_tokens", "exit 3"} {
		want, got := run(body+stop, false), run(body+stop, true)
		if want.Error == nil || !strings.Contains(want.Error.GetMessage(), "of 64") {
			t.Fatalf("%s: want an error whose partial is cut from the whole text, got %v", stop, want.Error)
		}
		if !proto.Equal(want.Error, got.Error) {
			t.Errorf("%s: with the text kept whole %v\nwith it omitted %v", stop, want.Error, got.Error)
		}
	}
}

func TestCancelSendsSessionCancelAndTheTurnEndsCancelledWithItsPartial(t *testing.T) {
	s := open(t, agentConfig())
	rec := newRecorder()
	done := make(chan outcome.Result, 1)
	go func() { done <- prompt(t, s, "chunk half an answer\nhang", rec) }()
	rec.waitFor(t, func(e *acpgatev1.PromptEvent) bool { return e.GetAgentMessageChunk() != nil })
	if !s.Cancel("cancel requested by a client") {
		t.Fatal("no turn was running")
	}
	e := mustError(t, <-done)
	if !e.GetHarness().GetCancelled() || e.GetHarness().GetStopKind() != acpgatev1.StopKind_STOP_KIND_CANCELLED {
		t.Errorf("%v", e)
	}
	contains(t, e.GetMessage(), outcome.CancelledPrefix+" (cancel requested by a client)", "partial output: half an answer")
	if s.Cancel("again") {
		t.Error("no turn is running any more")
	}
	// The session is still usable.
	if r := prompt(t, s, "chunk again\nstop end_turn", nil); r.Outcome.GetText() != "again" {
		t.Errorf("%v", r)
	}
}

func TestAClientThatGoesAwayCancelsTheTurn(t *testing.T) {
	s := open(t, agentConfig())
	rec := newRecorder()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan outcome.Result, 1)
	go func() { done <- promptCtx(ctx, t, s, "chunk x\nhang", rec) }()
	rec.waitFor(t, func(e *acpgatev1.PromptEvent) bool { return true })
	cancel()
	e := mustError(t, <-done)
	contains(t, e.GetMessage(), outcome.CancelledPrefix+" (the client went away)")
}

func TestATurnTimeoutCancelsTheTurn(t *testing.T) {
	s := open(t, agentConfig())
	r, err := s.Prompt(context.Background(), []acpsdk.ContentBlock{acpsdk.TextBlock("hang")}, acp.PromptOptions{Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	contains(t, mustError(t, r).GetMessage(), "exceeded its timeout of 200ms")
}

func TestAnAgentIgnoringCancelIsStoppedAfterTheGrace(t *testing.T) {
	cfg := agentConfig()
	cfg.CancelGrace = 300 * time.Millisecond
	s := open(t, cfg)
	rec := newRecorder()
	done := make(chan outcome.Result, 1)
	go func() { done <- prompt(t, s, "ignore_cancel\nchunk stubborn\nhang", rec) }()
	rec.waitFor(t, func(e *acpgatev1.PromptEvent) bool { return true })
	s.Cancel("test")
	e := mustError(t, <-done)
	if !e.GetHarness().GetCancelled() {
		t.Errorf("%v", e)
	}
	contains(t, e.GetMessage(), "did not acknowledge", "300ms", "stopped", "partial output: stubborn")
	if !processGone(s.Pid()) {
		t.Error("the agent still runs")
	}
	if _, err := s.Prompt(context.Background(), nil, acp.PromptOptions{}); !errors.Is(err, acp.ErrClosed) {
		t.Errorf("a stopped session takes no turns: %v", err)
	}
}

func TestASecondPromptOnABusySessionIsRefused(t *testing.T) {
	s := open(t, agentConfig())
	rec := newRecorder()
	done := make(chan outcome.Result, 1)
	go func() { done <- prompt(t, s, "chunk x\nhang", rec) }()
	rec.waitFor(t, func(e *acpgatev1.PromptEvent) bool { return true })
	if _, err := s.Prompt(context.Background(), nil, acp.PromptOptions{}); !errors.Is(err, acp.ErrBusy) {
		t.Errorf("err %v", err)
	}
	s.Cancel("test")
	<-done
}

func TestPermissionPolicies(t *testing.T) {
	for _, c := range []struct {
		policy clientreq.Policy
		answer string
		by     acpgatev1.PermissionDecider
	}{
		{clientreq.PolicyReject, "permission:reject", acpgatev1.PermissionDecider_PERMISSION_DECIDER_POLICY},
		{clientreq.PolicyAllow, "permission:allow", acpgatev1.PermissionDecider_PERMISSION_DECIDER_POLICY},
	} {
		t.Run(string(c.policy), func(t *testing.T) {
			cfg := agentConfig()
			cfg.Permission = clientreq.PermissionPolicy{Mode: c.policy}
			s := open(t, cfg)
			rec := newRecorder()
			r := prompt(t, s, "chunk before\npermission t1\nstop end_turn", rec)
			if r.Outcome.GetText() != "before\n\n"+c.answer {
				t.Errorf("text %q (a permission request splits messages)", r.Outcome.GetText())
			}
			p := rec.events[1].GetPermissionRequested()
			if p.GetDecision().GetDecidedBy() != c.by || p.GetRequestId() == "" || len(p.GetOptions()) != 2 || p.GetToolCall().GetToolCallId() != "t1" {
				t.Errorf("event %v", p)
			}
		})
	}
	t.Run("ask", func(t *testing.T) {
		cfg := agentConfig()
		cfg.Permission = clientreq.PermissionPolicy{Mode: clientreq.PolicyAsk}
		s := open(t, cfg)
		rec := newRecorder()
		done := make(chan outcome.Result, 1)
		go func() { done <- prompt(t, s, "permission t1\nstop end_turn", rec) }()
		req := rec.waitFor(t, func(e *acpgatev1.PromptEvent) bool { return e.GetPermissionRequested() != nil }).GetPermissionRequested()
		if req.GetDecision() != nil {
			t.Fatalf("an asked request is first emitted undecided: %v", req)
		}
		if err := s.ResolvePermission(req.GetRequestId(), "no-such-option"); !errors.Is(err, clientreq.ErrNoSuchOption) {
			t.Errorf("err %v", err)
		}
		if err := s.ResolvePermission("perm-404", "allow"); !errors.Is(err, clientreq.ErrNoSuchPermission) {
			t.Errorf("err %v", err)
		}
		if err := s.ResolvePermission(req.GetRequestId(), "allow"); err != nil {
			t.Fatal(err)
		}
		r := <-done
		if r.Outcome.GetText() != "permission:allow" {
			t.Errorf("%v %v", r.Outcome, r.Error)
		}
		decided := rec.events[1].GetPermissionRequested().GetDecision()
		if decided.GetDecidedBy() != acpgatev1.PermissionDecider_PERMISSION_DECIDER_CLIENT || decided.GetOptionId() != "allow" {
			t.Errorf("decision %v", decided)
		}
		if err := s.ResolvePermission(req.GetRequestId(), "allow"); !errors.Is(err, clientreq.ErrNoSuchPermission) {
			t.Errorf("a decided request cannot be decided again: %v", err)
		}
	})
	t.Run("ask_times_out_to_reject", func(t *testing.T) {
		cfg := agentConfig()
		cfg.Permission = clientreq.PermissionPolicy{Mode: clientreq.PolicyAsk, Timeout: 100 * time.Millisecond}
		s := open(t, cfg)
		rec := newRecorder()
		r := prompt(t, s, "permission t1\nstop end_turn", rec)
		if r.Outcome.GetText() != "permission:reject" || rec.events[1].GetPermissionRequested().GetDecision().GetDecidedBy() != acpgatev1.PermissionDecider_PERMISSION_DECIDER_TIMEOUT {
			t.Errorf("%v", r.Outcome)
		}
	})
	t.Run("ask_then_cancel_answers_cancelled", func(t *testing.T) {
		cfg := agentConfig()
		cfg.Permission = clientreq.PermissionPolicy{Mode: clientreq.PolicyAsk}
		s := open(t, cfg)
		rec := newRecorder()
		done := make(chan outcome.Result, 1)
		go func() { done <- prompt(t, s, "permission t1\nhang", rec) }()
		rec.waitFor(t, func(e *acpgatev1.PromptEvent) bool { return e.GetPermissionRequested() != nil })
		s.Cancel("test")
		e := mustError(t, <-done)
		contains(t, e.GetMessage(), outcome.CancelledPrefix, "partial output: permission:cancelled")
	})
}

func TestFileSystemAccessIsConfinedToTheWorkingDirectory(t *testing.T) {
	cwd := t.TempDir()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(cwd, "notes.txt"), []byte("l1\nl2\nl3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("TOP SECRET"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(cwd, "link.txt")); err != nil {
		t.Fatal(err)
	}
	cfg := agentConfig()
	cfg.FS = clientreq.FSAccess{Read: true, Write: true, MaxWriteBytes: 100}
	s, err := acp.Open(context.Background(), cfg, acp.OpenOptions{Cwd: cwd})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	real, _ := filepath.EvalSymlinks(cwd)
	cases := []struct{ script, want string }{
		{"read " + filepath.Join(cwd, "notes.txt"), `read:l1\nl2\nl3\n`},
		{"read " + filepath.Join(cwd, "notes.txt") + " 2 1", `read:l2\n`},
		{"read " + filepath.Join(outside, "secret.txt"), "read-error:-32602:"},
		{"read " + filepath.Join(cwd, "link.txt"), "read-error:-32602:"},
		{"read " + filepath.Join(cwd, "..", filepath.Base(outside), "secret.txt"), "read-error:-32602:"},
		{"read notes.txt", "read-error:-32602:"},
		{"read " + filepath.Join(cwd, "missing.txt"), "read-error:-32002:"},
		{"write " + filepath.Join(cwd, "new.txt") + " hello", "write:ok"},
		{"write " + filepath.Join(outside, "new.txt") + " hello", "write-error:-32602:"},
		{"write " + filepath.Join(cwd, "big.txt") + " " + strings.Repeat("x", 200), "write-error:-32602:"},
		{"terminal", "terminal-error:-32601"},
	}
	for _, c := range cases {
		r := prompt(t, s, c.script+"\nstop end_turn", nil)
		got := strings.ReplaceAll(r.Outcome.GetText(), "\n", `\n`)
		if !strings.HasPrefix(got, c.want) {
			t.Errorf("%s (cwd %s):\n got %s\nwant prefix %s", c.script, real, got, c.want)
		}
		if strings.Contains(got, "TOP SECRET") {
			t.Errorf("%s leaked a file outside the working directory", c.script)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(cwd, "new.txt")); string(b) != "hello" {
		t.Errorf("written %q", b)
	}
	if _, err := os.Stat(filepath.Join(outside, "new.txt")); err == nil {
		t.Error("a write escaped the working directory")
	}
}

func TestFileSystemAccessIsRefusedWhenNotEnabled(t *testing.T) {
	cwd := t.TempDir()
	_ = os.WriteFile(filepath.Join(cwd, "a.txt"), []byte("content"), 0o644)
	s, err := acp.Open(context.Background(), agentConfig(), acp.OpenOptions{Cwd: cwd})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := prompt(t, s, "read "+filepath.Join(cwd, "a.txt")+"\nstop end_turn", nil)
	if !strings.HasPrefix(r.Outcome.GetText(), "read-error:-32601:") {
		t.Errorf("%q", r.Outcome.GetText())
	}
}

func TestAHeavyStderrKeepsOnlyABoundedTail(t *testing.T) {
	s := open(t, agentConfig())
	e := mustError(t, prompt(t, s, "stderr 1000000\nexit 1", nil))
	if n := len(e.GetTransport().GetStderrTail()); n != agentproc.DefaultStderrTailBytes {
		t.Errorf("tail of %d bytes", n)
	}
}

func TestClosingASessionLeavesNoProcessBehind(t *testing.T) {
	s := open(t, agentConfig())
	r := prompt(t, s, "grandchild\nstop end_turn", nil)
	text := r.Outcome.GetText()
	pid, err := strconv.Atoi(strings.TrimPrefix(text, "grandchild:"))
	if err != nil {
		t.Fatalf("%q", text)
	}
	agent := s.Pid()
	if processGone(pid) || processGone(agent) {
		t.Fatal("the processes should be running before close")
	}
	s.Close()
	if !processGone(agent) {
		t.Error("the agent survived its session")
	}
	deadline := time.Now().Add(2 * time.Second)
	for !processGone(pid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !processGone(pid) {
		t.Error("the agent's grandchild survived the session")
	}
}

func TestAnAgentThatIgnoresStdinEOFIsTerminated(t *testing.T) {
	cfg := agentConfig()
	cfg.StopGrace = 100 * time.Millisecond
	s := open(t, cfg)
	rec := newRecorder()
	done := make(chan outcome.Result, 1)
	go func() { done <- prompt(t, s, "ignore_cancel\nchunk x\nhang", rec) }()
	rec.waitFor(t, func(*acpgatev1.PromptEvent) bool { return true })
	s.Close()
	e := mustError(t, <-done)
	if !e.GetHarness().GetCancelled() {
		t.Errorf("closing a session mid-turn ends the turn as a cancellation: %v", e)
	}
	if !processGone(s.Pid()) {
		t.Error("the agent survived")
	}
}

// processGone reports whether pid no longer exists (or is a zombie nobody
// will reap, which the test would see as alive: the gateway reaps its own).
func processGone(pid int) bool {
	err := syscall.Kill(pid, 0)
	if errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	fields := strings.Fields(string(b))
	return len(fields) > 2 && fields[2] == "Z"
}

func TestATurnTimeoutStopsAnAgentThatFloodsRequestsAndDoesNotReadTheAnswers(t *testing.T) {
	cfg := agentConfig()
	cfg.FS.Read = true
	cfg.MaxAgentRequests = 2
	cfg.CancelGrace = 300 * time.Millisecond
	s := open(t, cfg)
	big := filepath.Join(s.Cwd(), "big.txt")
	if err := os.WriteFile(big, []byte(strings.Repeat("x", 2<<20)), 0o644); err != nil {
		t.Fatal(err)
	}
	// The first answer fills the agent's stdin pipe; the agent never reads
	// it, so every later write, session/cancel among them, waits for good.
	done := make(chan outcome.Result, 1)
	go func() {
		r, err := s.Prompt(context.Background(), []acpsdk.ContentBlock{acpsdk.TextBlock("stall\nreadflood 8 " + big + "\nhang")},
			acp.PromptOptions{Timeout: 300 * time.Millisecond})
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	select {
	case r := <-done:
		contains(t, mustError(t, r).GetMessage(), "did not acknowledge", "exceeded its timeout of 300ms")
	case <-time.After(30 * time.Second):
		t.Fatal("the turn did not end: its cancel waited behind answers the agent does not read")
	}
	if !processGone(s.Pid()) {
		t.Error("the agent still runs")
	}
}
