package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// The tests in this file check the seq contract against the real binary:
// a seq, once sent to anyone, names the same event for good, and every
// WatchTurn ends with the turn's terminal, whatever its after_seq.

// watchFrom drains WatchTurn(turnID, after) within a bound.
func watchFrom(t *testing.T, client acpgatev1.AgentGatewayClient, turnID string, after uint64) []*acpgatev1.PromptEvent {
	t.Helper()
	events, err := watchEvents(client, turnID, after)
	if err != nil {
		t.Fatalf("WatchTurn after %d: %v", after, err)
	}
	return events
}

// watchEvents is watchFrom for any goroutine: it returns the error.
func watchEvents(client acpgatev1.AgentGatewayClient, turnID string, after uint64) ([]*acpgatev1.PromptEvent, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := client.WatchTurn(ctx, &acpgatev1.WatchTurnRequest{TurnId: turnID, AfterSeq: after})
	if err != nil {
		return nil, err
	}
	var events []*acpgatev1.PromptEvent
	for {
		e, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return withoutHeartbeats(events), nil
		}
		if err != nil {
			return events, fmt.Errorf("after %d events: %w", len(events), err)
		}
		events = append(events, e)
	}
}

func withoutHeartbeats(events []*acpgatev1.PromptEvent) []*acpgatev1.PromptEvent {
	var out []*acpgatev1.PromptEvent
	for _, e := range events {
		if e.GetHeartbeat() == nil {
			out = append(out, e)
		}
	}
	return out
}

// wantOnlyTerminal checks that a watch carried the terminal and nothing
// else.
func wantOnlyTerminal(t *testing.T, what string, got []*acpgatev1.PromptEvent, terminal *acpgatev1.PromptEvent) {
	t.Helper()
	if len(got) != 1 || !proto.Equal(got[0], terminal) {
		t.Errorf("%s carried %d events (seqs %s); want only the terminal %s", what, len(got), seqsOf(got), brief(terminal))
	}
}

