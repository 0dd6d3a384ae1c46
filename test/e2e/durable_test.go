package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// The tests in this file check durable turns against the real binary: a
// turn outlives its stream and the gateway process, a stream is a cursor
// over the turn's journal, and a request_id means "run once".

// durableConfig counts the test agent's prompts in prompts (a file), so a
// test knows how often the agent was really asked. extra is prepended.
func durableConfig(t *testing.T, extra string) (config, prompts string) {
	t.Helper()
	prompts = filepath.Join(t.TempDir(), "prompts")
	return writeConfig(t, extra+fmt.Sprintf(`
shutdown_grace: 3s
agents:
  - name: test
    command: "${ACPGATE_E2E_AGENT}"
    args: [--unique-sessions, --count-prompts, %q]
    cancel_grace: 2s
`, prompts)), prompts
}

// promptsSeen is how many prompts the agent received.
func promptsSeen(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("prompt\n"))
}

// dialTest opens a connection of the test's own.
func dialTest(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// rawStream calls a server-streaming method and returns each message as the
// bytes the gateway sent, up to the end of the stream, and its status.
func rawStream(t *testing.T, conn *grpc.ClientConn, method string, req proto.Message) ([][]byte, error) {
	t.Helper()
	in, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, method, grpc.ForceCodec(rawCodec{}))
	if err != nil {
		return nil, err
	}
	if err := stream.SendMsg(in); err != nil {
		return nil, err
	}
	_ = stream.CloseSend()
	var out [][]byte
	for {
		var msg []byte
		if err := stream.RecvMsg(&msg); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, err
		}
		out = append(out, bytes.Clone(msg))
	}
}

func decodeEvents(t *testing.T, raw [][]byte) []*acpgatev1.PromptEvent {
	t.Helper()
	var events []*acpgatev1.PromptEvent
	for _, b := range raw {
		e := &acpgatev1.PromptEvent{}
		if err := proto.Unmarshal(b, e); err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
	}
	return events
}

// drain reads a stream to its end and returns its events.
func drain(t *testing.T, stream grpc.ServerStreamingClient[acpgatev1.PromptEvent]) []*acpgatev1.PromptEvent {
	t.Helper()
	var events []*acpgatev1.PromptEvent
	for {
		e, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return events
		}
		if err != nil {
			t.Fatalf("after %d events: %v", len(events), err)
		}
		events = append(events, e)
	}
}

// checkSeqs checks that events (heartbeats aside) are numbered from first
// on without gaps, but for a terminal, which may skip seqs (one numbered
// above the seqs a crashed or failed journal had reserved), and ends with
// a terminal.
func checkSeqs(t *testing.T, events []*acpgatev1.PromptEvent, first uint64) {
	t.Helper()
	want := first
	for _, e := range events {
		if e.GetHeartbeat() != nil {
			continue
		}
		terminal := e.GetOutcome() != nil || e.GetError() != nil
		if e.GetSeq() != want && !(terminal && e.GetSeq() > want) {
			t.Fatalf("event seq %d, want %d", e.GetSeq(), want)
		}
		want = e.GetSeq() + 1
	}
	if n := len(events); n == 0 || (events[n-1].GetOutcome() == nil && events[n-1].GetError() == nil) {
		t.Fatalf("the stream did not end with a terminal: %v", events)
	}
}

func chunkTexts(events []*acpgatev1.PromptEvent) string {
	var b strings.Builder
	for _, e := range events {
		b.WriteString(e.GetAgentMessageChunk().GetText())
	}
	return b.String()
}

