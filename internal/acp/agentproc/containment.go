package agentproc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/acpgate/acpgate/internal/sandbox"
)

// Containment is how an agent's whole process tree (the agent and every
// descendant) is held, so that none of it outlives the agent, its session
// or the gateway. See Process for why a PID namespace is preferred.
type Containment int

const (
	// ContainProcessGroup runs the agent as the leader of a process group
	// of its own. It is the weaker kind, and the zero value: a descendant
	// that calls setsid() or setpgid() leaves the group and escapes every
	// signal sent to it, and only the agent itself dies with the gateway.
	ContainProcessGroup Containment = iota
	// ContainPIDNamespace runs the agent as PID 1 of a PID namespace of
	// its own: when it exits, or is killed, the kernel kills every
	// process in the namespace, which no descendant can leave. It needs
	// CAP_SYS_ADMIN (a gateway running as root).
	ContainPIDNamespace
	// ContainUserPIDNamespace is ContainPIDNamespace inside a user
	// namespace of its own, which an unprivileged gateway may create where
	// the kernel allows unprivileged user namespaces. The gateway's uid and
	// gid are mapped to themselves, so the agent keeps its identity (it is
	// not root in there and gets no capabilities from it); supplementary
	// groups show as the overflow group, and set-user-ID programs run
	// without their privilege.
	ContainUserPIDNamespace
)

func (c Containment) String() string {
	switch c {
	case ContainProcessGroup:
		return "process group"
	case ContainPIDNamespace:
		return "PID namespace"
	case ContainUserPIDNamespace:
		return "user and PID namespace"
	}
	return fmt.Sprintf("Containment(%d)", int(c))
}

// KernelEnforced reports whether the kernel, rather than the gateway's
// signals, keeps the agent's descendants from outliving it.
func (c Containment) KernelEnforced() bool { return c != ContainProcessGroup }

// apply sets the clone flags, identity mappings and capabilities c needs.
// With a launcher (Spec.Launcher) and ownProc, the namespaces
// include a mount namespace, where the launcher mounts the agent's own
// /proc. With a launcher, in a user namespace the launcher maps the ids
// itself (see sandbox.ContainFlags for why the gateway cannot): it is
// given CAP_SYS_ADMIN in the new user namespace as an ambient capability,
// the only way a process that is not root there keeps one across execve,
// and gives it up before it executes the agent.
func (c Containment) apply(attr *syscall.SysProcAttr, launcher, ownProc bool) {
	switch c {
	case ContainPIDNamespace:
		attr.Cloneflags = syscall.CLONE_NEWPID
		if launcher && ownProc {
			attr.Cloneflags |= syscall.CLONE_NEWNS
		}
	case ContainUserPIDNamespace:
		attr.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID
		if launcher {
			if ownProc {
				attr.Cloneflags |= syscall.CLONE_NEWNS
			}
			attr.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN}
			return
		}
		uid, gid := os.Getuid(), os.Getgid()
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
		// An unprivileged process may write a gid map only once
		// setgroups is denied in the new namespace.
		attr.GidMappingsEnableSetgroups = false
	}
}

// launch returns the program and arguments that run command with args
// under c: through the launcher, which completes the containment, when c
// is a namespace kind that needs it (an own /proc, or a user namespace's
// maps) and there is one; as they are otherwise.
func (c Containment) launch(launcher string, hostProc bool, command string, args []string) (string, []string, error) {
	mapIDs := c == ContainUserPIDNamespace
	if !c.KernelEnforced() || launcher == "" || hostProc && !mapIDs {
		return command, args, nil
	}
	flags := sandbox.ContainFlags(!hostProc, mapIDs, os.Getuid(), os.Getgid())
	return sandbox.Contain(launcher, flags, command, args)
}

// ProbeContainment returns the strongest containment this gateway can use,
// whether agents must see the gateway's /proc under it (hostProc), and why
// each stronger kind was refused. The kinds, strongest first: a PID
// namespace (and, with a launcher, a /proc of its own), the same inside a
// user namespace, then the two with the gateway's /proc, where the kernel
// refuses a namespace its own /proc but not the namespaces, then the
// process group.
//
// For each, it spawns a real child exactly as a turn spawns its agent (the
// same clone flags and mappings, the same launcher and its steps, from
// this process in its present state, dumpable or not), which then executes
// the launcher once more to exit 0; any failure, at the clone, at a step
// of the launcher or at its execve, refuses the kind. Without a launcher
// (no own /proc) it asks the kernel to execute a path that does not exist
// in the namespaces: ENOENT comes only once the namespaces and their maps
// exist, where any other error means they were refused. Call it once, at
// start: what the kernel allows does not change between sessions, and a
// probe per spawn would double the cost of starting every agent.
func ProbeContainment(launcher string) (c Containment, hostProc bool, refused error) {
	var why []error
	procs := []bool{false}
	if launcher != "" {
		procs = append(procs, true)
	}
	for _, hostProc := range procs {
		for _, c := range []Containment{ContainPIDNamespace, ContainUserPIDNamespace} {
			err := c.probe(launcher, hostProc)
			if err == nil {
				return c, hostProc || launcher == "", errors.Join(why...)
			}
			kind := c.String()
			if launcher != "" && !hostProc {
				kind += " with its own /proc"
			}
			why = append(why, fmt.Errorf("%s: %w", kind, err))
		}
	}
	return ContainProcessGroup, true, errors.Join(why...)
}

// probeBound bounds a containment probe's child, which exits at once.
const probeBound = 10 * time.Second

func (c Containment) probe(launcher string, hostProc bool) error {
	if launcher == "" {
		return c.probeClone()
	}
	p, err := spawn(Spec{Command: launcher, Args: sandbox.ProbeArgs(), Dir: "/", Launcher: launcher, HostProc: hostProc}, c)
	if err != nil {
		return err
	}
	if !p.WaitExit(probeBound) {
		p.Kill()
		return fmt.Errorf("the probe did not exit within %s", probeBound)
	}
	p.Stop(0)
	if code, sig, _ := p.ExitStatus(); code == nil || *code != 0 {
		return fmt.Errorf("the launcher failed (exit %v%s): %s", derefOr(code), sig, strings.TrimSpace(p.tail.String()))
	}
	return nil
}

func derefOr(code *int32) any {
	if code == nil {
		return "none"
	}
	return *code
}

func (c Containment) probeClone() error {
	dir, err := os.MkdirTemp("", "acpgate-probe-")
	if err != nil {
		return err
	}
	defer os.Remove(dir)
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	c.apply(attr, false, false)
	missing := filepath.Join(dir, "missing")
	// Not exec.Command: its path lookup would refuse a missing program
	// before any clone happened.
	cmd := &exec.Cmd{Path: missing, Args: []string{missing}, Env: []string{}, SysProcAttr: attr}
	err = cmd.Start()
	if err == nil {
		// Unreachable; never leave a process behind regardless.
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil
	}
	if errors.Is(err, syscall.ENOENT) {
		return nil
	}
	return err
}
