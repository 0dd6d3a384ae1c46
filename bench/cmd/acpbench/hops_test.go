package main

import "testing"

func TestHopsRefusesAMissingTraceAndANonPositiveTop(t *testing.T) {
	for _, args := range [][]string{{}, {"-trace", "x.trace", "-top", "0"}, {"-trace", "x.trace", "-top", "-3"}} {
		if got := runHops(args); got != 2 {
			t.Errorf("acpbench hops %q exits %d, want 2", args, got)
		}
	}
}
