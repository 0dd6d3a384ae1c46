package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// denySetpriorityEnv, in this test binary's environment, makes it the
// wrapper denyingSetpriority names instead of running tests (see
// TestMain).
const denySetpriorityEnv = "ACPGATE_E2E_DENY_SETPRIORITY"

// denyingSetpriority returns the command prefix that runs what follows
// with setpriority(2) failing with EPERM, as a seccomp profile that denies
// it would (a container runtime's, say). It is the one way to make the
// kernel refuse a thread a lower priority: raising one's own nice value
// needs no privilege, so no user, capability or limit refuses it.
func denyingSetpriority(t *testing.T) func(cmd []string) []string {
	t.Helper()
	if auditArch() == 0 {
		t.Skipf("no seccomp filter written for %s", runtime.GOARCH)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return func(cmd []string) []string {
		return slices.Concat([]string{"env", denySetpriorityEnv + "=1", self}, cmd)
	}
}

// auditArch is the seccomp architecture of this binary's system calls, 0
// for one the filter below is not written for.
func auditArch() uint32 {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64
	}
	return 0
}

// execDenyingSetpriority is this binary as that wrapper: it installs a
// seccomp filter that fails setpriority with EPERM and executes its
// arguments in its place, which keep the filter, as does every process
// they start. The filter is seven instructions written out here, where a
// library would bring a policy language for one system call.
func execDenyingSetpriority() {
	fail := func(err error) {
		fmt.Fprintf(os.Stderr, "denying setpriority: %v\n", err)
		os.Exit(2)
	}
	if len(os.Args) < 2 {
		fail(fmt.Errorf("usage: %s=1 %s COMMAND [ARG...]", denySetpriorityEnv, os.Args[0]))
	}
	path, err := exec.LookPath(os.Args[1])
	if err != nil {
		fail(err)
	}
	// The filter holds for the thread that installs it, and the program
	// executed from that thread.
	runtime.LockOSThread()
	filter := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 4}, // seccomp_data.arch
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: auditArch(), Jt: 1},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_KILL_PROCESS},
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // seccomp_data.nr
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: unix.SYS_SETPRIORITY, Jf: 1},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	// An unprivileged process may install a filter only once it can gain
	// no privilege by executing a program.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fail(err)
	}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&prog)), 0, 0); err != nil {
		fail(err)
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return kv == denySetpriorityEnv+"=1" })
	fail(syscall.Exec(path, os.Args[1:], env))
}
