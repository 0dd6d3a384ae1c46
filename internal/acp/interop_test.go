package acp_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"

	"google.golang.org/protobuf/proto"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/acp"
	"github.com/acpgate/acpgate/internal/acp/agentproc"
	"github.com/acpgate/acpgate/internal/acp/clientreq"
	"github.com/acpgate/acpgate/outcome"
)

// The interoperability test runs the gateway's ACP client against an agent
// written with the official TypeScript SDK (internal/acp/testdata/tsagent), an
// implementation of the protocol the gateway's authors did not write. Every
// assertion is about what crossed the wire: how the runtime classified the
// agent's answer and what text it reassembled.
//
// It needs node and the agent's dependencies:
//
//	cd internal/acp/testdata/tsagent && npm ci
//
// Without them it skips, unless ACPGATE_REQUIRE_INTEROP=1 (as in CI), in
// which case it fails.

// The texts the agent streams for "multi" (see MULTI in agent.mjs).
const (
	tsMultiM1 = "First message, streamed in three chunks."
	tsMultiM2 = "Second message, in two chunks."
)

const tsTurnTimeout = 30 * time.Second

// tsAgent locates node and the agent script, or skips (fails when the
// interop test is required).
func tsAgent(t *testing.T) (node, script string) {
	t.Helper()
	required := os.Getenv("ACPGATE_REQUIRE_INTEROP") == "1"
	unavailable := func(format string, args ...any) {
		t.Helper()
		if required {
			t.Fatalf("ACPGATE_REQUIRE_INTEROP=1 but "+format, args...)
		}
		t.Skipf("skipping the TypeScript SDK interop test: "+format+
			" (run `npm ci` in internal/acp/testdata/tsagent; set ACPGATE_REQUIRE_INTEROP=1 to make this a failure)", args...)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		unavailable("node is not on PATH: %v", err)
	}
	dir, err := filepath.Abs(filepath.Join("testdata", "tsagent"))
	if err != nil {
		t.Fatal(err)
	}
	sdk := filepath.Join(dir, "node_modules", "@agentclientprotocol", "sdk", "package.json")
	if _, err := os.Stat(sdk); err != nil {
		unavailable("the agent's dependencies are not installed (%v)", err)
	}
	return node, filepath.Join(dir, "agent.mjs")
}

// tsLogWriter forwards the runtime's logs (including the agent's stderr) to
// the test log until the test ends; after that they are dropped, since
// logging to a finished test panics.
type tsLogWriter struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (w *tsLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *tsLogWriter) stop() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}

// tsOpen starts the TypeScript agent and opens a session in a fresh
// temporary directory; the session is closed when the test ends.
func tsOpen(t *testing.T, node, script string, configure func(*acp.Config)) *acp.Session {
	t.Helper()
	return tsOpenWith(t, node, script, configure, acp.OpenOptions{})
}

