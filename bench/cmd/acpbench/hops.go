package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/acpgate/acpgate/bench/internal/hops"
)

// runHops is `acpbench hops -trace FILE`: where the goroutines of a traced
// acpgate (`acpgate serve --trace FILE`) waited to run. At a paced rate a
// chunk costs the gateway little CPU; its latency is mostly the time each
// goroutine on its path spends runnable before a thread runs it, once per
// hand-off from one goroutine to the next. A CPU profile does not show that
// time at all. The table groups every such wait by the calls that made the
// goroutine runnable (see package hops), so each hand-off on a chunk's path is
// one row, with the distribution of its waits.
func runHops(args []string) int {
	fs := flag.NewFlagSet("hops", flag.ContinueOnError)
	path := fs.String("trace", "", "an execution trace written by `acpgate serve --trace`")
	top := fs.Int("top", 12, "rows to print, by total wait")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	switch {
	case *path == "":
		fmt.Fprintln(os.Stderr, "acpbench hops: -trace is required: a trace written by `acpgate serve --trace FILE`")
		return 2
	case *top < 1:
		fmt.Fprintf(os.Stderr, "acpbench hops: -top must be at least 1, not %d\n", *top)
		return 2
	}
	f, err := os.Open(*path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "acpbench hops:", err)
		return 1
	}
	defer f.Close()
	h, err := hops.Read(f)
	if err != nil {
		fmt.Fprintln(os.Stderr, "acpbench hops:", err)
		return 1
	}
	fmt.Print(h.Table(*top))
	return 0
}
