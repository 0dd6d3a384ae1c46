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
// bounds its wait for a start-up slot too. Each notes its spawns in dir.
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
`, dir)
}

// spawns is how many times the agent counting into file was spawned.
func spawns(file string) int {
	b, _ := os.ReadFile(file)
	return strings.Count(string(b), "start")
}

func TestAStartUpThatCannotGetASlotInItsHandshakeTimeFailsAsTheGatewaysRetryableFailureAndNeverSpawns(t *testing.T) {
	dir := t.TempDir()
	h := startWith(t, func(o *server.Options) {
		cfg, err := config.Parse([]byte(startsYAML(dir)), "starts.yaml", o.LookupEnv)
		if err != nil {
			t.Fatal(err)
		}
		o.Config = cfg
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// hangs takes the one slot and keeps it: its agent never answers.
	hctx, leave := context.WithCancel(ctx)
	defer leave()
	_, err := h.client.Prompt(hctx, &acpgatev1.PromptRequest{Agent: "hangs", Text: "chunk never"})
	if err != nil {
		t.Fatal(err)
	}
	for spawns(filepath.Join(dir, "hangs")) == 0 {
		if ctx.Err() != nil {
			t.Fatal("the agent that hangs was never spawned")
		}
		time.Sleep(10 * time.Millisecond)
	}

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
	_, err = h.client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "brief"})
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
