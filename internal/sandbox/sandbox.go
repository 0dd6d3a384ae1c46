// Package sandbox confines an agent's file-system access with Landlock.
//
// Go's os/exec cannot run code in a child between fork and exec, and a
// Landlock domain applies to the thread that creates it and what it
// executes, so the confinement is applied by a small launcher: the gateway
// runs its own executable in a hidden mode (Command), which restricts
// itself and then executes the agent in its place. The agent keeps the
// launcher's pid, so the PID namespace it runs in, its parent-death signal
// and its exit status are those of the launcher.
//
// What the agent may reach (Rules): read and write the session's working
// directory and the configured rw paths; read (and execute) the system's
// program and library directories, a short list of /etc entries that
// programs need (TLS certificates, name resolution, users, time zone, the
// dynamic linker's cache), the directory of its own command, its own
// /proc/self, a few /dev nodes and the configured ro paths. Nothing else:
// not the home directory, not /tmp, not other sessions' directories, not
// another process's /proc entries. A symbolic link does not help: Landlock
// checks the file the path resolves to.
//
// Landlock also keeps a confined process from tracing, or reading the
// memory and environment (/proc/PID/mem, /proc/PID/environ) of, any
// process outside its own domain, whatever its uid and capabilities: an
// agent cannot read the gateway's environment nor another agent's.
package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Command is the hidden acpgate subcommand that runs the launcher.
const Command = "sandbox-exec"

// Policy is what one agent may reach besides the defaults.
type Policy struct {
	// RW are paths the agent may read and write, besides the session's
	// working directory.
	RW []string
	// RO are paths the agent may read, besides the system's.
	RO []string
	// Required refuses to run the agent unconfined: without Landlock in
	// the kernel the launcher exits instead of executing it.
	Required bool
}

// ABI returns the Landlock ABI version the kernel provides, or 0 and why
// it provides none.
func ABI() (int, error) {
	v, err := llsys.LandlockGetABIVersion()
	if err != nil {
		return 0, fmt.Errorf("the kernel enforces no Landlock: %w", err)
	}
	if v < 1 {
		return 0, errors.New("the kernel enforces no Landlock")
	}
	return v, nil
}

// Argv returns the program and arguments that run command with args
// confined by p, in the working directory dir: self (the acpgate
// executable) in its launcher mode. The command is looked up in PATH
// here, as exec.Command would, so that its directory can be allowed.
func Argv(self string, p Policy, dir, command string, args []string) (string, []string, error) {
	resolved, err := exec.LookPath(command)
	if err != nil {
		return "", nil, err
	}
	if resolved, err = filepath.Abs(resolved); err != nil {
		return "", nil, err
	}
	argv := []string{Command}
	if p.Required {
		argv = append(argv, "--required")
	}
	argv = append(argv, "--rw", dir)
	for _, d := range p.RW {
		argv = append(argv, "--rw", d)
	}
	for _, d := range p.RO {
		argv = append(argv, "--ro", d)
	}
	argv = append(argv, "--", resolved)
	return self, append(argv, args...), nil
}

// systemDirs are read, and executed from, by every agent.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt"}

// etcEntries are what programs commonly need of /etc; the rest of it
// (/etc/shadow, credentials of other software) stays out of reach.
var etcEntries = []string{
	"ssl", "ca-certificates", "ca-certificates.conf", "pki", "crypto-policies",
	"resolv.conf", "hosts", "host.conf", "nsswitch.conf", "gai.conf", "services", "protocols",
	"passwd", "group", "localtime", "timezone", "os-release", "mime.types",
	"ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives",
}

// procFiles are system-wide figures runtimes read (memory, processors).
var procFiles = []string{"/proc/meminfo", "/proc/cpuinfo", "/proc/stat", "/proc/loadavg", "/proc/uptime", "/proc/version"}

