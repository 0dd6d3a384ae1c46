package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/acpgate/acpgate/internal/exitcode"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/testutil"
)

var (
	binsOnce              sync.Once
	binsErr               error
	acpgatePath, agentBin string
)

// binaries builds the real acpgate and test agent once per test run.
func binaries(t *testing.T) (string, string) {
	t.Helper()
	binsOnce.Do(func() {
		dir, err := os.MkdirTemp("", "acpgate-e2e")
		if err != nil {
			binsErr = err
			return
		}
		if acpgatePath, binsErr = testutil.Build(dir, "github.com/acpgate/acpgate/cmd/acpgate"); binsErr != nil {
			return
		}
		// Beside acpgate, as a release and the image ship it: agents start
		// through it.
		if _, binsErr = testutil.Build(dir, "github.com/acpgate/acpgate/cmd/acpgate-launcher"); binsErr != nil {
			return
		}
		agentBin, binsErr = testutil.Build(dir, "github.com/acpgate/acpgate/internal/testagent")
	})
	if binsErr != nil {
		t.Fatal(binsErr)
	}
	return acpgatePath, agentBin
}

// served is a running `acpgate serve` process.
type served struct {
	cmd    *exec.Cmd
	addr   string
	stderr *strings.Builder
	mu     *sync.Mutex
	exited chan error
}

func serve(t *testing.T, args ...string) *served {
	t.Helper()
	s, err := startServe(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// startServe starts `acpgate serve` with args and waits until it listens;
// the error says why it did not, with the gateway's log.
func startServe(t *testing.T, args ...string) (*served, error) {
	t.Helper()
	return startServeVia(t, nil, args...)
}

// startServeVia is startServe through the command prefix wrap (nil for
// none), which must execute the gateway in its place.
func startServeVia(t *testing.T, wrap func(gateway []string) []string, args ...string) (*served, error) {
	t.Helper()
	bin, _ := binaries(t)
	argv := append([]string{bin, "serve", "--listen", "127.0.0.1:0"}, args...)
	if wrap != nil {
		argv = wrap(argv)
	}
	return startServeCmd(t, exec.Command(argv[0], argv[1:]...))
}

// startServeCmd is startServe with the command that runs `acpgate serve`
// given (through a shell that sets a limit first, say).
func startServeCmd(t *testing.T, cmd *exec.Cmd) (*served, error) {
	t.Helper()
	// Each gateway gets a state directory of its own: a sqlite store is
	// used by one gateway at a time.
	cmd.Env = append(os.Environ(), "ACPGATE_E2E_AGENT="+agentBin, "XDG_STATE_HOME="+t.TempDir())
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &served{cmd: cmd, stderr: &strings.Builder{}, mu: &sync.Mutex{}, exited: make(chan error, 1)}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.stderr.WriteString(line + "\n")
			s.mu.Unlock()
			if addr, ok := strings.CutPrefix(line, "acpgate listening on "); ok {
				ready <- addr
			}
		}
		s.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
	})
	select {
	case s.addr = <-ready:
		return s, nil
	case err := <-s.exited:
		return nil, fmt.Errorf("acpgate exited before listening: %v\n%s", err, s.log())
	case <-time.After(20 * time.Second):
		return nil, fmt.Errorf("acpgate never listened:\n%s", s.log())
	}
}

func (s *served) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.String()
}

