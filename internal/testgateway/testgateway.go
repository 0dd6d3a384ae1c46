// Package testgateway runs the real acpgate binary, serving the test agent,
// for end-to-end tests that live outside the product's module: the
// workflow-engine recipes under examples/workflows, whose tests kill and
// restart the gateway under a running workflow. A gateway restarted by
// Restart keeps its address and state directory, as a gateway restarted by
// its supervisor does, so a client that re-dials finds the same turns.
package testgateway

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/testutil"
)

// Bounds of a gateway's life in a test.
const (
	// readyTimeout bounds the wait for a started gateway to listen.
	readyTimeout = 20 * time.Second
	// exitTimeout bounds the wait for a killed gateway to be reaped.
	exitTimeout = 10 * time.Second
)

// AgentEnv names the environment variable that holds the test agent's
// path, for a configuration's `command: "${ACPGATE_E2E_AGENT}"`.
const AgentEnv = "ACPGATE_E2E_AGENT"

var bins struct {
	once           sync.Once
	err            error
	acpgate, agent string
}

// Binaries builds the real acpgate and the test agent once per test binary
// and returns their paths.
func Binaries(t testing.TB) (acpgate, agent string) {
	t.Helper()
	bins.once.Do(func() {
		dir, err := os.MkdirTemp("", "acpgate-testgateway")
		if err != nil {
			bins.err = err
			return
		}
		if bins.acpgate, bins.err = testutil.Build(dir, "github.com/acpgate/acpgate/cmd/acpgate"); bins.err != nil {
			return
		}
		bins.agent, bins.err = testutil.Build(dir, "github.com/acpgate/acpgate/internal/testagent")
	})
	if bins.err != nil {
		t.Fatal(bins.err)
	}
	return bins.acpgate, bins.agent
}

// Gateway is a running `acpgate serve`.
type Gateway struct {
	// Addr is the address it listens on (host:port), the same across
	// restarts.
	Addr string
	// Prompts is the file the test agent appends a line to for every
	// prompt it receives: PromptsSeen counts them.
	Prompts string

	config string
	log    *testutil.LockedBuffer
	cmd    *exec.Cmd
	exited chan error
}

// Start writes config (YAML; `${ACPGATE_E2E_AGENT}` names the test agent,
// `${ACPGATE_PROMPTS}` the file it counts prompts in) to a file, starts the
// gateway on a free port with it, and waits until it listens. The gateway
// is killed when the test ends.
func Start(t testing.TB, config string) *Gateway {
	t.Helper()
	Binaries(t)
	dir := t.TempDir()
	g := &Gateway{Prompts: filepath.Join(dir, "prompts"), config: filepath.Join(dir, "acpgate.yaml"), log: &testutil.LockedBuffer{}}
	if err := os.WriteFile(g.config, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	port, err := testutil.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	g.Addr = fmt.Sprintf("127.0.0.1:%d", port)
	g.start(t)
	t.Cleanup(func() { g.stop() })
	return g
}

func (g *Gateway) start(t testing.TB) {
	t.Helper()
	acpgate, agent := Binaries(t)
	g.cmd = exec.Command(acpgate, "serve", "--listen", g.Addr, "--config", g.config)
	g.cmd.Env = append(os.Environ(), AgentEnv+"="+agent, "ACPGATE_PROMPTS="+g.Prompts, "XDG_STATE_HOME="+filepath.Dir(g.config))
	g.cmd.Stderr = g.log
	// A restarted gateway's log follows the killed one's: only what this
	// process writes says that it listens.
	from := len(g.log.String())
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	g.exited = exited
	go func(cmd *exec.Cmd) { exited <- cmd.Wait() }(g.cmd)
	deadline := time.After(readyTimeout)
	for !strings.Contains(g.log.String()[from:], "acpgate listening on ") {
		select {
		case err := <-exited:
			t.Fatalf("acpgate exited before listening: %v\n%s", err, g.log.String())
		case <-deadline:
			t.Fatalf("acpgate did not listen within %s:\n%s", readyTimeout, g.log.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Kill stops the gateway with SIGKILL, as a crash or an OOM kill does: no
// turn is ended, nothing is flushed. It returns once the process is reaped.
func (g *Gateway) Kill(t testing.TB) {
	t.Helper()
	if err := g.stop(); err != nil {
		t.Fatal(err)
	}
}

func (g *Gateway) stop() error {
	if g.cmd == nil {
		return nil
	}
	_ = g.cmd.Process.Signal(syscall.SIGKILL)
	defer func() { g.cmd = nil }()
	select {
	case <-g.exited:
		return nil
	case <-time.After(exitTimeout):
		return fmt.Errorf("acpgate (pid %d) was not reaped within %s of SIGKILL", g.cmd.Process.Pid, exitTimeout)
	}
}

// Restart starts the gateway again on the same address with the same
// configuration and state, after Kill.
func (g *Gateway) Restart(t testing.TB) {
	t.Helper()
	if g.cmd != nil {
		t.Fatal("Restart of a gateway that runs: Kill it first")
	}
	g.start(t)
}

// Log is what the gateway wrote to stderr so far, for a failing test's
// message.
func (g *Gateway) Log() string { return g.log.String() }

// PromptsSeen is how many prompts the test agent received, across every
// agent process and gateway restart.
func (g *Gateway) PromptsSeen(t testing.TB) int {
	t.Helper()
	b, err := os.ReadFile(g.Prompts)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("prompt\n"))
}

// Client is a client of the gateway on a connection of its own, closed
// when the test ends. It dials lazily, so it outlives a restart.
func (g *Gateway) Client(t testing.TB) acpgatev1.AgentGatewayClient {
	t.Helper()
	conn, err := grpc.NewClient(g.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return acpgatev1.NewAgentGatewayClient(conn)
}
