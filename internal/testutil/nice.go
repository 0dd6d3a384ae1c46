package testutil

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// StatNice is the nice value in a /proc/PID/stat line: its 19th field,
// counted after the command name, which may hold spaces and parentheses.
// A line that is not a stat line fails t.
func StatNice(t testing.TB, stat string) int {
	t.Helper()
	i := strings.LastIndex(stat, ") ")
	var f []string
	if i >= 0 {
		f = strings.Fields(stat[i+2:])
	}
	if len(f) < 17 {
		t.Fatalf("not a stat line: %q", stat)
	}
	n, err := strconv.Atoi(f[16])
	if err != nil {
		t.Fatalf("not a stat line: %q", stat)
	}
	return n
}

// ThreadNices counts the threads of process pid ("self" for the caller's)
// by nice value. A thread that ends while they are read is not counted.
func ThreadNices(t testing.TB, pid string) map[int]int {
	t.Helper()
	stats, err := filepath.Glob(filepath.Join("/proc", pid, "task", "*", "stat"))
	if err != nil || len(stats) == 0 {
		t.Fatalf("no threads of process %s: %v", pid, err)
	}
	n := map[int]int{}
	for _, p := range stats {
		if b, err := os.ReadFile(p); err == nil {
			n[StatNice(t, string(b))]++
		}
	}
	return n
}
