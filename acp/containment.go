package acp

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// Containment is how an agent's whole process tree (the agent and every
// descendant) is held, so that none of it outlives the agent, its session
// or the gateway. See process for why a PID namespace is preferred.
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

// apply sets the clone flags and identity mappings c needs.
func (c Containment) apply(attr *syscall.SysProcAttr) {
	switch c {
	case ContainPIDNamespace:
		attr.Cloneflags = syscall.CLONE_NEWPID
	case ContainUserPIDNamespace:
		attr.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID
		uid, gid := os.Getuid(), os.Getgid()
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
		// An unprivileged process may write a gid map only once
		// setgroups is denied in the new namespace.
		attr.GidMappingsEnableSetgroups = false
	}
}

// ProbeContainment returns the strongest containment this gateway can use,
// and, when that is the process group, why the namespaces were refused. It
// starts no program: it asks the kernel to create the namespaces and then
// to execute the root directory, which fails with EACCES only once the
// namespaces exist; creating them fails with EPERM or EINVAL (or ENOSPC
// past a namespace limit) instead. Call it once, at start: what the kernel
// allows does not change between sessions, and a probe per spawn would
// double the cost of starting every agent.
func ProbeContainment() (Containment, error) {
	var refused []error
	for _, c := range []Containment{ContainPIDNamespace, ContainUserPIDNamespace} {
		err := c.probe()
		if err == nil {
			return c, nil
		}
		refused = append(refused, fmt.Errorf("%s: %w", c, err))
	}
	return ContainProcessGroup, errors.Join(refused...)
}

func (c Containment) probe() error {
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	c.apply(attr)
	// Not exec.Command: its path lookup would refuse a directory before
	// any clone happened.
	cmd := &exec.Cmd{Path: "/", Args: []string{"/"}, Env: []string{}, SysProcAttr: attr}
	err := cmd.Start()
	if err == nil {
		// Unreachable on Linux; never leave a process behind regardless.
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil
	}
	if errors.Is(err, syscall.EACCES) {
		return nil
	}
	return err
}
