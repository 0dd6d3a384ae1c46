package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// ownPid is our pid as /proc numbers it. In a PID namespace of our own,
// os.Getpid() is 1 in every agent the gateway runs, so it cannot tell
// agents apart; /proc (the gateway's, not remounted) still can.
func ownPid() int {
	if self, err := os.Readlink("/proc/self"); err == nil {
		if n, err := strconv.Atoi(self); err == nil {
			return n
		}
	}
	return os.Getpid()
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
	self := strconv.Itoa(ownPid())
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
