package server_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/config"
	"github.com/acpgate/acpgate/internal/server"
)

// startsYAML is a gateway that starts one agent at a time: hangs never
// answers initialize (it holds its start-up until its caller leaves or
// its handshake timeout), brief has a short handshake timeout, which
// bounds its wait for a start-up slot too, pooled keeps one warm process
// that takes pooledStart to start, never-opens answers initialize but
// never session/new, and brisk has a handshake timeout of 2 s. Each notes
// its spawns in dir.
func startsYAML(dir string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
limits: {max_starting_agents: 1}
agents:
  - name: hangs
    command: "${TESTAGENT}"
    args: [--hang-on, initialize, --count-starts, %[1]s/hangs]
    handshake_timeout: 30s
  - name: brief
    command: "${TESTAGENT}"
    args: [--unique-sessions, --count-starts, %[1]s/brief]
    handshake_timeout: 300ms
  - name: patient
    command: "${TESTAGENT}"
    args: [--unique-sessions, --count-starts, %[1]s/patient]
  - name: pooled
    command: "${TESTAGENT}"
    args: [--unique-sessions, --initialize-delay, 2s]
    warm: 1
  - name: never-opens
    command: "${TESTAGENT}"
    args: [--hang-on, session/new, --count-starts, %[1]s/never-opens]
    handshake_timeout: 30s
  - name: brisk
    command: "${TESTAGENT}"
    args: [--unique-sessions]
    handshake_timeout: 2s
`, dir)
}

// spawns is how many times the agent counting into file was spawned.
func spawns(file string) int {
	b, _ := os.ReadFile(file)
	return strings.Count(string(b), "start")
}

// startOneAtATime starts a gateway configured by startsYAML, and returns
// it and the directory where its agents count their spawns.
func startOneAtATime(t *testing.T) (h *harness, dir string) {
	t.Helper()
	dir = t.TempDir()
	h = startWith(t, func(o *server.Options) {
		cfg, err := config.Parse([]byte(startsYAML(dir)), "starts.yaml", o.LookupEnv)
		if err != nil {
			t.Fatal(err)
		}
		o.Config = cfg
	})
	return h, dir
}

// hangAStart starts a one-shot turn of agent, one of those of startsYAML
// that never answer, until leave is called, and returns once the agent has
// been spawned. With hangs, the turn takes the gateway's one start-up slot
// and keeps it (it never answers initialize).
func hangAStart(ctx context.Context, t *testing.T, h *harness, dir, agent string) (leave func()) {
	t.Helper()
	hctx, leave := context.WithCancel(ctx)
	t.Cleanup(leave)
	if _, err := h.client.Prompt(hctx, &acpgatev1.PromptRequest{Agent: agent, Text: "chunk never"}); err != nil {
		t.Fatal(err)
	}
	for spawns(filepath.Join(dir, agent)) == 0 {
		if ctx.Err() != nil {
			t.Fatalf("%s was never spawned", agent)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return leave
}

func TestAStartUpThatCannotGetASlotInItsHandshakeTimeFailsAsTheGatewaysRetryableFailureAndNeverSpawns(t *testing.T) {
	h, dir := startOneAtATime(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	leave := hangAStart(ctx, t, h, dir, "hangs")

	began := time.Now()
	events := oneShot(t, h, "brief", "chunk hello\nstop end_turn")
	waited := time.Since(began)
	e := last(events).GetError()
	if e.GetGateway() == nil || !e.GetRetryable() || !strings.Contains(e.GetMessage(), "limits.max_starting_agents") {
		t.Fatalf("brief's turn ended with %v; want a retryable gateway failure naming limits.max_starting_agents", last(events))
	}
	if e.GetTransport() != nil {
		t.Errorf("a start-up that never began is blamed on the agent's transport: %v", e)
	}
	if waited < 300*time.Millisecond {
		t.Errorf("brief gave up after %s, before its handshake timeout of 300ms", waited)
	}
	_, err := h.client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "brief"})
	if status.Code(err) != codes.Unavailable || !strings.Contains(status.Convert(err).Message(), "limits.max_starting_agents") {
		t.Errorf("CreateSession of brief got %v; want UNAVAILABLE naming limits.max_starting_agents", err)
	}
	if n := spawns(filepath.Join(dir, "brief")); n != 0 {
		t.Errorf("brief was spawned %d times; a start-up that got no slot must not spawn", n)
	}

	// Its caller leaving ends hangs' start-up, which gives the slot back.
	leave()
	events = oneShot(t, h, "patient", "chunk hello\nstop end_turn")
	if o := last(events).GetOutcome(); o == nil || o.GetText() != "hello" {
		t.Fatalf("after the slot was given back, patient's turn ended with %v; want its answer", last(events))
	}
}

const pooledStart = 2 * time.Second

// Had the pool queued for the slot when its warm process was taken, the
// caller's start-up, which came after, would have waited for the pool's
// whole start-up.
func TestAWarmPoolsRefillNeverMakesACallersStartUpWaitBehindIt(t *testing.T) {
	h, dir := startOneAtATime(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	warmReady(t, h, "pooled", 1)
	leave := hangAStart(ctx, t, h, dir, "hangs")
	// A turn takes pooled's warm process, which needs no slot; the pool
	// now wants another and finds no slot free.
	if o := last(oneShot(t, h, "pooled", "chunk hi\nstop end_turn")).GetOutcome(); o == nil {
		t.Fatal("the turn on the warm process did not complete")
	}
	// patient's cold start-up waits for the slot. The second is for its
	// call to reach the wait, which takes milliseconds.
	done := make(chan *acpgatev1.PromptEvent, 1)
	go func() {
		var last *acpgatev1.PromptEvent
		stream, err := h.client.Prompt(ctx, &acpgatev1.PromptRequest{Agent: "patient", Text: "chunk hello\nstop end_turn"})
		for err == nil {
			var e *acpgatev1.PromptEvent
			if e, err = stream.Recv(); e != nil {
				last = e
			}
		}
		done <- last
	}()
	time.Sleep(time.Second)

	leave()
	freed := time.Now()
	terminal := <-done
	if o := terminal.GetOutcome(); o == nil || o.GetText() != "hello" {
		t.Fatalf("patient's turn ended with %v", terminal)
	}
	if took := time.Since(freed); took >= pooledStart*3/4 {
		t.Errorf("patient's turn ended %s after the slot was freed: it waited behind the pool's start-up of %s", took, pooledStart)
	}
}

// A session/load replaying a long history, or an agent slow to open its
// session, would otherwise hold the slot for as long as it takes, and the
// start-ups waiting behind it would fail.
func TestAStartUpGivesItsSlotBackOnceTheAgentHasAnsweredInitialize(t *testing.T) {
	h, dir := startOneAtATime(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	warmReady(t, h, "pooled", 1)
	hangAStart(ctx, t, h, dir, "never-opens")
	// never-opens waits for its session/new for 30 s; brisk, whose
	// start-up may wait 2 s for the slot, starts and answers.
	events := oneShot(t, h, "brisk", "chunk hello\nstop end_turn")
	if o := last(events).GetOutcome(); o == nil || o.GetText() != "hello" {
		t.Fatalf("brisk's turn ended with %v, while never-opens held its process waiting for session/new", last(events))
	}
}
