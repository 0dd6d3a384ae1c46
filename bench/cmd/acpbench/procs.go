package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// gatewayProc is a running `acpgate serve`.
type gatewayProc struct {
	cmd      *exec.Cmd
	addr     string
	stateDir string // its store's directory
	logf     *os.File
	exited   chan struct{}
}

// startGateway runs `acpgate serve --config cfg --listen 127.0.0.1:0`, with
// extra flags after those (the profiling ones, say), and waits for it to say
// where it listens. Its stderr goes to logPath. stateDir is its own state
// directory, which its configuration names as state_dir; XDG_STATE_HOME
// points there too, so that nothing it keeps can land in a directory
// another gateway uses.
func startGateway(bin, cfg, logPath, stateDir string, extra ...string) (*gatewayProc, error) {
	args := append([]string{"serve", "--config", cfg, "--listen", "127.0.0.1:0", "--log-level", "warn"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+stateDir)
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	g := &gatewayProc{cmd: cmd, stateDir: stateDir, logf: logf, exited: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			if a, ok := strings.CutPrefix(line, "acpgate listening on "); ok {
				select {
				case addr <- a:
				default:
				}
			}
		}
		_, _ = io.Copy(logf, stderr)
	}()
	go func() {
		_ = cmd.Wait()
		close(g.exited)
	}()
	select {
	case g.addr = <-addr:
		return g, nil
	case <-g.exited:
		logf.Close()
		return nil, fmt.Errorf("acpgate serve exited at start-up (%v); see %s", cmd.ProcessState, logPath)
	case <-time.After(20 * time.Second):
		g.stop()
		return nil, fmt.Errorf("acpgate serve did not report its address within 20 s; see %s", logPath)
	}
}

func (g *gatewayProc) pid() int { return g.cmd.Process.Pid }

// stop sends SIGTERM and waits for a clean exit (SIGKILL after 30 s). It
// reports an exit that was not clean.
func (g *gatewayProc) stop() error {
	defer g.logf.Close()
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.exited:
	case <-time.After(30 * time.Second):
		_ = g.cmd.Process.Kill()
		<-g.exited
		return errors.New("acpgate did not stop within 30 s of SIGTERM")
	}
	if !g.cmd.ProcessState.Success() {
		return fmt.Errorf("acpgate exited with %v", g.cmd.ProcessState)
	}
	return nil
}

// memory is a process's resident set: now, and its peak.
type memory struct{ RSS, HWM int64 } // bytes

// readMemory reads VmRSS and VmHWM from /proc/PID/status.
func readMemory(pid int) (memory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memory{}, err
	}
	var m memory
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

// readCPU returns a process's own CPU time (without its children's): the
// sum of its threads' on-CPU nanoseconds from /proc/PID/task/*/schedstat.
// (Go rarely ends a thread, so little time is lost with exited threads.)
func readCPU(pid int) (time.Duration, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("no schedstat for process %d", pid)
	}
	var total int64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) > 0 {
			n, _ := strconv.ParseInt(f[0], 10, 64)
			total += n
		}
	}
	return time.Duration(total), nil
}

// readTreeCPU returns a process's CPU time with its waited-for children's
// (utime, stime, cutime, cstime of /proc/PID/stat; 10 ms resolution).
func readTreeCPU(pid int) (time.Duration, error) {
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

// readSysBusy returns the machine's busy CPU time, all CPUs together, from
// /proc/stat: user, nice, system, irq, softirq and steal (time the
// hypervisor gave to others is time the benchmark did not get).
func readSysBusy() (time.Duration, error) {
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

// selfCPU is this process's CPU time (user + system).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuMark is a reading of the client's and the gateway's CPU time.
type cpuMark struct{ client, gateway time.Duration }

func markCPU(gatewayPID int) cpuMark {
	m := cpuMark{client: selfCPU()}
	if gatewayPID > 0 {
		m.gateway, _ = readCPU(gatewayPID)
	}
	return m
}

// children lists a process's child pids.
func children(pid int) []int {
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

// sampleRSS samples a process's RSS every period, with the progress read
// reports, until the function it returns is called; that returns the
// samples.
func sampleRSS(pid int, period time.Duration, read func() int64) (stop func() []bpSample) {
	quit := make(chan struct{})
	done := make(chan []bpSample)
	go func() {
		var out []bpSample
		tick := time.NewTicker(period)
		defer tick.Stop()
		start := time.Now()
		for {
			select {
			case <-quit:
				done <- out
				return
			case <-tick.C:
			}
			if m, err := readMemory(pid); err == nil {
				out = append(out, bpSample{At: time.Since(start), Unix: time.Now().UnixNano(), RSS: m.RSS, Read: read()})
			}
		}
	}()
	return func() []bpSample {
		close(quit)
		return <-done
	}
}
