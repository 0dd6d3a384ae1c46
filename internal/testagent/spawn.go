package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// spawn starts `sleep seconds` holding the agent's stdout open (the way a
// tool an agent runs inherits it), in a new session when setsid (so it has
// left the agent's process group), and reports its pid as the gateway sees
// it. It is never reaped by us: whether it outlives the agent is what the
// tests of the gateway's containment look at.
func spawn(seconds int, setsid bool) string {
	path, err := sleepPath()
	if err != nil {
		return "spawn-error:" + err.Error()
	}
	cmd := exec.Command(path, strconv.Itoa(seconds))
	cmd.Stdout = os.Stdout
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: setsid}
	if err := cmd.Start(); err != nil {
		return "spawn-error:" + err.Error()
	}
	go func() { _ = cmd.Wait() }() // reap it if it dies while we live
	return fmt.Sprintf("spawned:%d", hostPid(cmd.Process.Pid))
}

func sleepPath() (string, error) {
	const path = "/bin/sleep"
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	return exec.LookPath("sleep")
}

// hostPid translates the pid of a child of ours, as our own PID namespace
// numbers it, into the pid /proc numbers it by. The gateway may run the
// agent as PID 1 of a namespace of its own, where the child is pid 2 or so,
// while /proc (not remounted) is the gateway's: a test that looked up the
// namespace's number there would find some unrelated process. The child is
// the /proc entry whose parent is us and whose innermost NSpid is the
// number we know. Without a namespace, or when /proc says nothing, the
// number is the same in both and is returned as it is.
func hostPid(pid int) int {
	self, err := os.Readlink("/proc/self")
	if err != nil {
		return pid
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return pid
	}
	want := strconv.Itoa(pid)
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		ppid, nspid := procStatus(e.Name())
		if ppid == self && len(nspid) > 0 && nspid[len(nspid)-1] == want {
			n, _ := strconv.Atoi(e.Name())
			return n
		}
	}
	return pid
}

// procStatus reads the PPid and NSpid lines of /proc/<pid>/status.
func procStatus(pid string) (ppid string, nspid []string) {
	f, err := os.Open("/proc/" + pid + "/status")
	if err != nil {
		return "", nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, value, _ := strings.Cut(sc.Text(), ":")
		switch key {
		case "PPid":
			ppid = strings.TrimSpace(value)
		case "NSpid":
			nspid = strings.Fields(value)
		}
	}
	return ppid, nspid
}
