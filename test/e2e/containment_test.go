package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// containmentBound bounds every wait of these tests: the kernel acts at
// once, so only something left behind takes this long.
const containmentBound = 10 * time.Second

func TestAnAgentThatExitsEndsTheTurnWhateverItsGrandchildrenHoldOpen(t *testing.T) {
	s := serve(t, "--config", writeConfig(t, e2eConfig))
	client, _ := s.client(t)
	stream, err := client.Prompt(bounded(t), &acpgatev1.PromptRequest{Agent: "test", Text: "spawn 300\nchunk last words\nsleep 1000\nexit 3", ChunkDelivery: acpgatev1.ChunkDelivery_CHUNK_DELIVERY_EACH})
	if err != nil {
		t.Fatal(err)
	}
	var grandchild int
	var said []string
	var terminal *acpgatev1.PromptEvent
	for terminal == nil {
		e, err := stream.Recv()
		if err != nil {
			t.Fatalf("the stream ended with %v before its terminal (a grandchild holding the agent's stdout keeps the turn open)", err)
		}
		text := e.GetAgentMessageChunk().GetText()
		if pid, ok := strings.CutPrefix(text, "spawned:"); ok {
			grandchild = leftover(t, pid)
		} else if text != "" {
			said = append(said, text)
		}
		if e.GetOutcome() != nil || e.GetError() != nil {
			terminal = e
		}
	}
	tr := terminal.GetError().GetTransport()
	if tr.GetReason() != acpgatev1.TransportReason_TRANSPORT_REASON_STREAM_ENDED || tr.ExitCode == nil || tr.GetExitCode() != 3 {
		t.Errorf("terminal %v, want a transport STREAM_ENDED failure with exit code 3", terminal)
	}
	if len(said) != 1 || said[0] != "last words" {
		t.Errorf("the agent's last output before it exited: %q", said)
	}
	if grandchild == 0 {
		t.Fatal("the agent reported no grandchild")
	}
	if !gone(grandchild) {
		t.Errorf("the grandchild %d outlived the agent", grandchild)
	}
}

func TestASetsidGrandchildIsGoneAfterItsSessionCloses(t *testing.T) {
	s := serve(t, "--config", writeConfig(t, e2eConfig))
	client, sess, grandchild := sessionWithGrandchild(t, s)
	if _, err := client.CloseSession(bounded(t), &acpgatev1.CloseSessionRequest{SessionId: sess.GetId()}); err != nil {
		t.Fatal(err)
	}
	if !gone(grandchild) {
		t.Errorf("the setsid grandchild %d outlived its session", grandchild)
	}
}

func TestAKilledGatewayLeavesNoDescendantOfItsAgentsAndItsTempDirsGoAtTheNextStart(t *testing.T) {
	// The gateway's temporary directories go where this test can see them.
	t.Setenv("TMPDIR", t.TempDir())
	s := serve(t, "--config", writeConfig(t, e2eConfig))
	_, sess, grandchild := sessionWithGrandchild(t, s)
	// --unique-sessions ids are sess-<agent pid>-<n>.
	agent := leftover(t, strings.Split(sess.GetId(), "-")[1])
	if _, err := os.Stat(sess.GetCwd()); err != nil {
		t.Fatalf("the session's directory: %v", err)
	}

	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.exited:
	case <-time.After(containmentBound):
		t.Fatal("acpgate did not die of SIGKILL")
	}
	for _, pid := range []int{agent, grandchild} {
		if !gone(pid) {
			t.Errorf("process %d outlived the gateway killed with SIGKILL", pid)
		}
	}

	again := serve(t, "--config", writeConfig(t, e2eConfig))
	if _, err := os.Stat(sess.GetCwd()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the killed gateway's session directory %s is still there after the next start (%v)\n%s", sess.GetCwd(), err, again.log())
	}
}

// bounded is a context that ends after containmentBound, or with the test.
func bounded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), containmentBound)
	t.Cleanup(cancel)
	return ctx
}