func TestAClientWhoseConnectionDroppedReattachesAndGetsExactlyTheMissingEvents(t *testing.T) {
	cfg, _ := durableConfig(t, "")
	s := serve(t, "--config", cfg)
	script := "chunk a\nchunk b\nchunk c\nsleep 300\nchunk d\nchunk e\nstop end_turn"
	first := dialTest(t, s.addr)
	stream, err := acpgatev1.NewAgentGatewayClient(first).Prompt(context.Background(), &acpgatev1.PromptRequest{Agent: "test", Text: script, RequestId: "drop-1"})
	if err != nil {
		t.Fatal(err)
	}
	var seen []*acpgatev1.PromptEvent
	for len(seen) < 3 {
		e, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, e)
	}
	// The connection goes, as a crashed client's or a rescheduled pod's
	// does; the turn (request_id set: on_disconnect CONTINUE) runs on.
	_ = first.Close()
	turnID := seen[0].GetStarted().GetTurnId()
	last := seen[len(seen)-1].GetSeq()

	client := acpgatev1.NewAgentGatewayClient(dialTest(t, s.addr))
	watch, err := client.WatchTurn(context.Background(), &acpgatev1.WatchTurnRequest{TurnId: turnID, AfterSeq: last})
	if err != nil {
		t.Fatal(err)
	}
	rest := drain(t, watch)
	checkSeqs(t, rest, last+1)
	all := append(seen, rest...)
	if got := chunkTexts(all); got != "abcde" {
		t.Errorf("the chunks seen before and after the drop read %q, want abcde", got)
	}
	if o := rest[len(rest)-1].GetOutcome(); o.GetText() != "abcde" {
		t.Errorf("terminal %v", rest[len(rest)-1])
	}
}

func TestAResubmittedRequestIDAttachesToItsTurnWithoutAskingTheAgentAgain(t *testing.T) {
	cfg, prompts := durableConfig(t, "")
	s := serve(t, "--config", cfg)
	conn := dialTest(t, s.addr)
	req := &acpgatev1.PromptRequest{Agent: "test", Text: "chunk one\nsleep 500\nchunk two\nstop end_turn", RequestId: "once-1"}
	var (
		wg      sync.WaitGroup
		running [][]byte
		runErr  error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		running, runErr = rawStream(t, conn, "/acpgate.v1.AgentGateway/Prompt", req)
	}()
	// A resubmission while the turn runs (a retrying engine whose first
	// worker is still alive) ...
	time.Sleep(200 * time.Millisecond)
	during, err := rawStream(t, conn, "/acpgate.v1.AgentGateway/Prompt", req)
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if runErr != nil {
		t.Fatal(runErr)
	}
	// ... and one after it completed.
	after, err := rawStream(t, conn, "/acpgate.v1.AgentGateway/Prompt", req)
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string][][]byte{"while running": during, "after completion": after} {
		if len(got) != len(running) {
			t.Fatalf("the resubmission %s got %d events, the first submission %d", name, len(got), len(running))
		}
		for i := range got {
			if !bytes.Equal(got[i], running[i]) {
				t.Fatalf("the resubmission %s differs at event %d", name, i+1)
			}
		}
	}
	checkSeqs(t, decodeEvents(t, running), 1)
	if n := promptsSeen(t, prompts); n != 1 {
		t.Errorf("the agent was prompted %d times, want once", n)
	}
}

func TestAChangedPromptOrTargetUnderAUsedRequestIDIsAlreadyExists(t *testing.T) {
	cfg, prompts := durableConfig(t, "")
	s := serve(t, "--config", cfg)
	client := acpgatev1.NewAgentGatewayClient(dialTest(t, s.addr))
	stream, err := client.Prompt(context.Background(), &acpgatev1.PromptRequest{Agent: "test", Text: "chunk hi", RequestId: "used-1"})
	if err != nil {
		t.Fatal(err)
	}
	drain(t, stream)
	stream, err = client.Prompt(context.Background(), &acpgatev1.PromptRequest{Agent: "test", Text: "chunk something else", RequestId: "used-1"})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.AlreadyExists {
		t.Errorf("a changed prompt under a used request_id: %v, want ALREADY_EXISTS", err)
	}
	if n := promptsSeen(t, prompts); n != 1 {
		t.Errorf("the agent was prompted %d times, want once", n)
	}
}