// tsOpenWith is tsOpen with opts, whose Cwd defaults to a fresh temporary
// directory.
func tsOpenWith(t *testing.T, node, script string, configure func(*acp.Config), opts acp.OpenOptions) *acp.Session {
	t.Helper()
	if opts.Cwd == "" {
		opts.Cwd = t.TempDir()
	}
	logs := &tsLogWriter{t: t}
	t.Cleanup(logs.stop) // runs after the session's Close below
	cfg := acp.Config{
		Agent: "ts-sdk",
		Process: agentproc.Spec{
			Command: node,
			Args:    []string{script},
			Env:     []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")},
		},
		ClientVersion: "interop-test",
		CancelGrace:   5 * time.Second,
		StopGrace:     2 * time.Second,
		Logger:        slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if configure != nil {
		configure(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), tsTurnTimeout)
	defer cancel()
	s, err := acp.Open(ctx, cfg, opts)
	if err != nil {
		var ae *acp.Error
		if errors.As(err, &ae) {
			t.Fatalf("Open: %v (classification %v)", err, ae.Proto)
		}
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// tsEvents records a turn's events. Emit runs on the connection's reader
// (or on the goroutine serving an agent request), so it only records and
// hands events to watch without blocking.
//
// It keeps each event as emitted and a copy taken during the Emit call: an
// event must not change after Emit returned it, since a consumer may still
// hold it (queued for a stream, for example). tsPrompt compares the two.
type tsEvents struct {
	mu      sync.Mutex
	emitted []*acpgatev1.PromptEvent // as passed to Emit
	copies  []*acpgatev1.PromptEvent // cloned during the Emit call
	watch   chan *acpgatev1.PromptEvent
}

func tsNewEvents() *tsEvents {
	return &tsEvents{watch: make(chan *acpgatev1.PromptEvent, 256)}
}

func (r *tsEvents) emit(e *acpgatev1.PromptEvent) {
	c := proto.Clone(e).(*acpgatev1.PromptEvent)
	r.mu.Lock()
	r.emitted = append(r.emitted, e)
	r.copies = append(r.copies, c)
	r.mu.Unlock()
	select {
	case r.watch <- c:
	default: // nobody is keeping up; the recording above is what counts
	}
}

// all returns the events as they were when emitted.
func (r *tsEvents) all() []*acpgatev1.PromptEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*acpgatev1.PromptEvent(nil), r.copies...)
}

// tsUnchangedAfterEmit asserts that no event was modified after Emit
// returned it.
func (r *tsEvents) tsUnchangedAfterEmit(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, e := range r.emitted {
		if !proto.Equal(e, r.copies[i]) {
			t.Errorf("event %d was modified after Emit returned it:\n  as emitted: %v\n  later:      %v", i, r.copies[i], e)
		}
	}
}

// tsPrompt runs one text prompt and returns its result and its events.
func tsPrompt(t *testing.T, s *acp.Session, text string, rec *tsEvents) (outcome.Result, []*acpgatev1.PromptEvent) {
	t.Helper()
	if rec == nil {
		rec = tsNewEvents()
	}
	ctx, cancel := context.WithTimeout(context.Background(), tsTurnTimeout)
	defer cancel()
	result, err := s.Prompt(ctx, []acpsdk.ContentBlock{acpsdk.TextBlock(text)}, acp.PromptOptions{TurnID: "turn-" + text, Emit: rec.emit})
	if err != nil {
		t.Fatalf("Prompt(%q): %v", text, err)
	}
	if (result.Outcome == nil) == (result.Error == nil) {
		t.Fatalf("Prompt(%q): want exactly one of outcome and error, got outcome %v, error %v", text, result.Outcome, result.Error)
	}
	events := rec.all()
	rec.tsUnchangedAfterEmit(t)
	tsNoRawEvents(t, events)
	return result, events
}

// tsNoRawEvents asserts that every update the SDK agent sent decoded as its
// kind: a raw event means the runtime could not read what the SDK wrote.
func tsNoRawEvents(t *testing.T, events []*acpgatev1.PromptEvent) {
	t.Helper()
	for _, e := range events {
		if raw := e.GetRaw(); raw != nil {
			t.Errorf("an update passed through raw (kind %q): %s", raw.GetKind(), raw.GetJson())
		}
	}
}

func tsWantOutcome(t *testing.T, s *acp.Session, r outcome.Result, text, final string) {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("want an outcome, got error %v", r.Error)
	}
	o := r.Outcome
	if o.GetText() != text {
		t.Errorf("outcome text = %q, want %q", o.GetText(), text)
	}
	if o.GetFinalMessage() != final {
		t.Errorf("outcome final_message = %q, want %q", o.GetFinalMessage(), final)
	}
	if o.GetStopKind() != acpgatev1.StopKind_STOP_KIND_END_TURN || o.GetStopReason() != "end_turn" {
		t.Errorf("outcome stop = %v/%q, want STOP_KIND_END_TURN/end_turn", o.GetStopKind(), o.GetStopReason())
	}
	if o.GetSessionId() != s.ID() {
		t.Errorf("outcome session_id = %q, want %q", o.GetSessionId(), s.ID())
	}
}

