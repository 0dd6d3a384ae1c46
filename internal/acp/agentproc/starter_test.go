package agentproc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/acpgate/acpgate/internal/testutil"
)

// ownNice is the nice value of the thread the caller runs on, which is the
// gateway's (the test process's) own.
func ownNice(t *testing.T) int {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	n, err := threadNice()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// threadsAt counts the test process's threads whose nice value is nice.
func threadsAt(t *testing.T, nice int) int {
	t.Helper()
	return testutil.ThreadNices(t, "self")[nice]
}

func TestAnAgentAndItsChildrenRunTheStartersIncrementBelowTheGateway(t *testing.T) {
	own := ownNice(t)
	if own+7 > MaxNice {
		t.Skipf("the test runs at nice %d, too low a priority to lower by 7", own)
	}
	s, err := NewStarter(7)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Nice() != own+7 {
		t.Errorf("the starter says its agents run at nice %d, want %d", s.Nice(), own+7)
	}
	// The agent reports its own nice value, then that of a child it starts.
	p, err := Start(Spec{Command: "/bin/sh", Args: []string{"-c", `cat /proc/$$/stat; sh -c 'cat /proc/$$/stat'`}, Dir: t.TempDir(), Starter: s})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(0)
	out, err := io.ReadAll(p.Stdout())
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		t.Fatalf("the agent wrote %q, want two stat lines", out)
	}
	for i, who := range []string{"the agent", "its child"} {
		if got := testutil.StatNice(t, lines[i]); got != own+7 {
			t.Errorf("%s runs at nice %d, want %d", who, got, own+7)
		}
	}
}

func TestAStarterLowersItsOwnThreadOnlyAndEndsItOnClose(t *testing.T) {
	own := ownNice(t)
	if own+3 > MaxNice {
		t.Skipf("the test runs at nice %d, too low a priority to lower by 3", own)
	}
	before := threadsAt(t, own+3)
	// Whether the process's main thread was at that priority before this
	// starter: see lingering.
	mainBefore := mainThreadNice(t) == own+3
	s, err := NewStarter(3)
	if err != nil {
		t.Fatal(err)
	}
	if got := threadsAt(t, own+3) - before; got != 1 {
		t.Errorf("%d more threads of the gateway run at nice %d with a starter, want its own thread only", got, own+3)
	}
	s.Close()
	// The thread ends after its goroutine returns: the runtime exits it.
	// Except the process's main thread, which the runtime parks for good
	// instead (exiting it would leave a zombie): when the starter ran
	// there, that thread stays at the lower priority but serves nothing,
	// and is not counted.
	lingering := func() int {
		n := threadsAt(t, own+3) - before
		if !mainBefore && mainThreadNice(t) == own+3 {
			n--
		}
		return n
	}
	deadline := time.Now().Add(10 * time.Second)
	for lingering() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := lingering(); got != 0 {
		t.Errorf("%d threads of the gateway still run at nice %d after the starter closed, want none: a closed starter's thread must end, not serve other goroutines at its priority", got, own+3)
	}
}

// mainThreadNice is the nice value of the test process's main thread.
func mainThreadNice(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/stat", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	return testutil.StatNice(t, string(b))
}

func TestAStarterClampsItsIncrementAtTheLowestPriority(t *testing.T) {
	s, err := NewStarter(MaxNice + 21)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Nice() != MaxNice {
		t.Errorf("nice %d, want %d", s.Nice(), MaxNice)
	}
}

func TestAStarterRefusesAnIncrementThatWouldPutAgentsAheadOfTheGateway(t *testing.T) {
	if _, err := NewStarter(-1); err == nil || !strings.Contains(err.Error(), "use 0 to 19") {
		t.Errorf("NewStarter(-1) = %v, want an error that says what to use", err)
	}
}

func TestAStartAfterTheStarterClosedFailsAndSaysWhy(t *testing.T) {
	s, err := NewStarter(1)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s.Close() // a second Close is harmless
	_, err = Start(Spec{Command: "/bin/true", Dir: t.TempDir(), Starter: s})
	if !errors.Is(err, errStarterClosed) {
		t.Errorf("a start after Close: %v, want %v", err, errStarterClosed)
	}
}

// BenchmarkStartingAProcess starts and reaps /bin/true directly and
// through a Starter, at the gateway's priority and 5 below it: what the
// Starter's hand-off to its thread adds to every agent's start, which a
// cold turn waits for.
func BenchmarkStartingAProcess(b *testing.B) {
	start := func(b *testing.B, run func(*exec.Cmd) error) {
		for b.Loop() {
			cmd := exec.Command("/bin/true")
			if err := run(cmd); err != nil {
				b.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("direct", func(b *testing.B) { start(b, (*exec.Cmd).Start) })
	for _, increment := range []int{0, 5} {
		b.Run(fmt.Sprintf("starter-nice+%d", increment), func(b *testing.B) {
			s, err := NewStarter(increment)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			start(b, s.start)
		})
	}
}
