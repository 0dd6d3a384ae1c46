package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestServeWritesAnExecutionTraceOfItsWholeRunWhenAsked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acpgate.trace")
	s := serve(t, "--trace", path)
	bin, _ := binaries(t)
	if out, err := exec.Command(bin, "prompt", "--addr", s.addr, "--agent", "demo", "hello").CombinedOutput(); err != nil {
		t.Fatalf("prompt: %v\n%s", err, out)
	}
	s.terminate(t, 18*time.Second)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// A trace the runtime finished starts with its header and holds more
	// than the header: the run's events are flushed when it stops.
	header := b[:min(len(b), 16)]
	if !bytes.HasPrefix(header, []byte("go 1.")) || !bytes.Contains(header, []byte(" trace")) {
		t.Fatalf("%s does not start with a Go execution trace's header: %q", path, header)
	}
	if len(b) < 4096 {
		t.Errorf("the trace holds %d bytes: a whole run with a turn in it writes more", len(b))
	}
}

func TestServeRefusesToStartWhenItCannotWriteTheTrace(t *testing.T) {
	bin, _ := binaries(t)
	path := filepath.Join(t.TempDir(), "missing", "acpgate.trace")
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--trace", path)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+t.TempDir())
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("acpgate serve kept running with a trace it cannot write")
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("exit: %v, want status 1", err)
	}
	if !strings.Contains(string(out), "--trace:") {
		t.Errorf("the error does not name the flag:\n%s", out)
	}
}