// tsWantPartial asserts a failed turn's partial output, in the error's field
// and at the end of its message (as outcome.proto documents).
func tsWantPartial(t *testing.T, e *acpgatev1.HarnessError, partial string) {
	t.Helper()
	if got := e.GetPartial().GetText(); got != partial {
		t.Errorf("partial.text = %q, want %q", got, partial)
	}
	if e.GetPartial().GetTruncated() || e.GetPartial().GetTotalBytes() != uint64(len(partial)) {
		t.Errorf("partial = %v, want untruncated with total_bytes %d", e.GetPartial(), len(partial))
	}
	if suffix := "; partial output: " + partial; !strings.HasSuffix(e.GetMessage(), suffix) {
		t.Errorf("message = %q, want it to end with %q", e.GetMessage(), suffix)
	}
}

func tsChunks(events []*acpgatev1.PromptEvent) []*acpgatev1.MessageChunk {
	var out []*acpgatev1.MessageChunk
	for _, e := range events {
		if c := e.GetAgentMessageChunk(); c != nil {
			out = append(out, c)
		}
	}
	return out
}

func tsPermissionEvents(events []*acpgatev1.PromptEvent) []*acpgatev1.PermissionRequest {
	var out []*acpgatev1.PermissionRequest
	for _, e := range events {
		if p := e.GetPermissionRequested(); p != nil {
			out = append(out, p)
		}
	}
	return out
}

// tsWantDecided asserts the last permission event carries the decision.
func tsWantDecided(t *testing.T, events []*acpgatev1.PromptEvent, optionID string, cancelled bool, by acpgatev1.PermissionDecider) *acpgatev1.PermissionRequest {
	t.Helper()
	perms := tsPermissionEvents(events)
	if len(perms) == 0 {
		t.Fatalf("no permission_requested event among %d events", len(events))
	}
	last := perms[len(perms)-1]
	d := last.GetDecision()
	if d == nil {
		t.Fatalf("the last permission_requested event has no decision: %v", last)
	}
	if d.GetOptionId() != optionID || d.GetCancelled() != cancelled || d.GetDecidedBy() != by {
		t.Errorf("decision = option %q cancelled %v by %v, want option %q cancelled %v by %v",
			d.GetOptionId(), d.GetCancelled(), d.GetDecidedBy(), optionID, cancelled, by)
	}
	if got := last.GetToolCall().GetToolCallId(); got != "call-perm" {
		t.Errorf("permission tool_call_id = %q, want %q", got, "call-perm")
	}
	var opts []string
	for _, o := range last.GetOptions() {
		opts = append(opts, o.GetOptionId()+"="+o.GetKind())
	}
	if got, want := strings.Join(opts, ","), "allow=allow_once,reject=reject_once"; got != want {
		t.Errorf("permission options = %s, want %s", got, want)
	}
	return last
}

// tsAsk runs the permission turn under PolicyAsk, answering the undecided
// request with answer ("" answers cancelled) from a goroutine that watches
// the events.
func tsAsk(t *testing.T, s *acp.Session, answer string) (outcome.Result, []*acpgatev1.PromptEvent) {
	t.Helper()
	rec := tsNewEvents()
	stop := make(chan struct{})
	stopWatching := sync.OnceFunc(func() { close(stop) })
	defer stopWatching() // also when tsPrompt fails the test
	resolved := make(chan error, 1)
	go func() {
		for {
			select {
			case e := <-rec.watch:
				p := e.GetPermissionRequested()
				if p == nil || p.GetDecision() != nil {
					continue
				}
				resolved <- s.ResolvePermission(p.GetRequestId(), answer)
				return
			case <-stop:
				resolved <- errors.New("the turn ended before an undecided permission request was seen")
				return
			}
		}
	}()
	r, events := tsPrompt(t, s, "permission", rec)
	stopWatching()
	if err := <-resolved; err != nil {
		t.Fatalf("resolving the permission request: %v", err)
	}
	perms := tsPermissionEvents(events)
	if len(perms) != 2 || perms[0].GetDecision() != nil || perms[0].GetRequestId() != perms[1].GetRequestId() {
		t.Errorf("want an undecided then a decided event for one request, got %v", perms)
	}
	return r, events
}

