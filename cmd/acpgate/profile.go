package main

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"runtime/trace"
)

// startCPUProfile profiles the process's CPU into path until the returned
// function is called.
func startCPUProfile(path string) (stop func(), err error) {
	return startRecording("--cpuprofile", path, pprof.StartCPUProfile, pprof.StopCPUProfile)
}

// startTrace writes the runtime's execution trace to path until the
// returned function is called. The trace records when each goroutine was
// made runnable and when it ran, which a CPU profile cannot show: where a
// paced chunk waits between the agent's pipe and the client's stream is
// mostly scheduling, not work.
func startTrace(path string) (stop func(), err error) {
	return startRecording("--trace", path, trace.Start, trace.Stop)
}

// startRecording creates path and records into it with start until the
// returned function is called; errors name flag.
func startRecording(flag, path string, start func(io.Writer) error, end func()) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	if err := start(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	return func() {
		end()
		f.Close()
	}, nil
}

// writeAllocProfile writes the allocation profile since start to path.
func writeAllocProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--allocprofile: %w", err)
	}
	defer f.Close()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		return fmt.Errorf("--allocprofile: %w", err)
	}
	return nil
}
