package acp_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"
	"google.golang.org/protobuf/types/known/structpb"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/acp"
	"github.com/acpgate/acpgate/internal/acp/agentproc"
	"github.com/acpgate/acpgate/internal/acp/clientreq"
	"github.com/acpgate/acpgate/internal/testutil"
)

// The session features of newer ACP revisions against the TypeScript SDK's
// agent: modes and config options, the agent's own session list,
// session/close, elicitation, usage_update and MCP servers from the
// caller. What is asserted is again what crossed the wire: what the SDK's
// agent reports it received, and how the gateway read what it sent.

// tsStderr collects the agent's stderr lines, where it logs each request.
type tsStderr struct {
	mu    sync.Mutex
	lines []string
}

func (e *tsStderr) add(line string) {
	e.mu.Lock()
	e.lines = append(e.lines, line)
	e.mu.Unlock()
}

func (e *tsStderr) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return strings.Join(e.lines, "\n")
}

func (e *tsStderr) has(part string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, l := range e.lines {
		if strings.Contains(l, part) {
			return true
		}
	}
	return false
}

func TestInteropTypeScriptSDKSessionFeatures(t *testing.T) {
	node, script := tsAgent(t)
	ctx, cancel := context.WithTimeout(context.Background(), tsTurnTimeout)
	defer cancel()

	t.Run("modes_and_config_options", func(t *testing.T) {
		s := tsOpen(t, node, script, nil)
		st := s.Settings()
		if st.CurrentMode != "ask" || len(st.Modes) != 2 || st.Modes[1].GetId() != "code" || st.Values()["model"] != "small" {
			t.Fatalf("the SDK agent's advertised settings read as %+v", st)
		}
		if err := s.SetMode(ctx, "code"); err != nil {
			t.Fatal(err)
		}
		if err := s.SetConfigOption(ctx, "model", "large"); err != nil {
			t.Fatal(err)
		}
		r, _ := tsPrompt(t, s, "settings", nil)
		tsWantOutcome(t, s, r, "mode:code model:large", "mode:code model:large")

		// Changes the agent makes itself reach the stream and the session.
		if err := s.SetMode(ctx, "ask"); err != nil {
			t.Fatal(err)
		}
		if err := s.SetConfigOption(ctx, "model", "small"); err != nil {
			t.Fatal(err)
		}
		r, events := tsPrompt(t, s, "switch", nil)
		tsWantOutcome(t, s, r, "", "")
		if mode, model := testutil.StreamedSettings(events); mode != "code" || model != "large" {
			t.Errorf("the turn's events carried mode %q and model %q, want code and large", mode, model)
		}
		if st := s.Settings(); st.CurrentMode != "code" || st.Values()["model"] != "large" {
			t.Errorf("after the agent's own changes the session has %q / %v", st.CurrentMode, st.Values())
		}
	})

	t.Run("session_list", func(t *testing.T) {
		s := tsOpen(t, node, script, nil)
		page, next, err := s.ListSessions(ctx, s.Cwd(), "")
		if err != nil {
			t.Fatal(err)
		}
		if len(page) != 1 || page[0].ID != s.ID() || page[0].Cwd != s.Cwd() || page[0].Title != "session in ask mode" || next != "" {
			t.Errorf("session/list answered %+v, next %q; want this session alone", page, next)
		}
		page, _, err = s.ListSessions(ctx, "/nowhere", "")
		if err != nil || len(page) != 0 {
			t.Errorf("session/list of another directory: %+v, %v", page, err)
		}
	})

	t.Run("cancel_request_for_an_abandoned_request", func(t *testing.T) {
		stderr := &tsStderr{}
		s := tsOpen(t, node, script, func(c *acp.Config) { c.Process.StderrLine = stderr.add })
		short, stop := context.WithTimeout(ctx, 300*time.Millisecond)
		defer stop()
		if _, _, err := s.ListSessions(short, "/hang", ""); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("session/list that is never answered: %v", err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for !stderr.has("session/list withdrawn") && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if !stderr.has("session/list withdrawn") {
			t.Errorf("the SDK agent's request was not withdrawn; its stderr:\n%s", stderr)
		}
		// The session goes on.
		r, _ := tsPrompt(t, s, "after", nil)
		tsWantOutcome(t, s, r, "echo:after", "echo:after")
	})

	t.Run("session_close", func(t *testing.T) {
		stderr := &tsStderr{}
		s := tsOpen(t, node, script, func(c *acp.Config) { c.Process.StderrLine = stderr.add })
		id := s.ID()
		s.End()
		if !stderr.has("session/close " + id) {
			t.Errorf("the SDK agent did not receive session/close for %s; its stderr:\n%s", id, stderr)
		}
	})

	t.Run("usage_update", func(t *testing.T) {
		s := tsOpen(t, node, script, nil)
		r, events := tsPrompt(t, s, "usage", nil)
		tsWantOutcome(t, s, r, "", "")
		var u *acpgatev1.Usage
		for _, e := range events {
			if e.GetUsage() != nil {
				u = e.GetUsage()
			}
		}
		if u.GetContextUsed() != 1200 || u.GetContextSize() != 200000 || u.GetCostAmount() != 0.25 || u.GetCostCurrency() != "USD" {
			t.Errorf("usage event %v", u)
		}
		if o := r.Outcome.GetUsage(); o.GetContextUsed() != 1200 || o.GetCostCurrency() != "USD" {
			t.Errorf("the outcome's usage %v, want the turn's usage_update", o)
		}
	})

	t.Run("elicitation_ask_accepted", func(t *testing.T) {
		s := tsOpen(t, node, script, func(c *acp.Config) {
			c.Elicitation = clientreq.ElicitationPolicy{Mode: clientreq.ElicitAsk, Timeout: tsTurnTimeout}
		})
		rec := tsNewEvents()
		stop := make(chan struct{})
		stopWatching := sync.OnceFunc(func() { close(stop) })
		defer stopWatching()
		resolved := make(chan error, 1)
		go func() {
			for {
				select {
				case e := <-rec.watch:
					q := e.GetElicitationRequested()
					if q == nil || q.GetDecision() != nil {
						continue
					}
					content, _ := structpb.NewStruct(map[string]any{"name": "Ada"})
					resolved <- s.ResolveElicitation(q.GetRequestId(), acpgatev1.ElicitationAction_ELICITATION_ACTION_ACCEPT, content)
					return
				case <-stop:
					resolved <- nil
					return
				}
			}
		}()
		r, _ := tsPrompt(t, s, "elicit", rec)
		stopWatching()
		if err := <-resolved; err != nil {
			t.Fatalf("resolving the elicitation: %v", err)
		}
		tsWantOutcome(t, s, r, "elicited:accept:Ada", "elicited:accept:Ada")
	})

	t.Run("elicitation_declined_by_policy", func(t *testing.T) {
		s := tsOpen(t, node, script, nil)
		r, _ := tsPrompt(t, s, "elicit", nil)
		tsWantOutcome(t, s, r, "elicited:decline", "elicited:decline")
	})

	t.Run("mcp_servers", func(t *testing.T) {
		s := tsOpenWith(t, node, script, func(c *acp.Config) {
			c.MCPServers = []acpsdk.McpServer{acp.MCPStdio("files", "/usr/bin/mcp-files", []string{"--ro"}, nil)}
		}, acp.OpenOptions{MCPServers: []acpsdk.McpServer{
			acp.MCPRemote("http", "docs", "https://mcp.example.com/docs", []acpsdk.HttpHeader{{Name: "Authorization", Value: "Bearer t"}}),
		}})
		r, _ := tsPrompt(t, s, "mcp", nil)
		want := "mcp:files/stdio//usr/bin/mcp-files,docs/http/https://mcp.example.com/docs+Authorization=Bearer t"
		tsWantOutcome(t, s, r, want, want)
	})

	t.Run("mcp_transport_not_advertised", func(t *testing.T) {
		cfg := acp.Config{Agent: "ts-sdk", Process: agentproc.Spec{Command: node, Args: []string{script}, Env: testutil.BaseEnv()},
			StopGrace: 2 * time.Second, Logger: slog.New(slog.DiscardHandler)}
		_, err := acp.Open(ctx, cfg, acp.OpenOptions{Cwd: t.TempDir(), MCPServers: []acpsdk.McpServer{
			acp.MCPRemote("sse", "events", "https://mcp.example.com/events", nil)}})
		var e *acp.Error
		if !errors.As(err, &e) || e.Proto.GetCapabilityNotSupported().GetPrimitive() != acp.PrimitiveMCPSSE {
			t.Errorf("opening with an SSE server on an agent without mcpCapabilities.sse: %v", err)
		}
	})
}
