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
//
// The same launcher completes the agent's containment (see acp's process):
// started in new PID and mount namespaces (and a user namespace for an
// unprivileged gateway), it maps its own uid and gid into the user
// namespace (ContainFlags), mounts a fresh /proc that shows only the
// agent's PID namespace, gives up CAP_SYS_ADMIN, and only then confines
// itself (when asked) and executes the agent. One launcher does both, so an
// agent with the sandbox is also contained, and the Landlock rules name
// the fresh /proc.
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
	resolved, err := resolve(command)
	if err != nil {
		return "", nil, err
	}
	argv := []string{Command, "--landlock"}
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

// resolve looks command up in PATH as exec.Command would and makes it
// absolute: the launcher executes a path, and the sandbox allows its
// directory.
func resolve(command string) (string, error) {
	resolved, err := exec.LookPath(command)
	if err != nil {
		return "", err
	}
	return filepath.Abs(resolved)
}

// Contain returns the program and arguments that run command with args
// after the containment steps flags ask for (see ContainFlags): self in
// its launcher mode. When command already is a launcher run (an agent
// with the sandbox, see Argv: its arguments hold the "--" before the
// agent's command), the flags join its arguments: one launcher does both.
func Contain(self string, flags []string, command string, args []string) (string, []string, error) {
	if command == self && len(args) > 0 && args[0] == Command && slices.Contains(args, "--") {
		return self, slices.Concat(args[:1], flags, args[1:]), nil
	}
	resolved, err := resolve(command)
	if err != nil {
		return "", nil, err
	}
	return self, slices.Concat([]string{Command}, flags, []string{"--", resolved}, args), nil
}

// ContainFlags are the launcher's flags that complete the containment of
// an agent started in a new PID namespace: when ownProc (it is in a new
// mount namespace too), mount a fresh /proc; when mapIDs (it is also in a
// new user namespace, whose uid and gid maps are not written yet), first
// map uid and gid to themselves. Either way, the launcher then gives up
// CAP_SYS_ADMIN (see mountOwnProc).
//
// Why the launcher writes the maps rather than the gateway: the kernel
// lets the gateway write a child's maps only while the gateway is
// dumpable (a non-dumpable process's children have root-owned
// /proc/PID/uid_map until they execute), and the gateway stays
// non-dumpable so that no process of its uid can read its memory or
// environment. The launcher, freshly executed, is dumpable, and may map
// its own ids given CAP_SYS_ADMIN in its namespace, which it gets as an
// ambient capability (see acp's Containment).
func ContainFlags(ownProc, mapIDs bool, uid, gid int) []string {
	var flags []string
	if ownProc {
		flags = append(flags, "--proc")
	}
	if mapIDs {
		flags = append(flags, "--map-ids", fmt.Sprintf("%d:%d", uid, gid))
	}
	return flags
}

// ProbeArgs are the arguments of a launcher run that exits 0 at once: the
// program a containment probe executes through the launcher, so that the
// probe goes through every step a turn's agent does.
func ProbeArgs() []string { return []string{Command, probed} }

// probed is the launcher's argument for ProbeArgs.
const probed = "--probed"

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

// Main is the launcher: `acpgate sandbox-exec [--map-ids UID:GID] [--proc]
// [--landlock [--required] [--rw PATH]... [--ro PATH]...] -- COMMAND
// ARGS...`. It completes the containment (--map-ids, --proc; see
// ContainFlags), confines itself (--landlock) and executes COMMAND with
// its own environment; it returns only on failure, with the exit status
// to use (126, or 127 when COMMAND cannot be found).
func Main(args []string, stderr io.Writer) int {
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "acpgate %s: %s\n", Command, fmt.Sprintf(format, a...))
		return code
	}
	if slices.Equal(args, []string{probed}) {
		return 0
	}
	// Capabilities, no_new_privs and a Landlock domain belong to a thread:
	// every step runs on this one, which executes the agent.
	runtime.LockOSThread()
	var rw, ro []string
	var mapIDs string
	required, landlocked, proc := false, false, false
	for len(args) > 0 && args[0] != "--" {
		switch args[0] {
		case "--required", "--landlock", "--proc":
			required = required || args[0] == "--required"
			landlocked = landlocked || args[0] == "--landlock"
			proc = proc || args[0] == "--proc"
			args = args[1:]
			continue
		case "--rw", "--ro", "--map-ids":
			if len(args) < 2 {
				return fail(126, "%s wants a value", args[0])
			}
			switch args[0] {
			case "--rw":
				rw = append(rw, args[1])
			case "--ro":
				ro = append(ro, args[1])
			default:
				mapIDs = args[1]
			}
			args = args[2:]
		default:
			return fail(126, "unknown flag %q", args[0])
		}
	}
	if len(args) < 2 {
		return fail(126, "usage: acpgate %s [--map-ids UID:GID] [--proc] [--landlock [--required] [--rw PATH]... [--ro PATH]...] -- COMMAND ARGS...", Command)
	}
	command, argv := args[1], args[1:]
	if _, err := os.Stat(command); err != nil {
		return fail(127, "%v", err)
	}
	// The containment steps come first: the sandbox's rules name the
	// fresh /proc, and Landlock would refuse the mount.
	if mapIDs != "" {
		if err := mapOwnIDs(mapIDs); err != nil {
			return fail(126, "mapping the agent's uid and gid into its user namespace: %v", err)
		}
	}
	if proc {
		if err := mountOwnProc(); err != nil {
			return fail(126, "mounting the agent's own /proc: %v", err)
		}
	}
	if proc || mapIDs != "" {
		if err := dropSysAdmin(); err != nil {
			return fail(126, "giving up CAP_SYS_ADMIN: %v", err)
		}
	}
	if landlocked {
		if _, err := ABI(); err != nil {
			if required {
				return fail(126, "sandbox.required is set and %v", err)
			}
			fmt.Fprintf(stderr, "acpgate %s: warning: the agent runs unconfined: %v\n", Command, err)
		}
		if err := confineThisThread(Rules(rw, ro, command)); err != nil {
			return fail(126, "confining the agent: %v", err)
		}
	}
	// From the thread that dropped the privilege and, with --landlock, is
	// confined: execve keeps its credentials and domain and ends the
	// other threads (which never run the agent).
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
