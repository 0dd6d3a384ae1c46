package agentproc

import (
	"strings"
	"testing"
	"time"
)

func TestAnExitedAgentReportsItsStatusAndTheEndOfItsStderr(t *testing.T) {
	p, err := Start(Spec{Command: "/bin/sh", Args: []string{"-c", "echo first >&2; echo last words >&2; exit 3"}, Dir: t.TempDir(), StderrTailBytes: 11})
	if err != nil {
		t.Fatal(err)
	}
	if !p.WaitExit(10 * time.Second) {
		p.Kill()
		t.Fatal("the agent did not exit")
	}
	// Stop closes stderr: what is not read by then is not kept.
	select {
	case <-p.StderrDone():
	case <-time.After(10 * time.Second):
		t.Fatal("the agent's stderr was not read to its end")
	}
	p.Stop(0)
	code, signal, ok := p.ExitStatus()
	if !ok || code == nil || *code != 3 || signal != "" {
		t.Errorf("exit status %v %q %v, want 3", code, signal, ok)
	}
	if got := p.StderrTail(); got != "last words\n" {
		t.Errorf("the stderr tail is %q, want the last 11 bytes", got)
	}
}

func TestStoppingAnAgentThatIgnoresItsStdinEscalatesToSignals(t *testing.T) {
	p, err := Start(Spec{Command: "/bin/sh", Args: []string{"-c", "trap '' TERM; sleep 30"}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	p.Stop(50 * time.Millisecond)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("stopping took %s", d)
	}
	if _, signal, ok := p.ExitStatus(); !ok || signal == "" {
		t.Errorf("the agent was not killed by a signal: %q %v", signal, ok)
	}
}

func TestAStderrLineWithoutANewlineIsPassedOnInBoundedPieces(t *testing.T) {
	var lines []string
	rest := emitLines([]byte("one\ntwo\n"+strings.Repeat("x", 5<<10)), func(l string) { lines = append(lines, l) })
	if len(lines) != 3 || lines[0] != "one" || lines[1] != "two" || len(lines[2]) != 5<<10 || len(rest) != 0 {
		t.Errorf("%d lines, %d bytes left", len(lines), len(rest))
	}
	if rest := emitLines([]byte("partial"), func(string) { t.Error("a short partial line was emitted") }); string(rest) != "partial" {
		t.Errorf("kept %q", rest)
	}
}

func TestTheRingBufferKeepsTheLastBytesWrittenInOrder(t *testing.T) {
	r := newRingBuffer(8)
	for _, w := range []string{"abc", "defg", "hij", "k"} {
		r.Write([]byte(w))
	}
	if got := r.String(); got != "defghijk" {
		t.Errorf("%q, want defghijk", got)
	}
	r.Write([]byte("0123456789"))
	if got := r.String(); got != "23456789" {
		t.Errorf("after a write longer than the buffer: %q", got)
	}
}
