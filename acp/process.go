package acp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// DefaultStderrTailBytes is how much of an agent's stderr is kept for logs
// and TransportFailure.stderr_tail.
const DefaultStderrTailBytes = 64 << 10

// ProcessSpec says how to start an agent program.
type ProcessSpec struct {
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
}

// process is a running agent program in its own process group.
//
// Life cycle: start → (the agent runs) → stop: close stdin, wait a grace
// period, SIGTERM the group, wait, SIGKILL the group, reap. The group signal
// reaches grandchildren the agent spawned, so none outlive the session.
type process struct {
	cmd    *exec.Cmd
	stdin  *os.File
	stdout *os.File
	stderr *os.File
	tail   *ringBuffer

	exited     chan struct{} // closed once the process has been reaped
	exitCode   *int32
	exitSignal string
	stderrDone chan struct{}
	stopOnce   sync.Once
}

func startProcess(spec ProcessSpec) (*process, error) {
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
	cmd := exec.Command(spec.Command, spec.Args...)
	cmd.Env = spec.Env
	if cmd.Env == nil {
		cmd.Env = []string{} // nil would mean "inherit everything"
	}
	cmd.Dir = spec.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid: true,
		// If the gateway dies without stopping the agent, the kernel
		// stops it: an agent never outlives its gateway.
		Pdeathsig: syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		closeAll(inR, inW, outR, outW, errR, errW)
		return nil, err
	}
	closeAll(inR, outW, errW) // the child holds its own copies
	limit := spec.StderrTailBytes
	if limit <= 0 {
		limit = DefaultStderrTailBytes
	}
	p := &process{
		cmd:        cmd,
		stdin:      inW,
		stdout:     outR,
		stderr:     errR,
		tail:       newRingBuffer(limit),
		exited:     make(chan struct{}),
		stderrDone: make(chan struct{}),
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

func (p *process) reap() {
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

func (p *process) drainStderr(onLine func(string)) {
	defer close(p.stderrDone)
	buf := make([]byte, 32<<10)
	var partial []byte
	for {
		n, err := p.stderr.Read(buf)
		if n > 0 {
			p.tail.Write(buf[:n])
			if onLine != nil {
				partial = emitLines(append(partial, buf[:n]...), onLine)
			}
		}
		if err != nil {
			if onLine != nil && len(partial) > 0 {
				onLine(string(partial))
			}
			return
		}
	}
}

// emitLines calls onLine for each complete line and returns the rest. A
// line longer than 4 KiB is emitted in pieces so a stderr flood without
// newlines cannot grow the buffer.
func emitLines(b []byte, onLine func(string)) []byte {
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if len(b) > 4<<10 {
				onLine(string(b))
				return b[:0]
			}
			return b
		}
		onLine(string(b[:i]))
		b = b[i+1:]
	}
}

// Stdout returns the agent's stdout.
func (p *process) Stdout() io.Reader { return p.stdout }

// Stdin returns the agent's stdin.
func (p *process) Stdin() io.Writer { return p.stdin }

// exitStatus returns the exit code or terminating signal, once reaped.
func (p *process) exitStatus() (*int32, string, bool) {
	select {
	case <-p.exited:
		return p.exitCode, p.exitSignal, true
	default:
		return nil, "", false
	}
}

// waitExit waits up to d for the process to exit.
func (p *process) waitExit(d time.Duration) bool {
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

// stop ends the agent: close its stdin (a well-behaved agent exits on EOF),
// wait up to grace, SIGTERM the group, wait up to grace, SIGKILL the group.
// It returns once the process has been reaped and its pipes are closed. It
// is safe to call more than once; later calls wait for the first.
func (p *process) stop(grace time.Duration) {
	p.stopOnce.Do(func() {
		_ = p.stdin.Close()
		if !p.waitExit(grace) {
			p.signalGroup(syscall.SIGTERM)
			if !p.waitExit(grace) {
				p.signalGroup(syscall.SIGKILL)
			}
		}
		<-p.exited
		// The agent is gone, but a grandchild may linger in the group
		// holding the pipes open: make sure the whole group is gone.
		p.signalGroup(syscall.SIGKILL)
		_ = p.stdout.Close()
		_ = p.stderr.Close()
		<-p.stderrDone
	})
}

// kill stops the agent at once, without a grace period.
func (p *process) kill() {
	p.signalGroup(syscall.SIGKILL)
	p.stop(0)
}

func (p *process) signalGroup(sig syscall.Signal) {
	if p.cmd.Process == nil {
		return
	}
	// The negative pid addresses the process group the agent leads.
	if err := syscall.Kill(-p.cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		_ = p.cmd.Process.Signal(sig)
	}
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// ringBuffer keeps the last n bytes written to it.
type ringBuffer struct {
	mu   sync.Mutex
	buf  []byte
	size int
	full bool
	pos  int
}

func newRingBuffer(n int) *ringBuffer {
	return &ringBuffer{buf: make([]byte, 0, min(n, 4096)), size: n}
}

func (r *ringBuffer) Write(b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(b) >= r.size {
		r.buf = append(r.buf[:0], b[len(b)-r.size:]...)
		r.full, r.pos = true, 0
		return
	}
	if !r.full {
		if len(r.buf)+len(b) <= r.size {
			r.buf = append(r.buf, b...)
			return
		}
		grown := make([]byte, r.size)
		copy(grown, r.buf)
		r.pos = len(r.buf)
		r.buf = grown
		r.full = true
	}
	for len(b) > 0 {
		n := copy(r.buf[r.pos:], b)
		b = b[n:]
		r.pos = (r.pos + n) % r.size
	}
}

// String returns the kept bytes in order.
func (r *ringBuffer) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.full {
		return string(r.buf)
	}
	return string(r.buf[r.pos:]) + string(r.buf[:r.pos])
}

func (p *process) String() string {
	return fmt.Sprintf("%s (pid %d)", p.cmd.Path, p.pid())
}