func TestARetryableEndingLetsAResubmissionRunTheNextAttempt(t *testing.T) {
	cfg, prompts := durableConfig(t, "")
	s := serve(t, "--config", cfg)
	client := acpgatev1.NewAgentGatewayClient(dialTest(t, s.addr))
	req := &acpgatev1.PromptRequest{Agent: "test", Text: "chunk partial\nexit 3", RequestId: "flaky-1"}
	var turns []string
	for attempt := 1; attempt <= 2; attempt++ {
		stream, err := client.Prompt(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		events := drain(t, stream)
		e := events[len(events)-1].GetError()
		if e.GetTransport() == nil || !e.GetRetryable() {
			t.Fatalf("attempt %d ended with %v, want a retryable transport error", attempt, e)
		}
		turns = append(turns, events[0].GetStarted().GetTurnId())
		got, err := client.GetTurn(context.Background(), &acpgatev1.GetTurnRequest{TurnId: turns[attempt-1]})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetAttempt() != uint32(attempt) || got.GetRequestId() != "flaky-1" {
			t.Errorf("GetTurn: attempt %d, request %q; want attempt %d", got.GetAttempt(), got.GetRequestId(), attempt)
		}
	}
	if turns[0] == turns[1] {
		t.Errorf("the resubmission attached to the failed turn %s instead of running attempt 2", turns[0])
	}
	if n := promptsSeen(t, prompts); n != 2 {
		t.Errorf("the agent was prompted %d times, want twice", n)
	}
	// A non-retryable ending is final: resubmitting attaches to it.
	refused := &acpgatev1.PromptRequest{Agent: "test", Text: "stop refusal", RequestId: "refused-1"}
	var ids []string
	for range 2 {
		stream, err := client.Prompt(context.Background(), refused)
		if err != nil {
			t.Fatal(err)
		}
		events := drain(t, stream)
		if e := events[len(events)-1].GetError(); e.GetPolicyRefused() == nil || e.GetRetryable() {
			t.Fatalf("ended with %v, want a refusal that is not retryable", e)
		}
		ids = append(ids, events[0].GetStarted().GetTurnId())
	}
	if ids[0] != ids[1] {
		t.Errorf("resubmitting after a refusal ran the prompt again (turns %s and %s)", ids[0], ids[1])
	}
}

// killMidTurn starts a turn on s, reads its stream until its chunks read
// chunks, and kills s with SIGKILL once they are durable. It returns the
// events read.
func killMidTurn(t *testing.T, s *served, client acpgatev1.AgentGatewayClient, req *acpgatev1.PromptRequest, chunks string) []*acpgatev1.PromptEvent {
	t.Helper()
	stream, err := client.Prompt(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var seen []*acpgatev1.PromptEvent
	for chunkTexts(seen) != chunks {
		e, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, e)
	}
	// Chunks are durable within 100 ms of being sent.
	time.Sleep(150 * time.Millisecond)
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
	return seen
}

func TestAGatewayKilledMidTurnEndsTheTurnWithGatewayStoppedWhenItStartsAgain(t *testing.T) {
	state := t.TempDir()
	cfg, _ := durableConfig(t, fmt.Sprintf("state_dir: %q\n", state))
	s := serve(t, "--config", cfg)
	client := acpgatev1.NewAgentGatewayClient(dialTest(t, s.addr))
	seen := killMidTurn(t, s, client, &acpgatev1.PromptRequest{Agent: "test", Text: "chunk a\nchunk b\nhang", RequestId: "crash-1"}, "ab")

	again := serve(t, "--config", cfg)
	client = acpgatev1.NewAgentGatewayClient(dialTest(t, again.addr))
	turnID := seen[0].GetStarted().GetTurnId()
	got, err := client.GetTurn(context.Background(), &acpgatev1.GetTurnRequest{TurnId: turnID})
	if err != nil {
		t.Fatal(err)
	}
	e := got.GetTerminal().GetError()
	if got.GetState() != acpgatev1.TurnState_TURN_STATE_ENDED || e.GetTransport().GetReason() != acpgatev1.TransportReason_TRANSPORT_REASON_GATEWAY_STOPPED || !e.GetRetryable() {
		t.Fatalf("after the restart GetTurn says %v", got)
	}
	watch, err := client.WatchTurn(context.Background(), &acpgatev1.WatchTurnRequest{TurnId: turnID})
	if err != nil {
		t.Fatal(err)
	}
	replay := drain(t, watch)
	checkSeqs(t, replay, 1)
	if len(replay) != len(seen)+1 {
		t.Fatalf("the replay has %d events, want the %d seen before the crash and the terminal", len(replay), len(seen))
	}
	for i, e := range seen {
		if !proto.Equal(replay[i], e) {
			t.Errorf("replayed event %d is %v, the stream carried %v", i+1, replay[i], e)
		}
	}
	if !proto.Equal(replay[len(replay)-1], got.GetTerminal()) {
		t.Errorf("the replay's terminal %v is not GetTurn's %v", replay[len(replay)-1], got.GetTerminal())
	}
}

func TestFiftyWatchersOfOneTurnAllSeeTheBytesItsStreamCarried(t *testing.T) {
	cfg, _ := durableConfig(t, "")
	s := serve(t, "--config", cfg)
	conn := dialTest(t, s.addr)
	req := &acpgatev1.PromptRequest{Agent: "test", Text: "sleep 300\nflood 5000 64\nsleep 200\nchunk end\nstop end_turn"}
	var (
		prompted [][]byte
		err      error
		wg       sync.WaitGroup
	)
	started := make(chan string, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		in, _ := proto.Marshal(req)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		stream, e := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/acpgate.v1.AgentGateway/Prompt", grpc.ForceCodec(rawCodec{}))
		if e == nil {
			e = stream.SendMsg(in)
		}
		for e == nil {
			var msg []byte
			if e = stream.RecvMsg(&msg); e == nil {
				if len(prompted) == 0 {
					ev := &acpgatev1.PromptEvent{}
					_ = proto.Unmarshal(msg, ev)
					started <- ev.GetStarted().GetTurnId()
				}
				prompted = append(prompted, bytes.Clone(msg))
			}
		}
		if !errors.Is(e, io.EOF) {
			err = e
		}
	}()
	turnID := <-started
	watched := make([][][]byte, 50)
	errs := make([]error, 50)
	for i := range watched {
		wg.Add(1)
		go func() {
			defer wg.Done()
			watched[i], errs[i] = rawStream(t, conn, "/acpgate.v1.AgentGateway/WatchTurn", &acpgatev1.WatchTurnRequest{TurnId: turnID})
		}()
	}
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	checkSeqs(t, decodeEvents(t, prompted), 1)
	for i, w := range watched {
		if errs[i] != nil {
			t.Fatalf("watcher %d: %v", i, errs[i])
		}
		if len(w) != len(prompted) {
			t.Fatalf("watcher %d got %d events, the Prompt stream %d", i, len(w), len(prompted))
		}
		for k := range w {
			if !bytes.Equal(w[k], prompted[k]) {
				t.Fatalf("watcher %d differs from the Prompt stream at event %d", i, k+1)
			}
		}
	}
}

func TestRetentionDeletesAnEndedTurnAndFreesItsRequestID(t *testing.T) {
	cfg, prompts := durableConfig(t, "turn_retention: 1s\n")
	s := serve(t, "--config", cfg)
	client := acpgatev1.NewAgentGatewayClient(dialTest(t, s.addr))
	req := &acpgatev1.PromptRequest{Agent: "test", Text: "chunk hi", RequestId: "kept-1"}
	stream, err := client.Prompt(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	turnID := drain(t, stream)[0].GetStarted().GetTurnId()
	if _, err := client.GetTurn(context.Background(), &acpgatev1.GetTurnRequest{TurnId: turnID}); err != nil {
		t.Fatalf("a turn just ended: %v", err)
	}
	// Retention 1 s, swept every second: gone within a few seconds.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, err := client.GetTurn(context.Background(), &acpgatev1.GetTurnRequest{TurnId: turnID})
		if status.Code(err) == codes.NotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after a 1 s retention GetTurn says %v", err)
		}
	}
	watch, err := client.WatchTurn(context.Background(), &acpgatev1.WatchTurnRequest{TurnId: turnID})
	if err == nil {
		_, err = watch.Recv()
	}
	if status.Code(err) != codes.NotFound {
		t.Errorf("WatchTurn of an expired turn: %v, want NOT_FOUND", err)
	}
	stream, err = client.Prompt(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if again := drain(t, stream)[0].GetStarted().GetTurnId(); again == turnID {
		t.Error("the expired turn answered its request_id")
	}
	if n := promptsSeen(t, prompts); n != 2 {
		t.Errorf("the agent was prompted %d times, want twice (the key was freed)", n)
	}
}

func TestHeartbeatsKeepAQuietStreamAliveAndAreNeverReplayed(t *testing.T) {
	cfg, _ := durableConfig(t, "heartbeat_interval: 200ms\n")
	s := serve(t, "--config", cfg)
	client := acpgatev1.NewAgentGatewayClient(dialTest(t, s.addr))
	stream, err := client.Prompt(context.Background(), &acpgatev1.PromptRequest{Agent: "test", Text: "sleep 1000\nchunk done"})
	if err != nil {
		t.Fatal(err)
	}
	live := drain(t, stream)
	checkSeqs(t, live, 1)
	beats := 0
	for _, e := range live {
		if hb := e.GetHeartbeat(); hb != nil {
			beats++
			if e.GetSeq() != 0 || hb.GetLastSeq() != 1 {
				t.Errorf("heartbeat with seq %d, last_seq %d; want 0 and 1 (only started had been sent)", e.GetSeq(), hb.GetLastSeq())
			}
		}
	}
	if beats < 2 {
		t.Errorf("%d heartbeats in a second of silence with a 200 ms interval", beats)
	}
	watch, err := client.WatchTurn(context.Background(), &acpgatev1.WatchTurnRequest{TurnId: live[0].GetStarted().GetTurnId()})
	if err != nil {
		t.Fatal(err)
	}
	replay := drain(t, watch)
	if len(replay) != len(live)-beats {
		t.Errorf("the replay has %d events; the stream had %d besides its %d heartbeats", len(replay), len(live)-beats, beats)
	}
	for _, e := range replay {
		if e.GetHeartbeat() != nil {
			t.Error("a heartbeat was replayed")
		}
	}
}

func TestATurnWhoseJournalReachesMaxTurnBytesIsCancelledSayingSo(t *testing.T) {
	cfg, _ := durableConfig(t, "limits: {max_turn_bytes: 1048576}\n")
	s := serve(t, "--config", cfg)
	client := acpgatev1.NewAgentGatewayClient(dialTest(t, s.addr))
	stream, err := client.Prompt(context.Background(), &acpgatev1.PromptRequest{Agent: "test", Text: "flood 200000 64\nstop end_turn"})
	if err != nil {
		t.Fatal(err)
	}
	events := drain(t, stream)
	checkSeqs(t, events, 1)
	// Cancelled, or, when the agent had already answered before the cancel
	// reached it, a gateway error: never an outcome, since events past the
	// limit were not journaled.
	e := events[len(events)-1].GetError()
	if (!e.GetHarness().GetCancelled() && e.GetGateway() == nil) || !strings.Contains(e.GetMessage(), "max_turn_bytes") {
		t.Fatalf("terminal %v, want a cancellation or a gateway error naming max_turn_bytes", events[len(events)-1])
	}
	size := 0
	for _, ev := range events[:len(events)-1] {
		size += proto.Size(ev)
	}
	if size > 1<<20+64<<10 {
		t.Errorf("the journal carried %d bytes before the terminal, over the 1 MiB bound", size)
	}
}

func TestOnDisconnectCancelCancelsATurnWithARequestID(t *testing.T) {
	cfg, _ := durableConfig(t, "")
	s := serve(t, "--config", cfg)
	first := dialTest(t, s.addr)
	stream, err := acpgatev1.NewAgentGatewayClient(first).Prompt(context.Background(), &acpgatev1.PromptRequest{
		Agent: "test", Text: "chunk a\nhang", RequestId: "cancel-1",
		OnDisconnect: acpgatev1.DisconnectPolicy_DISCONNECT_POLICY_CANCEL,
	})
	if err != nil {
		t.Fatal(err)
	}
	e, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	turnID := e.GetStarted().GetTurnId()
	_ = first.Close()
	client := acpgatev1.NewAgentGatewayClient(dialTest(t, s.addr))
	watch, err := client.WatchTurn(context.Background(), &acpgatev1.WatchTurnRequest{TurnId: turnID})
	if err != nil {
		t.Fatal(err)
	}
	events := drain(t, watch)
	if !events[len(events)-1].GetError().GetHarness().GetCancelled() {
		t.Errorf("the turn ended with %v, want cancelled", events[len(events)-1])
	}
}
