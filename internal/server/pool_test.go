package server_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/server"
)

// warmReady waits, up to ten seconds, for agent to have n warm processes
// ready and none starting.
func warmReady(t *testing.T, h *harness, agent string, n uint32) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := h.client.ListAgents(context.Background(), &acpgatev1.ListAgentsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range resp.GetAgents() {
			if a.GetName() == agent && a.GetWarmReady() == n && a.GetWarmStarting() == 0 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent %q never had %d warm processes ready: %v", agent, n, resp)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestWarmProcessesServeConcurrentSessionsInTheirOwnDirectoriesAndTheGatewayStopsThePools(t *testing.T) {
	h := startWith(t, func(o *server.Options) {
		for i := range o.Config.Agents {
			switch o.Config.Agents[i].Name {
			case "counter":
				o.Config.Agents[i].Warm = 3
			case "ws":
				o.Config.Agents[i].Warm = 1
			}
		}
	})
	warmReady(t, h, "counter", 3)
	warmReady(t, h, "ws", 1)

	// More one-shot turns at once than there are warm processes: some
	// take one, the others start cold, and every turn completes.
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			stream, err := h.client.Prompt(context.Background(), &acpgatev1.PromptRequest{Agent: "counter", Text: "chunk hi\nstop end_turn"})
			for err == nil {
				var e *acpgatev1.PromptEvent
				if e, err = stream.Recv(); e.GetOutcome() != nil {
					return
				}
			}
			t.Errorf("a one-shot turn ended without an outcome: %v", err)
		})
	}
	wg.Wait()

	ctx := context.Background()
	root, err := filepath.EvalSymlinks(h.ws)
	if err != nil {
		t.Fatal(err)
	}
	// The workspace's root takes the warm process, a subdirectory starts
	// cold: each session runs where it asked to.
	for cwd, want := range map[string]string{"": root, "sub": filepath.Join(root, "sub")} {
		sess, err := h.client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "ws", Cwd: cwd})
		if err != nil {
			t.Fatalf("CreateSession cwd %q: %v", cwd, err)
		}
		if sess.GetCwd() != want {
			t.Errorf("a session asking for cwd %q runs in %s, want %s", cwd, sess.GetCwd(), want)
		}
		if e := last(collectOK(t, h, sess.GetId(), "chunk hi\nstop end_turn")); e.GetOutcome() == nil {
			t.Errorf("terminal %v", e)
		}
	}
	warmReady(t, h, "counter", 3)
	warmReady(t, h, "ws", 1)
	// The harness shuts the gateway down; TestMain's goleak check then
	// finds any goroutine of a pool that did not end.
}
