package proc

import (
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// burn spends d of CPU on the calling goroutine's thread, counted by the
// thread's own CPU clock rather than by the wall clock: on a busy machine
// 100 ms of wall time can hold half as much CPU, and the test would read
// the machine's load instead of the clock under test. It fails t if that
// takes over ten seconds.
func burn(t *testing.T, d time.Duration) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	threadCPU := func() time.Duration {
		var ts unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ts.Nano())
	}
	start, deadline := threadCPU(), time.Now().Add(10*time.Second)
	for threadCPU()-start < d {
		if time.Now().After(deadline) {
			t.Fatalf("%s of CPU took over ten seconds", d)
		}
	}
}

func TestAProcessCPUTimeCountsItsOwnWorkAndNotItsChildrens(t *testing.T) {
	pid := os.Getpid()
	before, err := readCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	self0 := SelfCPU()
	burn(t, 100*time.Millisecond)
	// A child's work: a shell that counts for a while.
	if err := exec.Command("/bin/sh", "-c", "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done").Run(); err != nil {
		t.Fatal(err)
	}
	after, err := readCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	self := SelfCPU() - self0
	got := after - before
	if got < 80*time.Millisecond {
		t.Errorf("100 ms of work read as %s of CPU", got)
	}
	// getrusage(RUSAGE_SELF) counts the same threads, children excluded.
	if diff := got - self; diff < -20*time.Millisecond || diff > 20*time.Millisecond {
		t.Errorf("the CPU clock read %s where getrusage read %s: one of them counts something else", got, self)
	}
}

func TestTheCPUTimeOfNoProcessIsAnError(t *testing.T) {
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := readCPU(cmd.Process.Pid); err == nil {
		t.Errorf("read the CPU time of process %d, which has exited and been reaped", cmd.Process.Pid)
	}
}
