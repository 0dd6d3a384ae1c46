package realagents

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/testutil"

	"github.com/acpgate/acpgate/bench/internal/fakegemini"
	"github.com/acpgate/acpgate/bench/internal/fakemodel"
)

// The agents are installed by scripts/install-agents.sh into
// interop/agents/node_modules; ACPGATE_REAL_AGENTS names that directory
// (make interop-real sets it). Unset, the tests skip: they take minutes, so
// the ordinary test run leaves them to interop-real. Set, a missing agent
// fails the test: CI must not pass by skipping.
const agentsEnv = "ACPGATE_REAL_AGENTS"

// turnBound bounds every call a test makes: an agent's cold start is a few
// seconds, a turn against the stand-in less than one.
const turnBound = 90 * time.Second

// agentBin is the installed agent program name.
func agentBin(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv(agentsEnv)
	if dir == "" {
		t.Skipf("%s not set: make interop-real installs the real agents and runs these tests", agentsEnv)
	}
	bin := filepath.Join(dir, ".bin", name)
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is not installed (%v): run scripts/install-agents.sh", name, err)
	}
	return bin
}

var (
	buildOnce sync.Once
	gateBin   string
	buildErr  error
)

// gateway builds the real acpgate binary once per test binary.
func gateway(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "acpgate-realagents-")
		if err != nil {
			buildErr = err
			return
		}
		gateBin, buildErr = testutil.Build(dir, "github.com/acpgate/acpgate/cmd/acpgate")
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return gateBin
}

// model starts the stand-in model APIs: the OpenAI and Anthropic ones,
// and Gemini's.
func model(t *testing.T) (*fakemodel.Server, string) {
	t.Helper()
	m := fakemodel.New(fakemodel.Options{})
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	return m, srv.URL
}

func gemini(t *testing.T) (*fakegemini.Server, string) {
	t.Helper()
	g := fakegemini.New(fakegemini.Options{Chunks: 3})
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return g, srv.URL
}

// served is a running `acpgate serve`.
type served struct {
	cmd    *exec.Cmd
	addr   string
	mu     sync.Mutex
	stderr strings.Builder
	exited chan error
}

func (s *served) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.String()
}

// serve writes cfg and starts the gateway on it, stopped (and reaped) at
// the end of the test.
func serve(t *testing.T, cfg string) (*served, acpgatev1.AgentGatewayClient) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "acpgate.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(gateway(t), "serve", "--config", path, "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+filepath.Join(dir, "state"))
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &served{cmd: cmd, exited: make(chan error, 1)}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.stderr.WriteString(line + "\n")
			s.mu.Unlock()
			if addr, ok := strings.CutPrefix(line, "acpgate listening on "); ok {
				ready <- addr
			}
		}
		_, _ = io.Copy(io.Discard, pipe)
		s.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-s.exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-s.exited
		}
		if t.Failed() {
			t.Logf("gateway log:\n%s", s.log())
		}
	})
	select {
	case s.addr = <-ready:
	case err := <-s.exited:
		s.exited <- err
		t.Fatalf("acpgate exited before listening: %v\n%s", err, s.log())
	case <-time.After(20 * time.Second):
		t.Fatalf("acpgate never listened:\n%s", s.log())
	}
	conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return s, acpgatev1.NewAgentGatewayClient(conn)
}

// turn is what a Prompt stream carried.
type turn struct {
	events []*acpgatev1.PromptEvent
	chunks []string
}

func (tr turn) last() *acpgatev1.PromptEvent { return tr.events[len(tr.events)-1] }

func (tr turn) String() string {
	var b strings.Builder
	for _, e := range tr.events {
		fmt.Fprintf(&b, "  %v\n", e)
	}
	return b.String()
}

// prompt runs one turn; onEvent (may be nil) sees every event as it comes,
// from the stream's goroutine, before the next is read.
func prompt(ctx context.Context, t *testing.T, c acpgatev1.AgentGatewayClient, sessionID, text string, onEvent func(*acpgatev1.PromptEvent)) turn {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, turnBound)
	defer cancel()
	// One event per chunk the agent sent: the tests check that it streams.
	stream, err := c.Prompt(ctx, &acpgatev1.PromptRequest{SessionId: sessionID, Text: text, ChunkDelivery: acpgatev1.ChunkDelivery_CHUNK_DELIVERY_EACH})
	if err != nil {
		t.Fatalf("Prompt %q: %v", text, err)
	}
	var tr turn
	for {
		e, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("Prompt %q: %v after\n%s", text, err, tr)
		}
		if e.GetHeartbeat() != nil {
			continue
		}
		tr.events = append(tr.events, e)
		if ch := e.GetAgentMessageChunk(); ch != nil {
			tr.chunks = append(tr.chunks, ch.GetText())
		}
		if onEvent != nil {
			onEvent(e)
		}
	}
	if len(tr.events) == 0 {
		t.Fatalf("Prompt %q: no events", text)
	}
	return tr
}

func fmtCounts(c fakegemini.Counts) string {
	return fmt.Sprintf("stream %d generate %d countTokens %d unknown %d", c.Stream, c.Generate, c.CountTokens, c.Unknown)
}
