package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/acpgate/acpgate/bench/internal/clients"
	"github.com/acpgate/acpgate/bench/internal/proc"
	"github.com/acpgate/acpgate/bench/internal/report"
)

// gatewayProc is a running `acpgate serve`, or the relay.
type gatewayProc struct {
	cmd      *exec.Cmd
	addr     string
	stateDir string // its store's directory; "" for the relay, which keeps none
	logf     *os.File
	exited   chan struct{}
}

// startGateway runs `acpgate serve --config cfg --listen 127.0.0.1:0`, with
// extra flags after those (the profiling ones, say), and waits for it to say
// where it listens. Its stderr goes to logPath. stateDir is its own state
// directory, which its configuration names as state_dir; XDG_STATE_HOME
// points there too, so that nothing it keeps can land in a directory
// another gateway uses.
func startGateway(bin, cfg, logPath, stateDir string, extra ...string) (*gatewayProc, error) {
	args := append([]string{"serve", "--config", cfg, "--listen", "127.0.0.1:0", "--log-level", "warn"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+stateDir)
	return startServer(cmd, "acpgate listening on ", logPath, stateDir)
}

// startRelay runs `acpbench relay` (this executable) on a free loopback
// port, as startGateway runs a gateway. It keeps no state.
func startRelay(self, logPath string) (*gatewayProc, error) {
	return startServer(exec.Command(self, "relay", "-listen", "127.0.0.1:0"), clients.RelayListening, logPath, "")
}

// startServer starts cmd and waits for it to write a line starting with
// ready, then its address, to stderr, which goes to logPath. stateDir is
// its state directory, "" for none.
func startServer(cmd *exec.Cmd, ready, logPath, stateDir string) (*gatewayProc, error) {
	name := filepath.Base(cmd.Path) + " " + cmd.Args[1]
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	g := &gatewayProc{cmd: cmd, stateDir: stateDir, logf: logf, exited: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			if a, ok := strings.CutPrefix(line, ready); ok {
				select {
				case addr <- a:
				default:
				}
			}
		}
		_, _ = io.Copy(logf, stderr)
	}()
	go func() {
		_ = cmd.Wait()
		close(g.exited)
	}()
	select {
	case g.addr = <-addr:
		return g, nil
	case <-g.exited:
		logf.Close()
		return nil, fmt.Errorf("%s exited at start-up (%v); see %s", name, cmd.ProcessState, logPath)
	case <-time.After(20 * time.Second):
		g.stop()
		return nil, fmt.Errorf("%s did not report its address within 20 s; see %s", name, logPath)
	}
}

func (g *gatewayProc) pid() int { return g.cmd.Process.Pid }

// stop sends SIGTERM and waits for a clean exit (SIGKILL after 30 s). It
// reports an exit that was not clean.
func (g *gatewayProc) stop() error {
	defer g.logf.Close()
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.exited:
	case <-time.After(30 * time.Second):
		_ = g.cmd.Process.Kill()
		<-g.exited
		return fmt.Errorf("%s did not stop within 30 s of SIGTERM", filepath.Base(g.cmd.Path))
	}
	if !g.cmd.ProcessState.Success() {
		return fmt.Errorf("%s exited with %v", filepath.Base(g.cmd.Path), g.cmd.ProcessState)
	}
	return nil
}

// sampleRSS samples a process's RSS every period, with the progress read
// reports, until the function it returns is called; that returns the
// samples.
func sampleRSS(pid int, period time.Duration, read func() int64) (stop func() []report.BPSample) {
	quit := make(chan struct{})
	done := make(chan []report.BPSample)
	go func() {
		var out []report.BPSample
		tick := time.NewTicker(period)
		defer tick.Stop()
		start := time.Now()
		for {
			select {
			case <-quit:
				done <- out
				return
			case <-tick.C:
			}
			if m, err := proc.ReadMemory(pid); err == nil {
				out = append(out, report.BPSample{At: time.Since(start), Unix: time.Now().UnixNano(), RSS: m.RSS, Read: read()})
			}
		}
	}()
	return func() []report.BPSample {
		close(quit)
		return <-done
	}
}