func TestInteropTypeScriptSDK(t *testing.T) {
	node, script := tsAgent(t)

	t.Run("handshake", func(t *testing.T) {
		s := tsOpen(t, node, script, nil)
		info := s.Info()
		if info.ProtocolVersion != 1 || info.Name != "acpgate-interop-tsagent" || info.Version != "1.0.0" || len(info.AuthMethods) != 0 {
			t.Errorf("agent info = %+v, want protocol 1, acpgate-interop-tsagent 1.0.0, no auth methods", info)
		}
		if !strings.HasPrefix(s.ID(), "ts-") {
			t.Errorf("session id = %q, want the agent's ts-… id", s.ID())
		}
		r, _ := tsPrompt(t, s, "hello", nil)
		tsWantOutcome(t, s, r, "echo:hello", "echo:hello")
	})

	t.Run("multi_message", func(t *testing.T) {
		s := tsOpen(t, node, script, nil)
		r, events := tsPrompt(t, s, "multi", nil)
		tsWantOutcome(t, s, r, tsMultiM1+"\n\n"+tsMultiM2, tsMultiM2)
		var ids []string
		for _, c := range tsChunks(events) {
			ids = append(ids, c.GetMessageId())
		}
		if got, want := strings.Join(ids, ","), "m1,m1,m1,m2,m2"; got != want {
			t.Errorf("chunk message ids = %s, want %s", got, want)
		}
		// A second turn in the same session starts from nothing.
		r, _ = tsPrompt(t, s, "again", nil)
		tsWantOutcome(t, s, r, "echo:again", "echo:again")
	})

	t.Run("tool_only", func(t *testing.T) {
		s := tsOpen(t, node, script, nil)
		r, events := tsPrompt(t, s, "tools", nil)
		tsWantOutcome(t, s, r, "", "")
		var call *acpgatev1.ToolCall
		var upd *acpgatev1.ToolCallUpdate
		for _, e := range events {
			if c := e.GetToolCall(); c != nil {
				call = c
			}
			if u := e.GetToolCallUpdate(); u != nil {
				upd = u
			}
		}
		if call.GetToolCallId() != "call-1" || call.GetTitle() != "List the working directory" ||
			call.GetKind() != "read" || call.GetStatus() != "in_progress" || call.GetRawInputJson() != `{"path":"."}` {
			t.Errorf("tool_call event = %v", call)
		}
		if upd.GetToolCallId() != "call-1" || upd.GetStatus() != "completed" || upd.GetRawOutputJson() != `{"files":2}` ||
			len(upd.GetContent()) != 1 || upd.GetContent()[0].GetContent().GetText() != "2 files" {
			t.Errorf("tool_call_update event = %v", upd)
		}
		if n := len(tsChunks(events)); n != 0 {
			t.Errorf("%d message chunks, want none", n)
		}
	})

	t.Run("refusal", func(t *testing.T) {
		s := tsOpen(t, node, script, nil)
		r, _ := tsPrompt(t, s, "refuse", nil)
		if r.Error == nil {
			t.Fatalf("want an error, got outcome %v", r.Outcome)
		}
		if got := r.Error.GetPolicyRefused().GetDetection(); got != acpgatev1.RefusalDetection_REFUSAL_DETECTION_STRUCTURED {
			t.Errorf("want policy_refused (structured), got %v", r.Error)
		}
		tsWantPartial(t, r.Error, "I will not do that.")
	})

	t.Run("max_tokens", func(t *testing.T) {
		s := tsOpen(t, node, script, nil)
		r, _ := tsPrompt(t, s, "truncate", nil)
		h := r.Error.GetHarness()
		if h == nil || h.GetStopKind() != acpgatev1.StopKind_STOP_KIND_MAX_TOKENS || h.GetCancelled() || h.RpcCode != nil {
			t.Fatalf("want harness failure with STOP_KIND_MAX_TOKENS, got %v / outcome %v", r.Error, r.Outcome)
		}
		tsWantPartial(t, r.Error, "This answer is cut sho")
	})

	t.Run("cancel", func(t *testing.T) {
		s := tsOpen(t, node, script, nil)
		rec := tsNewEvents()
		stop := make(chan struct{})
		stopWatching := sync.OnceFunc(func() { close(stop) })
		defer stopWatching() // also when tsPrompt fails the test
		cancelled := make(chan bool, 1)
		go func() {
			for {
				select {
				case e := <-rec.watch:
					if e.GetAgentMessageChunk() != nil {
						cancelled <- s.Cancel("test")
						return
					}
				case <-stop:
					cancelled <- false
					return
				}
			}
		}()
		start := time.Now()
		r, _ := tsPrompt(t, s, "wait", rec)
		stopWatching()
		if !<-cancelled {
			t.Fatal("Cancel was not called on a running turn")
		}
		h := r.Error.GetHarness()
		if h == nil || !h.GetCancelled() || h.GetStopKind() != acpgatev1.StopKind_STOP_KIND_CANCELLED {
			t.Fatalf("want harness.cancelled with STOP_KIND_CANCELLED, got %v / outcome %v", r.Error, r.Outcome)
		}
		if !strings.HasPrefix(r.Error.GetMessage(), outcome.CancelledPrefix+" (test): ") {
			t.Errorf("message = %q, want prefix %q", r.Error.GetMessage(), outcome.CancelledPrefix+" (test): ")
		}
		tsWantPartial(t, r.Error, "Working on it...")
		if elapsed := time.Since(start); elapsed >= 5*time.Second {
			t.Errorf("the cancelled turn took %s: the agent's answer was not used, the grace ran out", elapsed)
		}
		// The agent acknowledged the cancel, so the session goes on.
		r, _ = tsPrompt(t, s, "after", nil)
		tsWantOutcome(t, s, r, "echo:after", "echo:after")
	})

	t.Run("permission_reject", func(t *testing.T) {
		s := tsOpen(t, node, script, func(c *acp.Config) { c.Permission = clientreq.PermissionPolicy{Mode: clientreq.PolicyReject} })
		r, events := tsPrompt(t, s, "permission", nil)
		tsWantOutcome(t, s, r, "selected:reject", "selected:reject")
		tsWantDecided(t, events, "reject", false, acpgatev1.PermissionDecider_PERMISSION_DECIDER_POLICY)
	})

	t.Run("permission_allow", func(t *testing.T) {
		s := tsOpen(t, node, script, func(c *acp.Config) { c.Permission = clientreq.PermissionPolicy{Mode: clientreq.PolicyAllow} })
		r, events := tsPrompt(t, s, "permission", nil)
		tsWantOutcome(t, s, r, "selected:allow", "selected:allow")
		tsWantDecided(t, events, "allow", false, acpgatev1.PermissionDecider_PERMISSION_DECIDER_POLICY)
	})

	t.Run("permission_ask", func(t *testing.T) {
		s := tsOpen(t, node, script, func(c *acp.Config) {
			c.Permission = clientreq.PermissionPolicy{Mode: clientreq.PolicyAsk, Timeout: tsTurnTimeout}
		})
		r, events := tsAsk(t, s, "allow")
		tsWantOutcome(t, s, r, "selected:allow", "selected:allow")
		tsWantDecided(t, events, "allow", false, acpgatev1.PermissionDecider_PERMISSION_DECIDER_CLIENT)

		// The same session again, this time the client answers cancelled.
		r, events = tsAsk(t, s, "")
		tsWantOutcome(t, s, r, "cancelled", "cancelled")
		tsWantDecided(t, events, "", true, acpgatev1.PermissionDecider_PERMISSION_DECIDER_CLIENT)
	})

	t.Run("permission_ask_then_cancel", func(t *testing.T) {
		// Cancelling a turn whose permission request waits for a client
		// answers the request cancelled; the agent then ends the turn
		// cancelled.
		s := tsOpen(t, node, script, func(c *acp.Config) {
			c.Permission = clientreq.PermissionPolicy{Mode: clientreq.PolicyAsk, Timeout: tsTurnTimeout}
		})
		rec := tsNewEvents()
		stop := make(chan struct{})
		stopWatching := sync.OnceFunc(func() { close(stop) })
		defer stopWatching() // also when tsPrompt fails the test
		cancelled := make(chan bool, 1)
		go func() {
			for {
				select {
				case e := <-rec.watch:
					if p := e.GetPermissionRequested(); p != nil && p.GetDecision() == nil {
						cancelled <- s.Cancel("test")
						return
					}
				case <-stop:
					cancelled <- false
					return
				}
			}
		}()
		r, events := tsPrompt(t, s, "permission", rec)
		stopWatching()
		if !<-cancelled {
			t.Fatal("Cancel was not called on a running turn")
		}
		h := r.Error.GetHarness()
		if h == nil || !h.GetCancelled() || h.GetStopKind() != acpgatev1.StopKind_STOP_KIND_CANCELLED {
			t.Fatalf("want harness.cancelled with STOP_KIND_CANCELLED, got %v / outcome %v", r.Error, r.Outcome)
		}
		if !strings.HasPrefix(r.Error.GetMessage(), outcome.CancelledPrefix+" (test): ") {
			t.Errorf("message = %q, want prefix %q", r.Error.GetMessage(), outcome.CancelledPrefix+" (test): ")
		}
		tsWantPartial(t, r.Error, "cancelled")
		tsWantDecided(t, events, "", true, acpgatev1.PermissionDecider_PERMISSION_DECIDER_CANCELLATION)
	})

	t.Run("fs_read_inside", func(t *testing.T) {
		s := tsOpen(t, node, script, func(c *acp.Config) { c.FS = clientreq.FSAccess{Read: true} })
		const content = "interop notes\nsecond line: ünïcode ✓\n"
		path := filepath.Join(s.Cwd(), "notes.txt")
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		r, _ := tsPrompt(t, s, "read "+path, nil)
		tsWantOutcome(t, s, r, "read:"+content, "read:"+content)
	})

	t.Run("fs_read_outside", func(t *testing.T) {
		s := tsOpen(t, node, script, func(c *acp.Config) { c.FS = clientreq.FSAccess{Read: true} })
		const secret = "outside-secret-7f3a"
		path := filepath.Join(t.TempDir(), "secret.txt")
		if err := os.WriteFile(path, []byte(secret), 0o644); err != nil {
			t.Fatal(err)
		}
		r, _ := tsPrompt(t, s, "read "+path, nil)
		if r.Error != nil {
			t.Fatalf("want an outcome (the agent reports the refused read as text), got %v", r.Error)
		}
		text := r.Outcome.GetText()
		if !strings.HasPrefix(text, "read-error:") || !strings.Contains(text, "outside the session's working directory") {
			t.Errorf("text = %q, want read-error: naming the working directory confinement", text)
		}
		if strings.Contains(text, secret) {
			t.Errorf("the file outside the working directory was read: %q", text)
		}
	})

	t.Run("fs_read_not_enabled", func(t *testing.T) {
		// With fs reads disabled the gateway must not advertise them; the
		// SDK agent sees the capability absent and does not ask.
		s := tsOpen(t, node, script, nil)
		path := filepath.Join(s.Cwd(), "notes.txt")
		if err := os.WriteFile(path, []byte("unread"), 0o644); err != nil {
			t.Fatal(err)
		}
		r, _ := tsPrompt(t, s, "read "+path, nil)
		want := "read-error:the client did not advertise fs.readTextFile"
		tsWantOutcome(t, s, r, want, want)
	})
}