// announced is the rest of the gateway's stderr line that starts with
// prefix (an address it announces once it serves), waiting at most a few
// seconds for it.
func (s *served) announced(t *testing.T, prefix string) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		for line := range strings.SplitSeq(s.log(), "\n") {
			if rest, ok := strings.CutPrefix(line, prefix); ok {
				return rest
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway never announced %q:\n%s", prefix, s.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *served) client(t *testing.T) (acpgatev1.AgentGatewayClient, healthpb.HealthClient) {
	t.Helper()
	conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return acpgatev1.NewAgentGatewayClient(conn), healthpb.NewHealthClient(conn)
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "acpgate.yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const e2eConfig = `
shutdown_grace: 5s
agents:
  - name: test
    command: "${ACPGATE_E2E_AGENT}"
    args: [--unique-sessions]
`

func TestTheBinaryServesTheDemoAgentWithNoConfiguration(t *testing.T) {
	s := serve(t)
	bin, _ := binaries(t)
	out, err := exec.Command(bin, "prompt", "--addr", s.addr, "--agent", "demo", "hello").Output()
	if err != nil {
		t.Fatalf("prompt: %v", err)
	}
	if !strings.Contains(string(out), `You said: "hello"`) {
		t.Errorf("output %q", out)
	}
	cmd := exec.Command(bin, "prompt", "--addr", s.addr, "--agent", "demo", "please refuse")
	err = cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 6 {
		t.Errorf("a refusal exits 6: %v", err)
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-s.exited; err != nil {
		t.Errorf("acpgate did not exit 0 on SIGTERM: %v\n%s", err, s.log())
	}
}

func TestSIGTERMCancelsRunningTurnsDeliversTheirTerminalAndLeavesNoAgent(t *testing.T) {
	s := serve(t, "--config", writeConfig(t, e2eConfig))
	client, health := s.client(t)
	ctx := context.Background()
	stream, err := client.Prompt(ctx, &acpgatev1.PromptRequest{Agent: "test", Text: "grandchild\nhang"})
	if err != nil {
		t.Fatal(err)
	}
	var grandchild int
	for grandchild == 0 {
		e, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if text, ok := strings.CutPrefix(e.GetAgentMessageChunk().GetText(), "grandchild:"); ok {
			grandchild = hostPid(t, text)
		}
	}
	if hc, err := health.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || hc.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health %v %v", hc, err)
	}
	agents := childrenRunning(s.cmd.Process.Pid, agentBin)
	if len(agents) == 0 {
		t.Fatal("no agent process found while a turn runs")
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	if e := terminal(t, stream, 30*time.Second); !e.GetError().GetHarness().GetCancelled() {
		t.Errorf("terminal %v", e)
	}
	select {
	case err := <-s.exited:
		if err != nil {
			t.Errorf("exit: %v\n%s", err, s.log())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("acpgate did not exit")
	}
	for _, pid := range append(agents, grandchild) {
		if !goneWithin(pid, 5*time.Second) {
			t.Errorf("process %d outlived the gateway", pid)
		}
	}
}

// goneWithin waits up to d for pid to be gone: a process sent SIGKILL
// takes a moment to die, and the gateway does not wait for its
// grandchildren to finish dying before it exits.
func goneWithin(pid int, d time.Duration) bool {
	for deadline := time.Now().Add(d); alive(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

func TestAnInvalidConfigurationFailsAtStartNamingEveryProblem(t *testing.T) {
	bin, _ := binaries(t)
	path := writeConfig(t, "agents:\n  - name: Bad Name\n    comand: x\n")
	out, err := exec.Command(bin, "serve", "--config", path).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("exit %v: %s", err, out)
	}
	for _, want := range []string{`:3: unknown key "comand"`, "Bad Name"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// processesRunning lists the pids whose executable is path.
// childrenRunning lists the running children of parent that execute path.
// (Other tests run agents of their own at the same time.)
// peakAgents samples, every 5 ms until the returned function is called,
// how many agent processes the gateway with pid runs at once, and that
// function returns the most seen.
func peakAgents(pid int) (stop func() int) {
	var peak atomic.Int32
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if n := int32(len(childrenRunning(pid, agentBin))); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return func() int {
		close(done)
		<-sampled
		return int(peak.Load())
	}
}

func childrenRunning(parent int, path string) []int {
	var pids []int
	for _, pid := range processesRunning(path) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// The command name (field 2) is parenthesised and may hold spaces.
		fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(parent) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func processesRunning(path string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && exe == path && alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// alive reports whether pid runs (a zombie counts as gone: its reaping is
// its parent's business, and it holds no resources).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b))
	return len(fields) > 2 && fields[2] != "Z"
}

func TestSessionsCanBeOpenedPermittedAndClosedFromTheCommandLine(t *testing.T) {
	s := serve(t, "--config", writeConfig(t, `
shutdown_grace: 5s
agents:
  - name: ask
    command: "${ACPGATE_E2E_AGENT}"
    args: [--unique-sessions]
    permission_policy: ask
    permission_timeout: 30s
`))
	cli := func(args ...string) (code int, stdout, stderr string) {
		return runCLI(t, args[0], append([]string{"--addr", s.addr}, args[1:]...)...)
	}
	code, out, errOut := cli("open", "--agent", "ask")
	id := strings.TrimSpace(out)
	if code != exitcode.OK || id == "" {
		t.Fatalf("open: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	// A turn asks for permission; the command line answers it.
	client, _ := s.client(t)
	stream, err := client.Prompt(context.Background(), &acpgatev1.PromptRequest{SessionId: id, Text: "permission t1\nstop end_turn"})
	if err != nil {
		t.Fatal(err)
	}
	var answered string
	for {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatalf("the stream ended with %v before its terminal", err)
		}
		if p := ev.GetPermissionRequested(); p != nil && p.GetDecision() == nil {
			if code, out, errOut := cli("permit", id, p.GetRequestId(), "allow"); code != exitcode.OK || !strings.Contains(out, "answered: option allow") {
				t.Fatalf("permit: exit %d, stdout %q, stderr %q", code, out, errOut)
			}
		}
		if c := ev.GetAgentMessageChunk(); c != nil {
			answered += c.GetText()
		}
		if ev.GetOutcome() != nil || ev.GetError() != nil {
			break
		}
	}
	if answered != "permission:allow" {
		t.Errorf("the agent heard %q, want permission:allow", answered)
	}

	if code, out, errOut := cli("close", id); code != exitcode.OK || !strings.Contains(out, "closed") {
		t.Fatalf("close: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, _, errOut := cli("close", id); code == exitcode.OK || !strings.Contains(errOut, "NOT_FOUND") {
		t.Errorf("closing it again: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := cli("open", "--agent", "nope"); code == exitcode.OK || !strings.Contains(errOut, "NOT_FOUND") {
		t.Errorf("open on an unknown agent: exit %d, stderr %q", code, errOut)
	}
	if code, _, _ := cli("permit", id); code != exitcode.Usage {
		t.Errorf("permit without a request id: exit %d, want the usage error %d", code, exitcode.Usage)
	}
}

// runCLI runs the real binary's client command name with args and returns
// its exit code and output.
func runCLI(t *testing.T, name string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	bin, _ := binaries(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{name}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("acpgate %s: %v", name, err)
	}
	return code, out.String(), errOut.String()
}
