package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// parseHost parses the directives that act on the host outside ACP: the
// files and processes a sandbox and containment must confine, and stderr.
func parseHost(name, rest string) (step, error) {
	switch name {
	case "osread":
		path := strings.TrimSpace(rest)
		if path == "" {
			return nil, fmt.Errorf("wants PATH")
		}
		return func(t *turn) bool {
			b, err := os.ReadFile(path)
			if err != nil {
				t.say("osread-error:" + err.Error())
			} else {
				t.say("osread:" + string(b))
			}
			return false
		}, nil

	case "procs":
		word := strings.TrimSpace(rest)
		if word == "" {
			return nil, fmt.Errorf("wants WORD")
		}
		return func(t *turn) bool {
			t.say(procScan(word))
			return false
		}, nil

	case "unmountproc":
		return func(t *turn) bool {
			t.say(unmountProc())
			return false
		}, nil

	case "oswrite":
		path, text, _ := strings.Cut(strings.TrimLeft(rest, " "), " ")
		if path == "" {
			return nil, fmt.Errorf("wants PATH TEXT")
		}
		text = unescape(text)
		return func(t *turn) bool {
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.say("oswrite-error:" + err.Error())
			} else {
				t.say("oswrite:ok")
			}
			return false
		}, nil

	case "stderr":
		v, err := intArgs(rest, 1)
		if err != nil {
			return nil, err
		}
		return func(t *turn) bool {
			writeStderr(v[0])
			return false
		}, nil

	case "grandchild":
		return noArgs(rest, func(t *turn) bool {
			t.say(startGrandchild())
			return false
		})

	case "spawn":
		f, err := fields(rest, 1, 2)
		if err != nil {
			return nil, err
		}
		setsid := len(f) == 2
		if setsid && f[0] != "--setsid" {
			return nil, fmt.Errorf("wants [--setsid] SECONDS")
		}
		v, err := intArgs(f[len(f)-1], 1)
		if err != nil {
			return nil, err
		}
		return func(t *turn) bool {
			t.say(spawn(v[0], setsid))
			return false
		}, nil
	}
	return nil, errOtherDirective
}

// writeStderr writes exactly n bytes of 80-byte 'e' lines to stderr.
func writeStderr(n int) {
	w := bufio.NewWriter(os.Stderr)
	for n > 0 {
		l := min(n, 80)
		_, _ = w.WriteString(strings.Repeat("e", l-1))
		_ = w.WriteByte('\n')
		n -= l
	}
	_ = w.Flush()
}

// startGrandchild starts a long sleep in our own process group and reports
// its pid, so that tests can check that the gateway cleans it up.
func startGrandchild() string {
	path := "/bin/sleep"
	if _, err := os.Stat(path); err != nil {
		if p, lerr := exec.LookPath("sleep"); lerr == nil {
			path = p
		}
	}
	cmd := exec.Command(path, "300")
	if err := cmd.Start(); err != nil {
		return "grandchild-error:" + err.Error()
	}
	go func() { _ = cmd.Wait() }() // reap it if it dies while we live
	return "grandchild:" + pidRef(cmd.Process.Pid)
}
