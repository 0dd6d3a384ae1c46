package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ownPid is our pid as a test can find it on its side: see pidRef.
func ownPid() string { return pidRef(os.Getpid()) }

// pidRef names a process of ours (ourselves or a child), given its pid as
// our own PID namespace numbers it, so that a test outside can find it.
//
// The gateway may run the agent as PID 1 of a namespace of its own, where
// the child is pid 2 or so. When /proc is the gateway's (not remounted),
// the reference is the pid /proc numbers the process by: a test that
// looked up the namespace's number there would find some unrelated
// process. When /proc is our namespace's own (the gateway mounted a fresh
// one), nothing here knows the outer numbers, so the reference is
// "<pid>@<inode of our PID namespace>", which a test translates with the
// NSpid lines of its own /proc. Without a namespace the number is the
// same in both and is returned as it is.
func pidRef(pid int) string {
	self, err := os.Readlink("/proc/self")
	if os.Getpid() == 1 && err == nil && self == "1" {
		ns, err := os.Readlink("/proc/self/ns/pid") // "pid:[INODE]"
		if inode, ok := strings.CutPrefix(ns, "pid:["); err == nil && ok {
			return fmt.Sprintf("%d@%s", pid, strings.TrimSuffix(inode, "]"))
		}
	}
	return strconv.Itoa(hostPid(self, pid))
}

// hostPid translates the pid of a process of ours, as our own PID
// namespace numbers it, into the pid /proc numbers it by, given ours there
// (self): the /proc entry that is us or whose parent is us, and whose
// innermost NSpid is the number we know.
func hostPid(self string, pid int) int {
	if pid == os.Getpid() {
		if n, err := strconv.Atoi(self); err == nil {
			return n
		}
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

// procScan describes what /proc shows us: "procs:<pid>,<pid>...", every
// process listed there (numbers as /proc has them, in its order), then
// ";environ:" and, of the processes whose environment we can read, those
// whose environment holds word, or "none".
func procScan(word string) string {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return "procs-error:" + err.Error()
	}
	var pids, holders []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		pids = append(pids, e.Name())
		if b, err := os.ReadFile("/proc/" + e.Name() + "/environ"); err == nil && strings.Contains(string(b), word) {
			holders = append(holders, e.Name())
		}
	}
	if len(holders) == 0 {
		holders = []string{"none"}
	}
	return "procs:" + strings.Join(pids, ",") + ";environ:" + strings.Join(holders, ",")
}

// unmountInNamespace is the argument that makes the test agent, run by
// unmountProc in nested user and mount namespaces, try to unmount /proc
// there and print what happened.
const unmountInNamespace = "--unmount-proc-in-namespace"

// unmountProc tries to uncover what lies beneath our /proc, the way an
// agent that wanted the gateway's processes back would: unmount it here,
// and unmount it in nested user and mount namespaces of our own, where we
// are root. It says "unmountproc:direct:<what happened>;nested:<what
// happened>", each "refused: <error>" or "unmounted" (or, for nested,
// "not started: <error>" when the namespaces were not made). It tries only when
// /proc is our PID namespace's own, so that it never unmounts the /proc of
// the machine it runs on ("unmountproc:skipped: ..." otherwise).
func unmountProc() string {
	if self, err := os.Readlink("/proc/self"); os.Getpid() != 1 || err != nil || self != "1" {
		return "unmountproc:skipped: /proc is not this agent's own"
	}
	direct := "unmounted"
	if err := unix.Unmount("/proc", unix.MNT_DETACH); err != nil {
		direct = "refused: " + err.Error()
	}
	self, err := os.Executable()
	if err != nil {
		return "unmountproc-error:" + err.Error()
	}
	cmd := exec.Command(self, unmountInNamespace)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	out, err := cmd.CombinedOutput()
	nested := strings.TrimSpace(string(out))
	if err != nil && nested == "" {
		nested = "not started: " + err.Error()
	}
	return "unmountproc:direct:" + direct + ";nested:" + nested
}

// unmountHere is the nested side of unmountProc.
func unmountHere() {
	if err := unix.Unmount("/proc", unix.MNT_DETACH); err != nil {
		fmt.Println("refused: " + err.Error())
		return
	}
	fmt.Println("unmounted")
}
