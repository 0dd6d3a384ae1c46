// Package proc reads what Linux's /proc says of processes and of the
// machine: a process's resident memory, its CPU time (alone, or with its
// children), its children, and the machine's busy CPU time. The harness
// measures the gateway, its clients and their agents as separate processes,
// and tells foreign load from its own, only through these readings; they
// are Linux-only, as the harness is.
package proc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Memory is a process's resident set: now, and its peak.
type Memory struct{ RSS, HWM int64 } // bytes

// ReadMemory reads VmRSS and VmHWM from /proc/PID/status.
func ReadMemory(pid int) (Memory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Memory{}, err
	}
	var m Memory
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			m.RSS = n << 10
		case "VmHWM":
			m.HWM = n << 10
		}
	}
	return m, nil
}

// readCPU returns a process's own CPU time (without its children's), in
// nanoseconds, from its CPU-time clock: the kernel's sum over its threads,
// those that have exited included, read in one system call.
//
// It is read in the middle of measurements (a gateway client marks the
// gateway's CPU when its turn has started), so it must be cheap: summing
// /proc/PID/task/*/schedstat instead took about 0.6 ms for a gateway's
// threads here, during which the turn's first chunk arrived and waited.
func readCPU(pid int) (time.Duration, error) {
	var ts unix.Timespec
	// clock_getcpuclockid(3): MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED).
	clock := int32(^pid<<3 | 2)
	if err := unix.ClockGettime(clock, &ts); err != nil {
		return 0, fmt.Errorf("the CPU time of process %d: %w", pid, err)
	}
	return time.Duration(ts.Nano()), nil
}

// ReadTreeCPU returns a process's CPU time with its waited-for children's
// (utime, stime, cutime, cstime of /proc/PID/stat; 10 ms resolution).
func ReadTreeCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 15 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	var ticks int64
	for _, i := range []int{11, 12, 13, 14} { // fields 14-17
		n, _ := strconv.ParseInt(f[i], 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// userHZ is the unit of /proc's CPU times: 100 on every Linux architecture
// Go supports.
const userHZ = 100

// ReadSysBusy returns the machine's busy CPU time, all CPUs together, from
// /proc/stat: user, nice, system, irq, softirq and steal (time the
// hypervisor gave to others is time the benchmark did not get).
func ReadSysBusy() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, errors.New("unexpected /proc/stat")
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		n, _ := strconv.ParseInt(f[i], 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// SelfCPU is this process's CPU time (user + system).
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// CPUMark is a reading of the client's and the gateway's CPU time.
type CPUMark struct{ Client, Gateway time.Duration }

// MarkCPU reads this process's CPU time and, when gatewayPID is not 0,
// that gateway's own (its agents excluded).
func MarkCPU(gatewayPID int) CPUMark {
	m := CPUMark{Client: SelfCPU()}
	if gatewayPID > 0 {
		m.Gateway, _ = readCPU(gatewayPID)
	}
	return m
}

// Children lists a process's child pids.
func Children(pid int) []int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// LiveTreeCPU is the CPU time of a process and of all its descendants,
// those still running and those it has reaped.
func LiveTreeCPU(pid int) time.Duration {
	t, _ := ReadTreeCPU(pid)
	for _, c := range Children(pid) {
		t += LiveTreeCPU(c)
	}
	return t
}
