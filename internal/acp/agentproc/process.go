package agentproc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultStderrTailBytes is how much of an agent's stderr is kept for logs
// and TransportFailure.stderr_tail.
const DefaultStderrTailBytes = 64 << 10

// Spec says how to start an agent program.
type Spec struct {
	// Command is the program; it is executed directly, never by a shell.
	Command string
	// Args are its arguments.
	Args []string
	// Env is its whole environment ("K=V"). The gateway's own environment
	// is not inherited: configuration names what passes through.
	Env []string
	// Dir is its working directory.
	Dir string
	// StderrTailBytes bounds the kept stderr; DefaultStderrTailBytes when 0.
	StderrTailBytes int
	// StderrLine, when set, receives each complete stderr line (for logs).
	StderrLine func(line string)
	// Containment is how the agent's process tree is held; see
	// ProbeContainment. The zero value is the process group.
	Containment Containment
	// Wrap, when set, returns the program and arguments that actually
	// run, given the working directory, Command and Args: a launcher that
	// confines the agent and then executes it in its place (keeping its
	// pid, so containment and exit status are unchanged). An error refuses
	// the start.
	Wrap func(dir, command string, args []string) (string, []string, error)
	// Launcher, when set, is the acpgate executable, which completes a
	// namespace containment (see package sandbox): the agent then runs in
	// a mount namespace too, with a /proc of its own PID namespace. It
	// runs the sandbox of an agent with one (Wrap) in the same run.
	Launcher string
	// HostProc leaves the agent in the gateway's mount namespace, with
	// the gateway's /proc: what ProbeContainment says where the kernel
	// refuses a namespace its own /proc (a /proc partly masked, as in a
	// container) but not the namespaces themselves.
	HostProc bool
	// Starter, when set, starts the agent at its lower CPU priority (see
	// Starter); nil starts it at the gateway's.
	Starter *Starter
}

// Process is a running agent program, contained with its descendants.
//
// Life cycle: start → (the agent runs) → stop: close stdin, wait a grace
// period, SIGTERM the group, wait, SIGKILL the group, reap. The agent leads
// a process group of its own, so the signals reach the grandchildren that
// stayed in it.
//
// A process group is not a container, though: a descendant that calls
// setsid() leaves it, a descendant that inherited the agent's stdout keeps
// the gateway waiting for an EOF after the agent exited (a turn then hangs
// until its timeout), and the parent-death signal that kills the agent
// when the gateway dies, however it dies, reaches no grandchild. So,
// where the kernel allows it (ProbeContainment), the agent runs as PID 1
// of a PID namespace of its own (ContainPIDNamespace, or inside a user
// namespace for an unprivileged gateway). The kernel then enforces what
// signals could only attempt: when the namespace's init exits or is
// killed, every process in the namespace is killed before the agent's own
// exit is reported, and no process can leave its PID namespace. Agent exit
// therefore ends every descendant (its stdout then reaches EOF, after the
// lines already in the pipe), and the gateway's death kills the agent by
// its parent-death signal and with it the whole namespace.
//
// Why not a cgroup: cgroup.kill needs cgroup v2 with a subtree delegated
// to the gateway, which a gateway run by hand, in a container or on a
// hybrid v1 layout (where cgroup.kill does not exist) does not have, and
// cgroup membership alone dies with nothing when the gateway is SIGKILLed.
// A PID namespace needs no setup and nothing to clean up.
//
// What an agent sees in its namespace: getpid() is 1, and its children
// have small pids of the namespace's own. With a launcher
// (Spec.Launcher, which the gateway always has), it also runs in a
// mount namespace of its own, where the launcher mounts a fresh /proc:
// the agent lists only its own process tree, and cannot name the
// gateway's pid, so it can read neither the gateway's environment nor its
// memory, nor those of other agents, whatever its uid. (Without a
// launcher, or where the kernel refuses the agent a /proc of its own
// (Spec.HostProc), /proc is the gateway's, and /proc/<getpid()> is
// not the agent.) The launcher gives up CAP_SYS_ADMIN before it executes
// the agent, so the agent cannot unmount that /proc (see
// sandbox.ContainFlags).
//
// The gateway itself stays non-dumpable (see serve), which closes its
// /proc entries to other processes of its uid that could name it. That
// would keep it from writing a child's uid and gid maps, so in a user
// namespace the launcher writes its own.
//
// As init, the agent inherits its orphaned descendants and should reap them (until it
// exits they stay zombies), and it ignores signals it has no handler for
// when they come from outside its namespace, SIGKILL excepted: an agent
// that would die of the default action of SIGTERM survives stop's SIGTERM
// and is killed after the second grace period instead. The exit code, the
// working directory, the environment and the pipes are as without a
// namespace.
//
// Where namespaces are refused, containment falls back to the process
// group, and at least a descendant that stayed in the group is killed as
// soon as the agent exits.
type Process struct {
	cmd    *exec.Cmd
	stdin  *os.File
	stdout *os.File
	stderr *os.File
	tail   *ringBuffer
	// containment is the kind in force, which is the spec's unless the
	// kernel refused a namespace at this start.
	containment Containment

	exited     chan struct{} // closed once the process has been reaped
	exitCode   *int32
	exitSignal string
	stderrDone chan struct{}
	stopOnce   sync.Once
}

// Start starts spec's program contained as spec.Containment says, or, when
// the kernel refuses that namespace at this start, as a process group.
func Start(spec Spec) (*Process, error) {
	p, err := spawn(spec, spec.Containment)
	if err != nil && spec.Containment.KernelEnforced() && namespaceRefused(err) {
		// The probe at start said yes, but this clone was refused (a
		// namespace limit, say): an agent contained less is better than
		// none at all; Containment says which kind is in force.
		p, err = spawn(spec, ContainProcessGroup)
	}
	return p, err
}