// sessionWithGrandchild opens a session and runs a turn on it that leaves
// a setsid grandchild of the agent behind, holding the agent's stdout; it
// returns the client, the session and the grandchild's pid.
func sessionWithGrandchild(t *testing.T, s *served) (acpgatev1.AgentGatewayClient, *acpgatev1.Session, int) {
	t.Helper()
	client, _ := s.client(t)
	ctx := bounded(t)
	sess, err := client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "test"})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := client.Prompt(ctx, &acpgatev1.PromptRequest{SessionId: sess.GetId(), Text: "spawn --setsid 300\nstop end_turn"})
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	for {
		e, err := stream.Recv()
		if err != nil {
			t.Fatalf("the stream ended with %v before its terminal", err)
		}
		if text, ok := strings.CutPrefix(e.GetAgentMessageChunk().GetText(), "spawned:"); ok {
			pid = leftover(t, text)
		}
		if e.GetOutcome() != nil {
			break
		}
		if e.GetError() != nil {
			t.Fatalf("terminal %v", e)
		}
	}
	if pid == 0 {
		t.Fatal("the agent reported no grandchild")
	}
	return client, sess, pid
}

// leftover parses a pid the test expects to be gone by its end, and makes
// sure it is: a process that escaped the gateway must not outlive the test
// either. It is killed only while it is still the process the test saw
// start, so a recycled pid is left alone.
func leftover(t *testing.T, text string) int {
	t.Helper()
	pid := hostPid(t, text)
	if pid <= 1 {
		t.Fatalf("pid %q", text)
	}
	started := startTime(pid)
	if started == "" {
		t.Fatalf("process %d is not running", pid)
	}
	t.Cleanup(func() {
		if alive(pid) && startTime(pid) == started {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return pid
}

// startTime is the start time /proc/<pid>/stat gives, which tells a process
// from a later one given the same pid; "" when there is no such process.
func startTime(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// After the command's closing parenthesis, starttime is the 20th field.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// gone waits, up to containmentBound, for pid to stop running.
func gone(pid int) bool {
	deadline := time.Now().Add(containmentBound)
	for alive(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// hostPid is the pid, as this test's /proc numbers it, of a process the
// test agent named (see its pidRef): a number as it is, or, from an agent
// that has a /proc of its own, "<pid>@<PID namespace inode>": the process
// of that namespace whose innermost NSpid is pid. It fails the test when
// there is no such process.
func hostPid(t *testing.T, ref string) int {
	t.Helper()
	inner, inode, qualified := strings.Cut(ref, "@")
	if !qualified {
		pid, err := strconv.Atoi(ref)
		if err != nil {
			t.Fatalf("pid %q", ref)
		}
		return pid
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid)); err != nil || ns != "pid:["+inode+"]" {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "NSpid:" && f[len(f)-1] == inner {
				return pid
			}
		}
	}
	t.Fatalf("no process is %s of PID namespace %s", inner, inode)
	return 0
}

// nobody is the uid and gid an unprivileged gateway runs as.
const nobody = 65534

// gatewaySecret is in the environment of the gateways these tests start,
// where no agent may find it.
const gatewaySecret = "ACPGATE_TEST_GATEWAY_SECRET=gateway-secret-4d1f"

// setGatewaySecret puts gatewaySecret in the environment of the gateways
// the test starts.
func setGatewaySecret(t *testing.T) {
	name, value, _ := strings.Cut(gatewaySecret, "=")
	t.Setenv(name, value)
}

// serveAsNobody starts `acpgate serve` with config as the unprivileged
// user nobody, through the command prefix wrap (which ends with the
// command that runs what follows: see unprivileged). Everything the
// gateway needs is opened to it: the binaries' directory (a 0700 temporary
// directory), a configuration it can read and a state directory it owns.
func serveAsNobody(t *testing.T, config string, wrap func(gateway []string) []string) *served {
	t.Helper()
	bin, _ := binaries(t)
	if err := os.Chmod(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "acpgate-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	state, cfg := filepath.Join(dir, "state"), filepath.Join(dir, "acpgate.yaml")
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "tmp")
	for _, d := range []string{state, tmp} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	// env, not cmd.Env: startServeCmd sets its own state directory, which
	// nobody could not write. The sessions' directories go in tmp, away
	// from those of gateways run as root (which a gateway that is root in
	// a user namespace of its own would take for its own, and refuse).
	argv := wrap([]string{"env", "XDG_STATE_HOME=" + state, "TMPDIR=" + tmp, bin, "serve", "--listen", "127.0.0.1:0", "--config", cfg})
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = "/"
	s, err := startServeCmd(t, cmd)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// unprivileged runs gateway as nobody, with no capability: setpriv
// executes it in its place, so the pid the test holds is the gateway's.
func unprivileged(gateway []string) []string {
	return slices.Concat([]string{"setpriv", fmt.Sprintf("--reuid=%d", nobody), fmt.Sprintf("--regid=%d", nobody), "--clear-groups", "--"}, gateway)
}

// procTurn runs a turn of agent "test" that reports what it sees in
// /proc (see the test agent's procs), and returns that report.
func procTurn(t *testing.T, s *served) string {
	t.Helper()
	secret, _, _ := strings.Cut(gatewaySecret, "=")
	said := agentSays(t, s, "procs "+secret)
	if len(said) != 1 {
		t.Fatalf("the agent said %q, want its procs report", said)
	}
	return strings.TrimPrefix(said[0], "procs:")
}

// agentSays runs script, one directive a line, as a one-shot turn of agent
// "test", and returns the text of each chunk the agent sent (asked for
// one event per chunk: each is one directive's report).
func agentSays(t *testing.T, s *served, script ...string) []string {
	t.Helper()
	return agentNamedSays(t, s, "test", script...)
}

// agentNamedSays is agentSays for the agent named agent.
func agentNamedSays(t *testing.T, s *served, agent string, script ...string) []string {
	t.Helper()
	client, _ := s.client(t)
	stream, err := client.Prompt(bounded(t), &acpgatev1.PromptRequest{Agent: agent, Text: strings.Join(script, "\n") + "\nstop end_turn", ChunkDelivery: acpgatev1.ChunkDelivery_CHUNK_DELIVERY_EACH})
	if err != nil {
		t.Fatal(err)
	}
	var said []string
	for {
		e, err := stream.Recv()
		if err != nil {
			t.Fatalf("the stream ended with %v before its terminal\n%s", err, s.log())
		}
		if text := e.GetAgentMessageChunk().GetText(); text != "" {
			said = append(said, text)
		}
		if e.GetOutcome() != nil {
			return said
		}
		if e.GetError() != nil {
			t.Fatalf("terminal %v\n%s", e, s.log())
		}
	}
}

// ownProcOnly is what procTurn returns from an agent that sees its own
// process only (it has started none), and no environment holding the
// gateway's secret.
const ownProcOnly = "1;environ:none"

func TestAnUnprivilegedGatewayRunsItsAgentsInUserPIDAndMountNamespacesAndSaysSo(t *testing.T) {
	setGatewaySecret(t)
	s := serveAsNobody(t, e2eConfig, unprivileged)
	if got := procTurn(t, s); got != ownProcOnly {
		t.Errorf("the agent of a gateway run as nobody sees procs:%s, want procs:%s: its own process only, and no environment holding the gateway's secret\n%s", got, ownProcOnly, s.log())
	}
	if log := s.log(); !strings.Contains(log, `msg="agent containment" kind="user and PID namespace" own_proc=true`) {
		t.Errorf("the start-up log does not say agents run in a user and PID namespace with their own /proc:\n%s", log)
	}
}

func TestAnUnprivilegedGatewayRefusedWhatItAsksRunsTurnsUnderTheNextKindAndSaysWhyAtStart(t *testing.T) {
	cases := []struct {
		name string
		// wrap runs the gateway where the kernel refuses something.
		wrap func(gateway []string) []string
		// log is what the start-up log must say: the kind in force and
		// why the stronger ones were refused.
		log []string
	}{{
		// Inside a container /proc has entries masked by mounts, and the
		// kernel then refuses a user namespace its own /proc (what it
		// would show is more than its creator sees), but not the
		// namespaces. Such a mount, in a mount namespace of the
		// gateway's own, refuses it here without touching the machine's.
		name: "a masked /proc",
		wrap: func(gateway []string) []string {
			return slices.Concat([]string{"unshare", "--mount", "--", "sh", "-c", `mount --bind /dev/null /proc/timer_list && exec "$@"`, "sh"}, unprivileged(gateway))
		},
		log: []string{
			`kind="user and PID namespace" own_proc=false`,
			"user and PID namespace with its own /proc: the launcher failed (exit 126): acpgate sandbox-exec: mounting the agent's own /proc: operation not permitted",
		},
	}, {
		// A user namespace of the gateway's own, as nobody, whose limit
		// of nested user namespaces is 0, where the gateway runs without
		// any capability: the machine's own limit stays as it is.
		name: "no user namespaces",
		wrap: func(gateway []string) []string {
			return unprivileged(slices.Concat([]string{"unshare", "--user", "--map-root-user", "--", "sh", "-c",
				`echo 0 >/proc/sys/user/max_user_namespaces && exec setpriv --bounding-set=-all --inh-caps=-all -- "$@"`, "sh"}, gateway))
		},
		log: []string{`agent containment is the weaker process-group kind`, `kind="process group"`, "no space left on device"},
	}}
	setGatewaySecret(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := serveAsNobody(t, e2eConfig, c.wrap)
			for range 2 {
				// The agent sees the host's processes, but the gateway,
				// non-dumpable, keeps its environment from them.
				if got := procTurn(t, s); !strings.HasSuffix(got, ";environ:none") {
					t.Errorf("the agent sees procs:%s, want no environment holding the gateway's secret\n%s", got, s.log())
				}
			}
			log := s.log()
			for _, want := range c.log {
				if !strings.Contains(log, want) {
					t.Errorf("the start-up log does not say %q:\n%s", want, log)
				}
			}
		})
	}
}

// rootAndNobody are a gateway run as root and one run as nobody.
var rootAndNobody = []struct {
	name  string
	serve func(t *testing.T) *served
}{
	{"root gateway", func(t *testing.T) *served { return serve(t, "--config", writeConfig(t, e2eConfig)) }},
	{"nobody gateway", func(t *testing.T) *served { return serveAsNobody(t, e2eConfig, unprivileged) }},
}

func TestAnAgentCannotUnmountItsOwnProcNeitherDirectlyNorFromANestedUserNamespace(t *testing.T) {
	for _, c := range rootAndNobody {
		t.Run(c.name, func(t *testing.T) {
			s := c.serve(t)
			said := agentSays(t, s, "unmountproc")
			if len(said) != 1 {
				t.Fatalf("the agent said %q, want its unmountproc report", said)
			}
			t.Logf("the agent reported %q", said[0])
			direct, nested, ok := strings.Cut(strings.TrimPrefix(said[0], "unmountproc:direct:"), ";nested:")
			if !ok || !strings.HasPrefix(direct, "refused: ") || !strings.HasPrefix(nested, "refused: ") {
				t.Errorf("the agent reported %q, want its own /proc that it cannot unmount, directly or from a nested user namespace", said[0])
			}
			if got := procTurn(t, s); got != ownProcOnly {
				t.Errorf("after that, an agent sees procs:%s, want procs:%s", got, ownProcOnly)
			}
		})
	}
}

func TestAnAgentListsOnlyItsOwnProcessesAndFindsNoGatewayEnvironment(t *testing.T) {
	setGatewaySecret(t)
	for _, c := range rootAndNobody {
		t.Run(c.name, func(t *testing.T) {
			s := c.serve(t)
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", s.cmd.Process.Pid)); err != nil || !strings.Contains(string(b), gatewaySecret) {
				t.Fatalf("the gateway's environment does not hold the secret (%v)", err)
			}
			if got := procTurn(t, s); got != ownProcOnly {
				t.Errorf("the agent sees procs:%s, want procs:%s: its own process only, and no environment holding the gateway's secret", got, ownProcOnly)
			}
		})
	}
}