// promptFor starts req on client, its call bounded by d.
func promptFor(t *testing.T, client acpgatev1.AgentGatewayClient, req *acpgatev1.PromptRequest, d time.Duration) grpc.ServerStreamingClient[acpgatev1.PromptEvent] {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	stream, err := client.Prompt(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return stream
}

// brief describes an event in a line: a terminal may carry megabytes.
func brief(e *acpgatev1.PromptEvent) string {
	s := prototext.MarshalOptions{}.Format(e)
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

func seqsOf(events []*acpgatev1.PromptEvent) string {
	var b []string
	for _, e := range events {
		b = append(b, fmt.Sprint(e.GetSeq()))
	}
	if len(b) > 10 {
		b = append(b[:5], append([]string{"…"}, b[len(b)-5:]...)...)
	}
	return strings.Join(b, ",")
}

// Before seqs were reserved, a gateway killed mid-turn numbered the turn's
// terminal right after the last event the store had: a seq the client had
// already seen as a chunk became the terminal, and a client resuming
// from the last seq it saw got an empty stream with no ending.
func TestASeqAClientSawNamesTheSameEventAfterAKillAndResumingFromItEndsWithTheTerminal(t *testing.T) {
	state := t.TempDir()
	cfg, _ := durableConfig(t, fmt.Sprintf("state_dir: %q\n", state))
	s := serve(t, "--config", cfg)
	client := acpgatev1.NewAgentGatewayClient(dialTest(t, s.addr))
	// 2,000 chunks a second for far longer than the test: about a
	// hundred of them are always waiting for the store.
	stream := promptFor(t, client, &acpgatev1.PromptRequest{Agent: "test", Text: "flood_timed 1000000 64 2000", RequestId: "paced-kill-1"}, time.Minute)
	seen := map[uint64]*acpgatev1.PromptEvent{}
	var lastSeen uint64
	var turnID string
	for chunks := 0; chunks < 1000; {
		e, err := stream.Recv()
		if err != nil {
			t.Fatalf("after %d chunks: %v", chunks, err)
		}
		if e.GetHeartbeat() != nil {
			continue
		}
		if e.GetStarted() != nil {
			turnID = e.GetStarted().GetTurnId()
		}
		if e.GetAgentMessageChunk() != nil {
			chunks++
		}
		seen[e.GetSeq()], lastSeen = e, e.GetSeq()
	}
	// At once: the last chunks read are not in the store yet.
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited

	again := serve(t, "--config", cfg)
	client = acpgatev1.NewAgentGatewayClient(dialTest(t, again.addr))
	got, err := client.GetTurn(context.Background(), &acpgatev1.GetTurnRequest{TurnId: turnID})
	if err != nil {
		t.Fatal(err)
	}
	terminal := got.GetTerminal()
	if got.GetState() != acpgatev1.TurnState_TURN_STATE_ENDED || terminal.GetError().GetTransport().GetReason() != acpgatev1.TransportReason_TRANSPORT_REASON_GATEWAY_STOPPED {
		t.Fatalf("after the restart GetTurn says %s", brief(terminal))
	}
	if terminal.GetSeq() <= lastSeen || got.GetLastSeq() != terminal.GetSeq() {
		t.Errorf("the terminal has seq %d (last_seq %d), not above the last seq the client saw, %d", terminal.GetSeq(), got.GetLastSeq(), lastSeen)
	}

	replay := watchFrom(t, client, turnID, 0)
	if n := len(replay); n == 0 || !proto.Equal(replay[n-1], terminal) {
		t.Fatalf("the replay (seqs %s) does not end with GetTurn's terminal", seqsOf(replay))
	}
	kept := 0
	for _, e := range replay {
		if was, ok := seen[e.GetSeq()]; ok {
			kept++
			if !proto.Equal(e, was) {
				t.Fatalf("seq %d names %s after the restart; the client saw %s", e.GetSeq(), brief(e), brief(was))
			}
		}
	}
	t.Logf("the client saw seqs 1 to %d; the store kept %d of them, and the terminal is at %d", lastSeen, kept, terminal.GetSeq())

	wantOnlyTerminal(t, fmt.Sprintf("WatchTurn after the last seq seen (%d)", lastSeen), watchFrom(t, client, turnID, lastSeen), terminal)
	wantOnlyTerminal(t, "WatchTurn after the terminal's seq", watchFrom(t, client, turnID, terminal.GetSeq()), terminal)
	wantOnlyTerminal(t, "WatchTurn after a seq far past the turn", watchFrom(t, client, turnID, 1<<40), terminal)
}

// Before, a watcher of a running turn whose after_seq was past the turn's
// last seq saw the turn end and returned with nothing.
func TestAWatcherOfARunningTurnPastItsLastSeqWaitsForTheTerminal(t *testing.T) {
	cfg, _ := durableConfig(t, "")
	s := serve(t, "--config", cfg)
	client := acpgatev1.NewAgentGatewayClient(dialTest(t, s.addr))
	stream := promptFor(t, client, &acpgatev1.PromptRequest{Agent: "test", Text: "chunk a\nsleep 500\nchunk b\nstop end_turn", RequestId: "running-watch-1"}, 30*time.Second)
	first, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	turnID := first.GetStarted().GetTurnId()
	type result struct {
		events []*acpgatev1.PromptEvent
		err    error
	}
	watched := make(chan result, 1)
	go func() {
		events, err := watchEvents(client, turnID, 1<<40)
		watched <- result{events, err}
	}()
	events := append([]*acpgatev1.PromptEvent{first}, drain(t, stream)...)
	terminal := events[len(events)-1]
	if terminal.GetOutcome() == nil {
		t.Fatalf("the turn ended with %s", brief(terminal))
	}
	select {
	case got := <-watched:
		if got.err != nil {
			t.Fatal(got.err)
		}
		wantOnlyTerminal(t, "WatchTurn of the running turn after a seq far past it", got.events, terminal)
	case <-time.After(20 * time.Second):
		t.Fatal("the watcher did not end within 20 s of the turn's end")
	}
}

// Before, a journal at its size limit ended the stream with the retryable
// journal failure but left the record running: GetTurn said RUNNING, the
// same request_id attached to the dead turn instead of running attempt 2,
// and a restart wrote a second, different terminal.
func TestAJournalAtItsSizeLimitRecordsTheStreamsTerminalAndItsRequestIDRunsAgain(t *testing.T) {
	state := t.TempDir()
	cfg, prompts := durableConfig(t, fmt.Sprintf("state_dir: %q\n", state))
	s := serve(t, "--config", cfg)
	// A real limit on the real process: the kernel refuses a write past
	// 2 MiB in any file with EFBIG. The database stays well below it.
	limit := unix.Rlimit{Cur: 2 << 20, Max: 2 << 20}
	if err := unix.Prlimit(s.cmd.Process.Pid, unix.RLIMIT_FSIZE, &limit, nil); err != nil {
		t.Fatalf("prlimit: %v", err)
	}
	client := acpgatev1.NewAgentGatewayClient(dialTest(t, s.addr))
	req := &acpgatev1.PromptRequest{Agent: "test", Text: "flood 20000 256\nstop end_turn", OmitOutcomeText: true, RequestId: "full-journal-1"}
	var turns []*acpgatev1.Turn
	for attempt := 1; attempt <= 2; attempt++ {
		events := withoutHeartbeats(drain(t, promptFor(t, client, req, time.Minute)))
		terminal := events[len(events)-1]
		if e := terminal.GetError(); e.GetGateway() == nil || !e.GetRetryable() || !strings.Contains(e.GetMessage(), "journal") {
			t.Fatalf("attempt %d ended with %s; want a retryable gateway error about the journal", attempt, brief(terminal))
		}
		got, err := client.GetTurn(context.Background(), &acpgatev1.GetTurnRequest{TurnId: events[0].GetStarted().GetTurnId()})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetState() != acpgatev1.TurnState_TURN_STATE_ENDED || !proto.Equal(got.GetTerminal(), terminal) {
			t.Fatalf("attempt %d: GetTurn says %v with %s; want ENDED with the stream's terminal %s", attempt, got.GetState(), brief(got.GetTerminal()), brief(terminal))
		}
		if got.GetAttempt() != uint32(attempt) {
			t.Errorf("the turn is attempt %d, want %d", got.GetAttempt(), attempt)
		}
		wantOnlyTerminal(t, "WatchTurn after the last seq", watchFrom(t, client, got.GetTurnId(), got.GetLastSeq()), terminal)
		turns = append(turns, got)
	}
	if turns[0].GetTurnId() == turns[1].GetTurnId() {
		t.Errorf("the resubmission attached to the failed turn %s instead of running attempt 2", turns[0].GetTurnId())
	}
	if n := promptsSeen(t, prompts); n != 2 {
		t.Errorf("the agent was prompted %d times, want twice (attempt 2 ran)", n)
	}

	// A restart finds both turns ended as their streams said.
	s.stop(t, syscall.SIGTERM)
	again := serve(t, "--config", cfg)
	client = acpgatev1.NewAgentGatewayClient(dialTest(t, again.addr))
	for _, was := range turns {
		got, err := client.GetTurn(context.Background(), &acpgatev1.GetTurnRequest{TurnId: was.GetTurnId()})
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(got.GetTerminal(), was.GetTerminal()) {
			t.Errorf("after a restart turn %s ends with %s; its stream ended with %s", was.GetTurnId(), brief(got.GetTerminal()), brief(was.GetTerminal()))
		}
	}
}

// Before, a turn whose store refused even its terminal stayed RUNNING: its
// request_id attached to the dead turn, and the next start ended it with a
// terminal of its own (GATEWAY_STOPPED) in place of the one its stream got.
// endedWithTheStoreRefusingEverything runs a turn on a gateway with a
// state directory whose files, once the turn is recorded, cannot grow by
// a byte, so the store refuses the turn's events and its terminal alike.
// It checks what the turn's ending looks like then, from the stream,
// GetTurn and WatchTurn, and returns the gateway, still under the limit,
// with the turn's request and its terminal.
func endedWithTheStoreRefusingEverything(t *testing.T) (s *served, cfg, prompts string, client acpgatev1.AgentGatewayClient, req *acpgatev1.PromptRequest, turnID string, terminal *acpgatev1.PromptEvent) {
	t.Helper()
	state := t.TempDir()
	cfg, prompts = durableConfig(t, fmt.Sprintf("state_dir: %q\n", state))
	s = serve(t, "--config", cfg)
	client = acpgatev1.NewAgentGatewayClient(dialTest(t, s.addr))
	req = &acpgatev1.PromptRequest{Agent: "test", Text: "chunk a\nsleep 300\nchunk b\nstop end_turn", RequestId: "refused-terminal-1"}
	stream := promptFor(t, client, req, time.Minute)
	first, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	turnID = first.GetStarted().GetTurnId()
	// A real limit on the real process: the kernel refuses with EFBIG a
	// write past the first byte of any file, the journal's or the
	// database's.
	if err := unix.Prlimit(s.cmd.Process.Pid, unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: 1, Max: unix.RLIM_INFINITY}, nil); err != nil {
		t.Fatalf("prlimit: %v", err)
	}
	events := append([]*acpgatev1.PromptEvent{first}, withoutHeartbeats(drain(t, stream))...)
	terminal = events[len(events)-1]
	if e := terminal.GetError(); e.GetGateway() == nil || !e.GetRetryable() {
		t.Fatalf("the turn ended with %s; want a retryable gateway error", brief(terminal))
	}
	got, err := client.GetTurn(context.Background(), &acpgatev1.GetTurnRequest{TurnId: turnID})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetState() != acpgatev1.TurnState_TURN_STATE_ENDED || !proto.Equal(got.GetTerminal(), terminal) {
		t.Fatalf("GetTurn says %v with %s; want ENDED with the stream's terminal %s", got.GetState(), brief(got.GetTerminal()), brief(terminal))
	}
	wantOnlyTerminal(t, "WatchTurn after the last seq", watchFrom(t, client, turnID, got.GetLastSeq()), terminal)
	return s, cfg, prompts, client, req, turnID, terminal
}

// A turn ended in memory whose gateway is killed before the store takes
// its terminal is ended again at the next start: at a seq of its own, so
// that the seq its stream's terminal had names no other event.
func TestATurnEndedInMemoryAndKilledBeforeTheStoreRecoversIsEndedAtASeqItsStreamNeverUsed(t *testing.T) {
	s, cfg, _, _, _, turnID, terminal := endedWithTheStoreRefusingEverything(t)
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
	again := serve(t, "--config", cfg)
	client := acpgatev1.NewAgentGatewayClient(dialTest(t, again.addr))
	got, err := client.GetTurn(context.Background(), &acpgatev1.GetTurnRequest{TurnId: turnID})
	if err != nil {
		t.Fatal(err)
	}
	stopped := got.GetTerminal()
	if stopped.GetError().GetTransport().GetReason() != acpgatev1.TransportReason_TRANSPORT_REASON_GATEWAY_STOPPED || stopped.GetSeq() <= terminal.GetSeq() {
		t.Fatalf("after the restart the turn ends with %s; want GATEWAY_STOPPED above the seq of its stream's terminal, %d", brief(stopped), terminal.GetSeq())
	}
	for _, e := range watchFrom(t, client, turnID, 0) {
		if e.GetSeq() == terminal.GetSeq() {
			t.Errorf("seq %d, its stream's terminal, now names %s", e.GetSeq(), brief(e))
		}
	}
	wantOnlyTerminal(t, "WatchTurn after the seq of the stream's terminal", watchFrom(t, client, turnID, terminal.GetSeq()), stopped)
}

func TestATerminalTheStoreRefusesEndsTheTurnInMemoryAndIsRecordedOnceTheStoreTakesIt(t *testing.T) {
	s, cfg, prompts, client, req, turnID, terminal := endedWithTheStoreRefusingEverything(t)
	// The store takes writes again: the janitor records the terminal.
	if err := unix.Prlimit(s.cmd.Process.Pid, unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY}, nil); err != nil {
		t.Fatalf("prlimit: %v", err)
	}
	waitLog(t, s, "the turn's terminal, which the store had refused, is recorded")
	retry := withoutHeartbeats(drain(t, promptFor(t, client, req, time.Minute)))
	if id := retry[0].GetStarted().GetTurnId(); id == turnID {
		t.Errorf("the resubmission attached to the failed turn %s instead of running attempt 2", turnID)
	}
	if n := promptsSeen(t, prompts); n != 2 {
		t.Errorf("the agent was prompted %d times, want twice (attempt 2 ran)", n)
	}

	// Killed, and started again: the record says what the stream said.
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
	again := serve(t, "--config", cfg)
	client = acpgatev1.NewAgentGatewayClient(dialTest(t, again.addr))
	got, err := client.GetTurn(context.Background(), &acpgatev1.GetTurnRequest{TurnId: turnID})
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got.GetTerminal(), terminal) {
		t.Errorf("after a restart the turn ends with %s; its stream ended with %s", brief(got.GetTerminal()), brief(terminal))
	}
}
