package clients

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"
)

// hogPeriod is a busy loop's cycle: busy for duty × hogPeriod, then asleep.
// The agent writes its paced chunks about once a millisecond, so the load
// comes in bursts of the same scale.
const hogPeriod = time.Millisecond

// StartLoad starts one hog process per entry of cores (clamped to 0–1) and
// returns the function that stops and reaps them, so that their CPU time
// is counted as the client's.
func StartLoad(cores []float64) (stop func(), err error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var hogs []*exec.Cmd
	stop = func() {
		for _, h := range hogs {
			_ = h.Process.Kill()
			_ = h.Wait()
		}
	}
	for _, c := range cores {
		h := exec.Command(self, "hog", strconv.FormatFloat(min(1, max(0, c)), 'f', 3, 64))
		if err := h.Start(); err != nil {
			stop()
			return nil, fmt.Errorf("starting a load process: %w", err)
		}
		hogs = append(hogs, h)
	}
	return stop, nil
}

// RunHog burns duty of a core until killed.
func RunHog(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: acpbench hog DUTY")
		return 2
	}
	duty, err := strconv.ParseFloat(args[0], 64)
	if err != nil || duty < 0 || duty > 1 {
		fmt.Fprintln(os.Stderr, "acpbench hog: DUTY is a fraction of a core, 0 to 1")
		return 2
	}
	busy := time.Duration(duty * float64(hogPeriod))
	for {
		start := time.Now()
		for time.Since(start) < busy {
		}
		if rest := hogPeriod - time.Since(start); rest > 0 {
			time.Sleep(rest)
		}
	}
}