// start starts cmd, from spec's Starter when it has one.
func (spec Spec) start(cmd *exec.Cmd) error {
	if spec.Starter == nil {
		return cmd.Start()
	}
	return spec.Starter.start(cmd)
}

// spawn starts spec's program contained by c, or fails.
func spawn(spec Spec, c Containment) (*Process, error) {
	command, args, err := c.launch(spec.Launcher, spec.HostProc, spec.Command, spec.Args)
	if err != nil {
		return nil, err
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, err
	}
	cmd := exec.Command(command, args...)
	cmd.Env = spec.Env
	if cmd.Env == nil {
		cmd.Env = []string{} // nil would mean "inherit everything"
	}
	cmd.Dir = spec.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid: true,
		// If the gateway dies without stopping the agent, the kernel
		// stops it: an agent never outlives its gateway (and, in a PID
		// namespace, neither does anything the agent started).
		Pdeathsig: syscall.SIGKILL,
	}
	c.apply(cmd.SysProcAttr, spec.Launcher != "", !spec.HostProc)
	if err := spec.start(cmd); err != nil {
		closeAll(inR, inW, outR, outW, errR, errW)
		return nil, err
	}
	closeAll(inR, outW, errW) // the child holds its own copies
	limit := spec.StderrTailBytes
	if limit <= 0 {
		limit = DefaultStderrTailBytes
	}
	p := &Process{
		cmd:         cmd,
		stdin:       inW,
		stdout:      outR,
		stderr:      errR,
		tail:        newRingBuffer(limit),
		containment: c,
		exited:      make(chan struct{}),
		stderrDone:  make(chan struct{}),
	}
	go p.reap()
	go p.drainStderr(spec.StderrLine)
	return p, nil
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}

// namespaceRefused reports whether a start failed because the kernel would
// not create a namespace (rather than, say, because the program is
// missing).
func namespaceRefused(err error) bool {
	return errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) ||
		errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EUSERS)
}

func (p *Process) reap() {
	// Learn of the exit without reaping: while the agent is an unreaped
	// zombie its pid, and so its process group id, cannot be reused, so
	// the group can be killed without hitting a stranger. Killing it as
	// soon as the agent exits stops the descendants left in the group,
	// which would otherwise keep the agent's stdout open and its turn
	// waiting. (In a PID namespace the kernel has already killed them.)
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, p.cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	p.signalGroup(syscall.SIGKILL)
	err := p.cmd.Wait()
	var exitErr *exec.ExitError
	state := p.cmd.ProcessState
	if err != nil && !errors.As(err, &exitErr) && state == nil {
		close(p.exited)
		return
	}
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		p.exitSignal = ws.Signal().String()
	} else {
		code := int32(state.ExitCode())
		p.exitCode = &code
	}
	close(p.exited)
}

// Stdout returns the agent's stdout.
func (p *Process) Stdout() io.Reader { return p.stdout }

// Stdin returns the agent's stdin.
func (p *Process) Stdin() io.Writer { return p.stdin }

// StderrTail returns the end of what the agent wrote to stderr, at most
// Spec.StderrTailBytes.
func (p *Process) StderrTail() string { return p.tail.String() }

// StderrDone is closed once the agent's stderr has been read to its end.
func (p *Process) StderrDone() <-chan struct{} { return p.stderrDone }

// ExitStatus returns the exit code or terminating signal, and true, once
// the process has been reaped.
func (p *Process) ExitStatus() (*int32, string, bool) {
	select {
	case <-p.exited:
		return p.exitCode, p.exitSignal, true
	default:
		return nil, "", false
	}
}

// WaitExit waits up to d for the process to exit, and reports whether it
// did.
func (p *Process) WaitExit(d time.Duration) bool {
	if d <= 0 {
		select {
		case <-p.exited:
			return true
		default:
			return false
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	}
}

// Stop ends the agent: close its stdin (a well-behaved agent exits on EOF),
// wait up to grace, SIGTERM the group, wait up to grace, SIGKILL the group.
// It returns once the process has been reaped and its pipes are closed. It
// is safe to call more than once; later calls wait for the first.
func (p *Process) Stop(grace time.Duration) {
	p.stopOnce.Do(func() {
		_ = p.stdin.Close()
		if !p.WaitExit(grace) {
			p.signalGroup(syscall.SIGTERM)
			if !p.WaitExit(grace) {
				p.signalGroup(syscall.SIGKILL)
			}
		}
		// Once reaped, what was left of the group was killed (see reap),
		// and in a namespace everything was.
		<-p.exited
		_ = p.stdout.Close()
		_ = p.stderr.Close()
		<-p.stderrDone
	})
}

// Kill stops the agent at once, without a grace period.
func (p *Process) Kill() {
	p.signalGroup(syscall.SIGKILL)
	p.Stop(0)
}

func (p *Process) signalGroup(sig syscall.Signal) {
	if p.cmd.Process == nil {
		return
	}
	// The negative pid addresses the process group the agent leads.
	if err := syscall.Kill(-p.cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		_ = p.cmd.Process.Signal(sig)
	}
}

// Pid returns the agent's process id (in the gateway's PID namespace).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Containment returns the kind of containment the agent runs under.
func (p *Process) Containment() Containment { return p.containment }

func (p *Process) String() string {
	return fmt.Sprintf("%s (pid %d)", p.cmd.Path, p.Pid())
}