// Rules returns the Landlock rules of a process that executes command
// with read-write access to rw and read access to ro.
func Rules(rw, ro []string, command string) []landlock.Rule {
	var rules []landlock.Rule
	rwDirs, rwFiles := split(rw)
	rules = append(rules,
		landlock.RWDirs(rwDirs...).WithRefer().IgnoreIfMissing(),
		landlock.RWFiles(rwFiles...).IgnoreIfMissing(),
	)
	roPaths := slices.Concat(systemDirs, ro, []string{filepath.Dir(command)})
	if real, err := filepath.EvalSymlinks(command); err == nil {
		roPaths = append(roPaths, filepath.Dir(real))
	}
	for _, e := range etcEntries {
		roPaths = append(roPaths, filepath.Join("/etc", e))
	}
	roDirs, roFiles := split(roPaths)
	// /proc/self resolves now, to the launcher's own entry, which the
	// agent keeps since it keeps the pid.
	roDirs = append(roDirs, "/proc/self")
	roFiles = append(roFiles, procFiles...)
	rules = append(rules,
		landlock.RODirs(roDirs...).IgnoreIfMissing(),
		landlock.ROFiles(roFiles...).IgnoreIfMissing(),
		landlock.RWFiles("/dev/null", "/dev/zero", "/dev/full").IgnoreIfMissing(),
		landlock.ROFiles("/dev/urandom", "/dev/random").IgnoreIfMissing(),
	)
	return rules
}

// split sorts existing paths into directories and other files; a missing
// path is left out (a rule on it could not be made).
func split(paths []string) (dirs, files []string) {
	for _, p := range paths {
		fi, err := os.Stat(p)
		switch {
		case err != nil:
		case fi.IsDir():
			dirs = append(dirs, p)
		default:
			files = append(files, p)
		}
	}
	return dirs, files
}

// Main is the launcher: `acpgate sandbox-exec [--required] [--rw PATH]...
// [--ro PATH]... -- COMMAND ARGS...`. It confines itself and executes
// COMMAND with its own environment; it returns only on failure, with the
// exit status to use (126, or 127 when COMMAND cannot be found).
func Main(args []string, stderr io.Writer) int {
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "acpgate %s: %s\n", Command, fmt.Sprintf(format, a...))
		return code
	}
	var rw, ro []string
	required := false
	for len(args) > 0 && args[0] != "--" {
		switch args[0] {
		case "--required":
			required = true
			args = args[1:]
			continue
		case "--rw", "--ro":
			if len(args) < 2 {
				return fail(126, "%s wants a path", args[0])
			}
			if args[0] == "--rw" {
				rw = append(rw, args[1])
			} else {
				ro = append(ro, args[1])
			}
			args = args[2:]
		default:
			return fail(126, "unknown flag %q", args[0])
		}
	}
	if len(args) < 2 {
		return fail(126, "usage: acpgate %s [--required] [--rw PATH]... [--ro PATH]... -- COMMAND ARGS...", Command)
	}
	command, argv := args[1], args[1:]
	if _, err := os.Stat(command); err != nil {
		return fail(127, "%v", err)
	}
	if _, err := ABI(); err != nil {
		if required {
			return fail(126, "sandbox.required is set and %v", err)
		}
		fmt.Fprintf(stderr, "acpgate %s: warning: the agent runs unconfined: %v\n", Command, err)
	}
	if err := confineThisThread(Rules(rw, ro, command)); err != nil {
		return fail(126, "confining the agent: %v", err)
	}
	// From the confined thread: execve keeps its domain and ends the
	// others (which were never confined, and never run the agent).
	err := syscall.Exec(command, argv, os.Environ())
	return fail(126, "executing %s: %v", command, err)
}

// confineThisThread puts the calling goroutine's thread, locked to it for
// good, in a Landlock domain that allows rules: the strongest confinement
// this kernel's Landlock version can enforce (without one, none, which ABI
// reports). Network access stays open: agents call their model's API.
//
// Only this thread: Landlock's way of confining every thread of a Go
// process at once (before the kernel's TSYNC flag) signals each of them,
// which hangs a process that is PID 1 of its namespace, as the launcher
// is; and the thread that executes the agent is the only one that
// matters.
func confineThisThread(rules []landlock.Rule) error {
	runtime.LockOSThread()
	fd, flags, err := landlock.V5.BestEffort().NewRulesetFD(rules...)
	if err != nil {
		return err
	}
	if fd < 0 {
		return nil // no Landlock: nothing to enforce
	}
	defer syscall.Close(fd)
	// Landlock requires it of an unprivileged thread; it also means a
	// set-user-ID program the agent runs gains no privilege.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	if err := llsys.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("landlock_restrict_self: %w", err)
	}
	return nil
}
