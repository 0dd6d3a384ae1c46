package proc

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// burn spends about d of this goroutine's CPU.
func burn(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}

func TestAProcessCPUTimeCountsItsOwnWorkAndNotItsChildrens(t *testing.T) {
	pid := os.Getpid()
	before, err := readCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	self0 := SelfCPU()
	burn(100 * time.Millisecond)
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
