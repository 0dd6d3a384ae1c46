package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/config"
	"github.com/acpgate/acpgate/internal/server"
	"github.com/acpgate/acpgate/internal/testutil"
	"github.com/acpgate/acpgate/outcome"
)

var testAgent, acpgateBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "server-test")
	if err != nil {
		panic(err)
	}
	if testAgent, err = testutil.Build(dir, "github.com/acpgate/acpgate/internal/testagent"); err != nil {
		panic(err)
	}
	if acpgateBin, err = testutil.Build(dir, "github.com/acpgate/acpgate/cmd/acpgate"); err != nil {
		panic(err)
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// gatewayYAML configures agents backed by the test agent.
func gatewayYAML(workspace string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
shutdown_grace: 5s
limits: {max_sessions: 6, max_prompt_bytes: 4096, max_frame_bytes: 1048576}
agents:
  - name: test
    command: "${TESTAGENT}"
    args: [--unique-sessions]
    inherit_env: [PATH]
    permission_policy: ask
    permission_timeout: 30s
    cancel_grace: 3s
  - name: limited
    command: "${TESTAGENT}"
    args: [--unique-sessions]
    max_sessions: 1
  - name: needs-login
    command: "${TESTAGENT}"
    args: [--session-new-error, "-32000:Authentication required"]
  - name: missing
    command: /nonexistent/agent-binary
  - name: ws
    command: "${TESTAGENT}"
    args: [--unique-sessions]
    workspace: %s
  - name: idle
    command: "${TESTAGENT}"
    args: [--unique-sessions]
    idle_timeout: 300ms
  - name: commands
    command: "${TESTAGENT}"
    args: [--unique-sessions, --commands, "review,test"]
  - name: counter
    command: "${TESTAGENT}"
  - name: elicit
    command: "${TESTAGENT}"
    args: [--unique-sessions]
    elicitation: ask
    elicitation_timeout: 30s
  - name: elicit-brief
    command: "${TESTAGENT}"
    args: [--unique-sessions]
    elicitation: ask
    elicitation_timeout: 200ms
  - name: textonly
    command: "${TESTAGENT}"
    args: [--unique-sessions, --prompt-capabilities, none, --count-prompts, %s/textonly-prompts]
  - name: modes
    command: "${TESTAGENT}"
    args: [--unique-sessions, --modes, "ask,code"]
`, workspace, workspace)
}

type harness struct {
	client acpgatev1.AgentGatewayClient
	health healthpb.HealthClient
	conn   *grpc.ClientConn
	gw     *server.Gateway
	srv    *server.GRPCServer
	ws     string
}

func start(t *testing.T) *harness {
	t.Helper()
	return startWith(t, nil)
}

// startWith starts a gateway whose options set may change.
func startWith(t *testing.T, set func(*server.Options)) *harness {
	t.Helper()
	ws := t.TempDir()
	if err := os.Mkdir(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(ws, "escape")); err != nil {
		t.Fatal(err)
	}
	lookup := func(k string) (string, bool) {
		if k == "TESTAGENT" {
			return testAgent, true
		}
		return os.LookupEnv(k)
	}
	cfg, err := config.Parse([]byte(gatewayYAML(ws)), "test.yaml", lookup)
	if err != nil {
		t.Fatal(err)
	}
	opts := server.Options{Config: cfg, Version: "test", LookupEnv: lookup, Logger: slog.New(slog.DiscardHandler), JanitorInterval: 50 * time.Millisecond}
	if set != nil {
		set(&opts)
	}
	gw, err := server.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := server.NewGRPCServer(gw, nil)
	lis := bufconn.Listen(1 << 20)
	go func() { _ = srv.Serve(lis) }()
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{client: acpgatev1.NewAgentGatewayClient(conn), health: healthpb.NewHealthClient(conn), conn: conn, gw: gw, srv: srv, ws: ws}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx, gw)
		_ = conn.Close()
	})
	return h
}

// collect runs a Prompt to its end and checks the stream invariants.
func collect(t *testing.T, stream grpc.ServerStreamingClient[acpgatev1.PromptEvent]) []*acpgatev1.PromptEvent {
	t.Helper()
	events := receive(t, stream, nil)
	checkInvariants(t, events)
	return events
}

// receive appends a stream's events to events until it ends.
func receive(t *testing.T, stream grpc.ServerStreamingClient[acpgatev1.PromptEvent], events []*acpgatev1.PromptEvent) []*acpgatev1.PromptEvent {
	t.Helper()
	for {
		e, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return events
		}
		if err != nil {
			t.Fatalf("the stream ended with %v after %d events", err, len(events))
		}
		events = append(events, e)
	}
}

func checkInvariants(t *testing.T, events []*acpgatev1.PromptEvent) {
	t.Helper()
	if len(events) < 2 {
		t.Fatalf("a turn's stream has at least started and a terminal: %v", events)
	}
	if events[0].GetStarted() == nil {
		t.Errorf("the first event is %T, not started", events[0].GetEvent())
	}
	for i, e := range events {
		if e.GetSeq() != uint64(i+1) {
			t.Errorf("event %d has seq %d", i, e.GetSeq())
		}
		if e.GetTime() == nil {
			t.Errorf("event %d has no time", i)
		}
		terminal := e.GetOutcome() != nil || e.GetError() != nil
		if terminal != (i == len(events)-1) {
			t.Errorf("event %d (%T): terminal events come exactly once, last", i, e.GetEvent())
		}
	}
}

func oneShot(t *testing.T, h *harness, agent, script string) []*acpgatev1.PromptEvent {
	t.Helper()
	stream, err := h.client.Prompt(context.Background(), &acpgatev1.PromptRequest{Agent: agent, Text: script})
	if err != nil {
		t.Fatal(err)
	}
	return collect(t, stream)
}

func last(events []*acpgatev1.PromptEvent) *acpgatev1.PromptEvent { return events[len(events)-1] }

func TestEveryTerminalClassReachesTheClientOnItsArm(t *testing.T) {
	h := start(t)
	cases := []struct {
		name, agent, script string
		check               func(*testing.T, *acpgatev1.PromptEvent)
	}{
		{"outcome", "test", "chunk@a one\nchunk@b two\nstop end_turn", func(t *testing.T, e *acpgatev1.PromptEvent) {
			if o := e.GetOutcome(); o.GetText() != "one\n\ntwo" || o.GetFinalMessage() != "two" || !strings.HasPrefix(o.GetSessionId(), "sess-") {
				t.Errorf("%v", e)
			}
		}},
		{"tool_only_outcome", "test", "tool t Read\ntool_done t\nstop end_turn", func(t *testing.T, e *acpgatev1.PromptEvent) {
			if e.GetOutcome() == nil || e.GetOutcome().GetText() != "" {
				t.Errorf("%v", e)
			}
		}},
		{"policy_refused", "test", "chunk no\nstop refusal", func(t *testing.T, e *acpgatev1.PromptEvent) {
			if e.GetError().GetPolicyRefused() == nil || e.GetError().GetPartial().GetText() != "no" {
				t.Errorf("%v", e)
			}
		}},
		{"harness_max_tokens", "test", "stop max_tokens", func(t *testing.T, e *acpgatev1.PromptEvent) {
			if e.GetError().GetHarness().GetStopKind() != acpgatev1.StopKind_STOP_KIND_MAX_TOKENS {
				t.Errorf("%v", e)
			}
		}},
		{"harness_max_turn_requests", "test", "stop max_turn_requests", func(t *testing.T, e *acpgatev1.PromptEvent) {
			if e.GetError().GetHarness().GetStopKind() != acpgatev1.StopKind_STOP_KIND_MAX_TURN_REQUESTS {
				t.Errorf("%v", e)
			}
		}},
		{"harness_cancelled_by_agent", "test", "stop cancelled", func(t *testing.T, e *acpgatev1.PromptEvent) {
			if !e.GetError().GetHarness().GetCancelled() {
				t.Errorf("%v", e)
			}
		}},
		{"harness_auth_required_on_prompt", "test", "error -32000 log in", func(t *testing.T, e *acpgatev1.PromptEvent) {
			if !e.GetError().GetHarness().GetAuthRequired() {
				t.Errorf("%v", e)
			}
		}},
		{"harness_auth_required_on_session_new", "needs-login", "chunk never", func(t *testing.T, e *acpgatev1.PromptEvent) {
			if !e.GetError().GetHarness().GetAuthRequired() || !strings.Contains(e.GetError().GetMessage(), "session/new") {
				t.Errorf("%v", e)
			}
		}},
		{"harness_request_cancelled", "test", "error -32800 stop", func(t *testing.T, e *acpgatev1.PromptEvent) {
			if !e.GetError().GetHarness().GetCancelled() {
				t.Errorf("%v", e)
			}
		}},
		{"harness_rpc_code", "test", "error -32099 odd", func(t *testing.T, e *acpgatev1.PromptEvent) {
			if e.GetError().GetHarness().GetRpcCode() != -32099 {
				t.Errorf("%v", e)
			}
		}},
		{"protocol_neither", "test", "neither", func(t *testing.T, e *acpgatev1.PromptEvent) {
			if e.GetError().GetProtocol() == nil {
				t.Errorf("%v", e)
			}
		}},
		{"protocol_unknown_stop_reason", "test", "stop teleported", func(t *testing.T, e *acpgatev1.PromptEvent) {
			if e.GetError().GetProtocol() == nil {
				t.Errorf("%v", e)
			}
		}},
		{"transport_stream_ended", "test", "chunk bye\nexit 3", func(t *testing.T, e *acpgatev1.PromptEvent) {
			tr := e.GetError().GetTransport()
			if tr.GetReason() != acpgatev1.TransportReason_TRANSPORT_REASON_STREAM_ENDED || tr.GetExitCode() != 3 || e.GetError().GetPartial().GetText() != "bye" {
				t.Errorf("%v", e)
			}
		}},
		{"transport_stdout_closed", "test", "close_stdout", func(t *testing.T, e *acpgatev1.PromptEvent) {
			if e.GetError().GetTransport().GetReason() != acpgatev1.TransportReason_TRANSPORT_REASON_STREAM_ENDED {
				t.Errorf("%v", e)
			}
		}},
		{"transport_failed_oversized_frame", "test", "oversized 2000000", func(t *testing.T, e *acpgatev1.PromptEvent) {
			if e.GetError().GetTransport().GetReason() != acpgatev1.TransportReason_TRANSPORT_REASON_TRANSPORT_FAILED {
				t.Errorf("%v", e)
			}
		}},
		{"transport_spawn_failed", "missing", "chunk never", func(t *testing.T, e *acpgatev1.PromptEvent) {
			if e.GetError().GetTransport().GetReason() != acpgatev1.TransportReason_TRANSPORT_REASON_SPAWN_FAILED {
				t.Errorf("%v", e)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.check(t, last(oneShot(t, h, c.agent, c.script)))
		})
	}
}

func TestEachChunkArrivesInOrderBeforeTheTerminalWhenTheClientAsksForEach(t *testing.T) {
	h := start(t)
	var script strings.Builder
	for i := range 200 {
		fmt.Fprintf(&script, "chunk@m c%d,\n", i)
	}
	script.WriteString("stop end_turn")
	stream, err := h.client.Prompt(context.Background(), &acpgatev1.PromptRequest{Agent: "test", Text: script.String(), ChunkDelivery: acpgatev1.ChunkDelivery_CHUNK_DELIVERY_EACH})
	if err != nil {
		t.Fatal(err)
	}
	events := collect(t, stream)
	if len(events) != 202 {
		t.Fatalf("%d events", len(events))
	}
	var text strings.Builder
	for i, e := range events[1:201] {
		if got, want := e.GetAgentMessageChunk().GetText(), fmt.Sprintf("c%d,", i); got != want {
			t.Fatalf("chunk %d is %q, want %q", i, got, want)
		}
		text.WriteString(e.GetAgentMessageChunk().GetText())
	}
	if last(events).GetOutcome().GetText() != text.String() {
		t.Error("the outcome's text is not the chunks joined")
	}
}

func TestAClientThatAssemblesTheChunksCanHaveTheOutcomeOmitTheText(t *testing.T) {
	h := start(t)
	script := "chunk@a first ünïcödé\nchunk@a  message\nchunk@b second\nstop end_turn"
	ask := func(omit bool) []*acpgatev1.PromptEvent {
		stream, err := h.client.Prompt(context.Background(), &acpgatev1.PromptRequest{Agent: "test", Text: script, OmitOutcomeText: omit, ChunkDelivery: acpgatev1.ChunkDelivery_CHUNK_DELIVERY_EACH})
		if err != nil {
			t.Fatal(err)
		}
		return collect(t, stream)
	}
	full := last(ask(false)).GetOutcome()
	events := ask(true)
	lean := last(events).GetOutcome()
	if full.GetText() == "" || full.GetTextOmitted() || full.GetTextBytes() != 0 {
		t.Fatalf("by default the outcome carries the text and nothing else: %v", full)
	}
	if lean.GetText() != "" || lean.GetFinalMessage() != "" || !lean.GetTextOmitted() {
		t.Fatalf("asked to omit the text, the outcome is %v", lean)
	}
	if lean.GetTextBytes() != uint64(len(full.GetText())) || lean.GetFinalMessageBytes() != uint64(len(full.GetFinalMessage())) {
		t.Errorf("lengths %d/%d, want %d/%d", lean.GetTextBytes(), lean.GetFinalMessageBytes(), len(full.GetText()), len(full.GetFinalMessage()))
	}
	var chunks int
	for _, e := range events {
		if e.GetAgentMessageChunk() != nil {
			chunks++
		}
	}
	if chunks != 3 {
		t.Errorf("%d chunks streamed, want 3: omitting the outcome's text must not touch the stream", chunks)
	}
}

func TestByDefaultQueuedChunksAreCoalescedIntoFewerEventsWithTheSameText(t *testing.T) {
	h := start(t)
	// A burst of 5,000 chunks, another message, a thought between two
	// chunks of a third, and chunks over the coalescing bound.
	script := "flood 5000 64\nchunk@m2 second\nchunk@m3 third-a\nthought hmm\nchunk@m3 third-b\nflood 3 40000\nstop end_turn"
	ask := func(d acpgatev1.ChunkDelivery) (events []*acpgatev1.PromptEvent) {
		stream, err := h.client.Prompt(context.Background(), &acpgatev1.PromptRequest{Agent: "test", Text: script, ChunkDelivery: d})
		if err != nil {
			t.Fatal(err)
		}
		return collect(t, stream)
	}
	// what the stream says: each message's text in order, and the other
	// events between them.
	type piece struct{ id, text string }
	read := func(events []*acpgatev1.PromptEvent) (pieces []piece, chunks int) {
		for _, e := range events[1 : len(events)-1] {
			c := e.GetAgentMessageChunk()
			if c == nil {
				pieces = append(pieces, piece{id: fmt.Sprintf("%T", e.GetEvent())})
				continue
			}
			chunks++
			if c.GetContent() != nil {
				t.Fatalf("a text chunk repeats its text in content: %v", c.GetContent())
			}
			if len(c.GetText()) > 64<<10 {
				t.Fatalf("a coalesced chunk of %d bytes, over 64 KiB", len(c.GetText()))
			}
			if n := len(pieces); n > 0 && pieces[n-1].id == c.GetMessageId() {
				pieces[n-1].text += c.GetText()
				continue
			}
			pieces = append(pieces, piece{id: c.GetMessageId(), text: c.GetText()})
		}
		return pieces, chunks
	}
	plain, coalesced := ask(acpgatev1.ChunkDelivery_CHUNK_DELIVERY_EACH), ask(acpgatev1.ChunkDelivery_CHUNK_DELIVERY_UNSPECIFIED)
	wantPieces, plainChunks := read(plain)
	gotPieces, coalescedChunks := read(coalesced)
	if plainChunks != 5000+3+3 {
		t.Fatalf("%d chunks without coalescing", plainChunks)
	}
	if !slices.Equal(gotPieces, wantPieces) {
		t.Errorf("coalescing changed the text, its order or its messages:\n got %.300v\nwant %.300v", gotPieces, wantPieces)
	}
	if coalescedChunks >= plainChunks/2 {
		t.Errorf("%d chunk events coalesced from %d: a burst should merge", coalescedChunks, plainChunks)
	}
	if p, c := last(plain).GetOutcome(), last(coalesced).GetOutcome(); c.GetText() != p.GetText() || c.GetFinalMessage() != p.GetFinalMessage() {
		t.Errorf("the outcomes' texts differ: %d/%d bytes, want %d/%d", len(c.GetText()), len(c.GetFinalMessage()), len(p.GetText()), len(p.GetFinalMessage()))
	}
}

func TestAChunkDeliveryThatIsUnknownOrContradictsCoalesceChunksIsInvalidArgumentAndStartsNothing(t *testing.T) {
	h := start(t)
	for _, c := range []struct {
		name string
		req  *acpgatev1.PromptRequest
		want string
	}{
		{"unknown", &acpgatev1.PromptRequest{Agent: "test", Text: "chunk hi\nstop end_turn", ChunkDelivery: 7}, "chunk_delivery 7 is not a ChunkDelivery"},
		//lint:ignore SA1019 the deprecated field against the new one is the case under test
		{"each with coalesce_chunks", &acpgatev1.PromptRequest{Agent: "test", Text: "chunk hi\nstop end_turn", ChunkDelivery: acpgatev1.ChunkDelivery_CHUNK_DELIVERY_EACH, CoalesceChunks: true}, "set only chunk_delivery"},
	} {
		t.Run(c.name, func(t *testing.T) {
			stream, err := h.client.Prompt(context.Background(), c.req)
			if err == nil {
				_, err = stream.Recv()
			}
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), c.want) {
				t.Errorf("got %v, want INVALID_ARGUMENT saying %q", err, c.want)
			}
		})
	}
	turns, err := h.client.ListTurns(context.Background(), &acpgatev1.ListTurnsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(turns.GetTurns()) != 0 {
		t.Errorf("a refused request started %d turns", len(turns.GetTurns()))
	}
}

func TestTheDeprecatedCoalesceChunksStillAsksForWhatTheDefaultGives(t *testing.T) {
	h := start(t)
	//lint:ignore SA1019 the deprecated field is what this test is about
	stream, err := h.client.Prompt(context.Background(), &acpgatev1.PromptRequest{Agent: "test", Text: "flood 2000 64\nstop end_turn", CoalesceChunks: true})
	if err != nil {
		t.Fatal(err)
	}
	events := collect(t, stream)
	if last(events).GetOutcome() == nil {
		t.Fatalf("the turn ended with %v", last(events))
	}
	var text int
	for _, e := range events {
		text += len(e.GetAgentMessageChunk().GetText())
	}
	if text != 2000*64 || len(events) >= 2000 {
		t.Errorf("%d bytes of text in %d events, want %d bytes in fewer than 2000", text, len(events), 2000*64)
	}
}

func TestACoalescedChunkIsNotHeldWhileTheAgentIsQuiet(t *testing.T) {
	h := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The agent says one thing and then nothing more: the chunk must reach
	// the client now, not when something else comes along.
	stream, err := h.client.Prompt(ctx, &acpgatev1.PromptRequest{Agent: "test", Text: "chunk@a hello\nhang"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"started", "hello"} {
		e, err := stream.Recv()
		if err != nil {
			t.Fatalf("waiting for %s: %v", want, err)
		}
		if got := e.GetAgentMessageChunk().GetText(); e.GetStarted() == nil && got != want {
			t.Fatalf("got %v, want %s", e, want)
		}
	}
	cancel()
}

func TestASessionShowsTheCommandsItsAgentAdvertisedOutsideATurn(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	plain, err := h.client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "test"})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := h.client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "commands"})
	if err != nil {
		t.Fatal(err)
	}
	// The agent advertises its commands just after answering session/new,
	// so they may reach the gateway just after CreateSession returns.
	var got *acpgatev1.AvailableCommands
	for deadline := time.Now().Add(10 * time.Second); got == nil && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		s, err := h.client.GetSession(ctx, &acpgatev1.GetSessionRequest{SessionId: sess.GetId()})
		if err != nil {
			t.Fatal(err)
		}
		got = s.GetAvailableCommands()
	}
	var names []string
	for _, c := range got.GetCommands() {
		names = append(names, c.GetName()+": "+c.GetDescription())
	}
	if want := []string{"review: the review command", "test: the test command"}; !slices.Equal(names, want) {
		t.Errorf("commands %q, want %q", names, want)
	}
	list, err := h.client.ListSessions(ctx, &acpgatev1.ListSessionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list.GetSessions() {
		if s.GetId() == plain.GetId() && s.GetAvailableCommands() != nil {
			t.Errorf("a session whose agent advertised nothing shows commands %v", s.GetAvailableCommands())
		}
		if s.GetId() == sess.GetId() && len(s.GetAvailableCommands().GetCommands()) != 2 {
			t.Errorf("ListSessions shows %v", s.GetAvailableCommands())
		}
	}
}

func TestRequestsThatRunNoTurnGetAStatus(t *testing.T) {
	h := start(t)
	sess, err := h.client.CreateSession(context.Background(), &acpgatev1.CreateSessionRequest{Agent: "test"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		req  *acpgatev1.PromptRequest
		code codes.Code
	}{
		{"empty_prompt", &acpgatev1.PromptRequest{Agent: "test"}, codes.InvalidArgument},
		{"both_session_and_agent", &acpgatev1.PromptRequest{Agent: "test", SessionId: sess.GetId(), Text: "x"}, codes.InvalidArgument},
		{"neither_session_nor_agent", &acpgatev1.PromptRequest{Text: "x"}, codes.InvalidArgument},
		{"oversized_prompt", &acpgatev1.PromptRequest{Agent: "test", Text: strings.Repeat("x", 5000)}, codes.InvalidArgument},
		{"empty_content_block", &acpgatev1.PromptRequest{Agent: "test", Prompt: []*acpgatev1.ContentBlock{{}}}, codes.InvalidArgument},
		{"unknown_agent", &acpgatev1.PromptRequest{Agent: "nobody", Text: "x"}, codes.NotFound},
		{"unknown_session", &acpgatev1.PromptRequest{SessionId: "sess-404", Text: "x"}, codes.NotFound},
		{"hostile_cwd", &acpgatev1.PromptRequest{Agent: "ws", Cwd: "../../etc", Text: "x"}, codes.InvalidArgument},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stream, err := h.client.Prompt(context.Background(), c.req)
			if err == nil {
				_, err = stream.Recv()
			}
			if status.Code(err) != c.code {
				t.Errorf("got %v, want %v", err, c.code)
			}
		})
	}
}

func TestCreateSessionFailuresCarryTheHarnessErrorAsADetail(t *testing.T) {
	h := start(t)
	for _, c := range []struct {
		agent string
		code  codes.Code
		check func(*acpgatev1.HarnessError) bool
	}{
		{"needs-login", codes.FailedPrecondition, func(e *acpgatev1.HarnessError) bool { return e.GetHarness().GetAuthRequired() }},
		{"missing", codes.Unavailable, func(e *acpgatev1.HarnessError) bool {
			return e.GetTransport().GetReason() == acpgatev1.TransportReason_TRANSPORT_REASON_SPAWN_FAILED
		}},
	} {
		_, err := h.client.CreateSession(context.Background(), &acpgatev1.CreateSessionRequest{Agent: c.agent})
		st := status.Convert(err)
		if st.Code() != c.code {
			t.Errorf("%s: %v", c.agent, err)
			continue
		}
		var found bool
		for _, d := range st.Details() {
			if e, ok := d.(*acpgatev1.HarnessError); ok && c.check(e) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no matching HarnessError detail in %v", c.agent, st.Details())
		}
	}
	_, err := h.client.CreateSession(context.Background(), &acpgatev1.CreateSessionRequest{Agent: "test", LoadSessionId: "old"})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "session/load") {
		t.Errorf("load without the capability: %v", err)
	}
	if _, err := h.client.CreateSession(context.Background(), &acpgatev1.CreateSessionRequest{Agent: "nobody"}); status.Code(err) != codes.NotFound {
		t.Errorf("unknown agent: %v", err)
	}
	if _, err := h.client.CreateSession(context.Background(), &acpgatev1.CreateSessionRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("no agent: %v", err)
	}
}

func TestHostileWorkingDirectoriesAreRejected(t *testing.T) {
	h := start(t)
	for _, cwd := range []string{"/etc", "..", "sub/../../x", "escape", "missing", "bad\x00dir"} {
		_, err := h.client.CreateSession(context.Background(), &acpgatev1.CreateSessionRequest{Agent: "ws", Cwd: cwd})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("cwd %q: %v", cwd, err)
		}
	}
	s, err := h.client.CreateSession(context.Background(), &acpgatev1.CreateSessionRequest{Agent: "ws", Cwd: "sub"})
	if err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(filepath.Join(h.ws, "sub"))
	if s.GetCwd() != real {
		t.Errorf("cwd %q, want %q", s.GetCwd(), real)
	}
}

func TestSessionLifecycleAndTheOneTurnRule(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	s, err := h.client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if s.GetState() != acpgatev1.SessionState_SESSION_STATE_IDLE || s.GetAgent() != "test" {
		t.Errorf("%v", s)
	}
	stream, err := h.client.Prompt(ctx, &acpgatev1.PromptRequest{SessionId: s.GetId(), Text: "chunk working\nhang"})
	if err != nil {
		t.Fatal(err)
	}
	first, _ := stream.Recv()
	if first.GetStarted().GetSessionId() != s.GetId() {
		t.Errorf("started %v", first)
	}
	if _, err := stream.Recv(); err != nil { // the chunk: the turn is running
		t.Fatal(err)
	}
	busy, err := h.client.Prompt(ctx, &acpgatev1.PromptRequest{SessionId: s.GetId(), Text: "x"})
	if err == nil {
		_, err = busy.Recv()
	}
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("a second prompt on a busy session: %v", err)
	}
	got, _ := h.client.GetSession(ctx, &acpgatev1.GetSessionRequest{SessionId: s.GetId()})
	if got.GetState() != acpgatev1.SessionState_SESSION_STATE_RUNNING || got.GetCurrentTurnId() != first.GetStarted().GetTurnId() {
		t.Errorf("%v", got)
	}
	c, err := h.client.Cancel(ctx, &acpgatev1.CancelRequest{SessionId: s.GetId()})
	if err != nil || !c.GetCancelled() {
		t.Fatalf("%v %v", c, err)
	}
	var events []*acpgatev1.PromptEvent
	events = append(events, first, &acpgatev1.PromptEvent{Seq: 2, Time: first.GetTime(), Event: &acpgatev1.PromptEvent_AgentMessageChunk{}})
	events = append(events, collect2(t, stream)...)
	checkInvariants(t, events)
	e := last(events).GetError()
	if !e.GetHarness().GetCancelled() || !strings.HasPrefix(e.GetMessage(), outcome.CancelledPrefix+" (cancel requested through the Cancel call)") {
		t.Errorf("%v", e)
	}
	list, _ := h.client.ListSessions(ctx, &acpgatev1.ListSessionsRequest{})
	if len(list.GetSessions()) != 1 || list.GetSessions()[0].GetTurns() != 1 {
		t.Errorf("%v", list)
	}
	if _, err := h.client.CloseSession(ctx, &acpgatev1.CloseSessionRequest{SessionId: s.GetId()}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.GetSession(ctx, &acpgatev1.GetSessionRequest{SessionId: s.GetId()}); status.Code(err) != codes.NotFound {
		t.Errorf("a closed session is gone: %v", err)
	}
}

// collect2 reads the rest of a stream without the invariant check.
func collect2(t *testing.T, stream grpc.ServerStreamingClient[acpgatev1.PromptEvent]) []*acpgatev1.PromptEvent {
	t.Helper()
	var events []*acpgatev1.PromptEvent
	for {
		e, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return events
		}
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
	}
}

func TestAClientThatCancelsItsCallCancelsTheTurn(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	s, err := h.client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "test"})
	if err != nil {
		t.Fatal(err)
	}
	callCtx, cancel := context.WithCancel(ctx)
	stream, err := h.client.Prompt(callCtx, &acpgatev1.PromptRequest{SessionId: s.GetId(), Text: "chunk x\nhang"})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := stream.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	// The agent got session/cancel and answered it (it stays alive: a
	// grace-period kill would end the session), so the session is idle
	// again well before the 3 s cancel grace.
	deadline := time.Now().Add(2 * time.Second)
	for {
		got, err := h.client.GetSession(ctx, &acpgatev1.GetSessionRequest{SessionId: s.GetId()})
		if err != nil {
			t.Fatalf("the session ended instead of answering the cancel: %v", err)
		}
		if got.GetState() == acpgatev1.SessionState_SESSION_STATE_IDLE {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the turn did not end after the client went away")
		}
		time.Sleep(20 * time.Millisecond)
	}
	events := collectOK(t, h, s.GetId(), "chunk next\nstop end_turn")
	if last(events).GetOutcome().GetText() != "next" {
		t.Errorf("the session runs the next turn: %v", last(events))
	}
}

func collectOK(t *testing.T, h *harness, session, script string) []*acpgatev1.PromptEvent {
	t.Helper()
	stream, err := h.client.Prompt(context.Background(), &acpgatev1.PromptRequest{SessionId: session, Text: script})
	if err != nil {
		t.Fatal(err)
	}
	return collect(t, stream)
}

func TestPermissionsAreAskedAndResolvedThroughTheAPI(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	s, err := h.client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "test"})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := h.client.Prompt(ctx, &acpgatev1.PromptRequest{SessionId: s.GetId(), Text: "permission t1\nstop end_turn"})
	if err != nil {
		t.Fatal(err)
	}
	var events []*acpgatev1.PromptEvent
	for {
		e, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
		if p := e.GetPermissionRequested(); p != nil {
			if p.GetDecision() != nil {
				t.Fatalf("asked before decided: %v", p)
			}
			if _, err := h.client.ResolvePermission(ctx, &acpgatev1.ResolvePermissionRequest{SessionId: s.GetId(), RequestId: p.GetRequestId(), OptionId: "bogus"}); status.Code(err) != codes.InvalidArgument {
				t.Errorf("unknown option: %v", err)
			}
			if _, err := h.client.ResolvePermission(ctx, &acpgatev1.ResolvePermissionRequest{SessionId: s.GetId(), RequestId: p.GetRequestId(), OptionId: "allow"}); err != nil {
				t.Fatal(err)
			}
			_, err := h.client.ResolvePermission(ctx, &acpgatev1.ResolvePermissionRequest{SessionId: s.GetId(), RequestId: p.GetRequestId(), OptionId: "allow"})
			if status.Code(err) != codes.FailedPrecondition {
				t.Errorf("a decided request is stale: %v", err)
			}
			break
		}
	}
	events = append(events, collect2(t, stream)...)
	checkInvariants(t, events)
	if last(events).GetOutcome().GetText() != "permission:allow" {
		t.Errorf("%v", last(events))
	}
	if d := events[2].GetPermissionRequested().GetDecision(); d.GetDecidedBy() != acpgatev1.PermissionDecider_PERMISSION_DECIDER_CLIENT {
		t.Errorf("decision event %v", events[2])
	}
}

func TestSessionLimitsAreResourceExhausted(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	if _, err := h.client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "limited"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "limited"}); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("per-agent limit: %v", err)
	}
	for range 5 {
		if _, err := h.client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "test"}); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("gateway limit: %v", err)
	}
}

func TestListAgentsReportsCapabilitiesOnceKnown(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	before, _ := h.client.ListAgents(ctx, &acpgatev1.ListAgentsRequest{})
	if len(before.GetAgents()) != 12 || before.GetAgents()[0].GetCapabilities() != nil || before.GetAgents()[0].GetPermissionPolicy() != "ask" {
		t.Fatalf("%v", before)
	}
	oneShot(t, h, "test", "stop end_turn")
	after, _ := h.client.ListAgents(ctx, &acpgatev1.ListAgentsRequest{})
	caps := after.GetAgents()[0].GetCapabilities()
	if caps.GetAgentName() != "testagent" || !caps.GetPromptImage() || caps.GetProtocolVersion() != 1 {
		t.Errorf("%v", caps)
	}
	// An agent that initializes but then refuses the session is still known.
	if _, err := h.client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "needs-login"}); err == nil {
		t.Fatal("needs-login opened a session")
	}
	after, _ = h.client.ListAgents(ctx, &acpgatev1.ListAgentsRequest{})
	if after.GetAgents()[2].GetCapabilities().GetAgentName() != "testagent" {
		t.Errorf("capabilities of an agent that refused the session: %v", after.GetAgents()[2])
	}
}

func TestShutdownCancelsRunningTurnsAndRefusesNewCalls(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	stream, err := h.client.Prompt(ctx, &acpgatev1.PromptRequest{Agent: "test", Text: "chunk x\nhang"})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := stream.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		h.srv.Shutdown(sctx, h.gw)
	}()
	rest := collect2(t, stream)
	e := last(rest).GetError()
	if !e.GetHarness().GetCancelled() || !strings.Contains(e.GetMessage(), "shutting down") {
		t.Errorf("%v", e)
	}
	<-done
	hc, err := h.health.Check(ctx, &healthpb.HealthCheckRequest{Service: server.ServiceName})
	if err == nil && hc.GetStatus() == healthpb.HealthCheckResponse_SERVING {
		t.Errorf("still serving after shutdown")
	}
	sessions, err := h.client.ListSessions(ctx, &acpgatev1.ListSessionsRequest{})
	if err == nil && len(sessions.GetSessions()) != 0 {
		t.Errorf("sessions left: %v", sessions)
	}
}

func TestHealthServes(t *testing.T) {
	h := start(t)
	for _, svc := range []string{"", server.ServiceName} {
		hc, err := h.health.Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || hc.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("%q: %v %v", svc, hc, err)
		}
	}
}

func TestAnIdleSessionIsClosedAfterItsIdleTimeout(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	s, err := h.client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "idle"})
	if err != nil {
		t.Fatal(err)
	}
	// A turn longer than the idle timeout does not count as idle.
	events := collectOK(t, h, s.GetId(), "sleep 600\nchunk still here\nstop end_turn")
	if last(events).GetOutcome().GetText() != "still here" {
		t.Fatalf("%v", last(events))
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := h.client.GetSession(ctx, &acpgatev1.GetSessionRequest{SessionId: s.GetId()})
		if status.Code(err) == codes.NotFound {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the idle session was never closed")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestASessionWhoseAgentDiedIsGone(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	s, err := h.client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "test"})
	if err != nil {
		t.Fatal(err)
	}
	events := collectOK(t, h, s.GetId(), "exit 3")
	if last(events).GetError().GetTransport().GetExitCode() != 3 {
		t.Fatalf("%v", last(events))
	}
	stream, err := h.client.Prompt(ctx, &acpgatev1.PromptRequest{SessionId: s.GetId(), Text: "chunk x"})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.NotFound {
		t.Errorf("a turn on a session whose agent exited: %v", err)
	}
}

func TestTwoAgentProcessesThatMintTheSameSessionIDGetTwoSessions(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	// Without --unique-sessions every process of the test agent calls its
	// first session "sess-1".
	first, err := h.client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "counter"})
	if err != nil {
		t.Fatal(err)
	}
	second, err := h.client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "counter"})
	if err != nil {
		t.Fatalf("the second session: %v", err)
	}
	if first.GetId() != "sess-1" || second.GetId() != "sess-1~2" {
		t.Errorf("ids %q and %q, want sess-1 and sess-1~2", first.GetId(), second.GetId())
	}
	if first.GetAcpSessionId() != "sess-1" || second.GetAcpSessionId() != "sess-1" {
		t.Errorf("acp_session_id %q and %q, want the agent's own sess-1 for both", first.GetAcpSessionId(), second.GetAcpSessionId())
	}
	for _, sess := range []*acpgatev1.Session{first, second} {
		events := collectOK(t, h, sess.GetId(), "chunk on "+sess.GetId())
		if got := last(events).GetOutcome().GetText(); got != "on "+sess.GetId() {
			t.Errorf("session %s answered %q", sess.GetId(), got)
		}
		if got := events[0].GetStarted().GetSessionId(); got != sess.GetId() {
			t.Errorf("started names session %q, want %q", got, sess.GetId())
		}
	}
	if _, err := h.client.CloseSession(ctx, &acpgatev1.CloseSessionRequest{SessionId: second.GetId()}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.GetSession(ctx, &acpgatev1.GetSessionRequest{SessionId: first.GetId()}); err != nil {
		t.Errorf("closing the second closed the first: %v", err)
	}
}

func TestAPageOfTurnsStaysReadableByAClientWithTheDefaultReceiveLimit(t *testing.T) {
	h := start(t)
	// Three turns whose outcomes carry about 2 MB each (the text twice).
	for range 3 {
		events := oneShot(t, h, "test", "flood 20 50000\nstop end_turn")
		if last(events).GetOutcome() == nil {
			t.Fatalf("terminal %v", last(events))
		}
	}
	var seen int
	token := ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("the pages do not end")
		}
		// h.client has gRPC's default 4 MiB receive limit.
		page, err := h.client.ListTurns(context.Background(), &acpgatev1.ListTurnsRequest{PageSize: 10, PageToken: token})
		if err != nil {
			t.Fatalf("page %d: %v", pages+1, err)
		}
		seen += len(page.GetTurns())
		if token = page.GetNextPageToken(); token == "" {
			break
		}
	}
	if seen != 3 {
		t.Errorf("the pages listed %d turns, want 3", seen)
	}
}
