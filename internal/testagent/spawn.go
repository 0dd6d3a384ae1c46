package main

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// spawn starts `sleep seconds` holding the agent's stdout open (the way a
// tool an agent runs inherits it), in a new session when setsid (so it has
// left the agent's process group), and reports its pid as the gateway sees
// it. It is never reaped by us: whether it outlives the agent is what the
// tests of the gateway's containment look at.
func spawn(seconds int, setsid bool) string {
	path, err := sleepPath()
	if err != nil {
		return "spawn-error:" + err.Error()
	}
	cmd := exec.Command(path, strconv.Itoa(seconds))
	cmd.Stdout = os.Stdout
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: setsid}
	if err := cmd.Start(); err != nil {
		return "spawn-error:" + err.Error()
	}
	go func() { _ = cmd.Wait() }() // reap it if it dies while we live
	return "spawned:" + pidRef(cmd.Process.Pid)
}

func sleepPath() (string, error) {
	const path = "/bin/sleep"
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	return exec.LookPath("sleep")
}
