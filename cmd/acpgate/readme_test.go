package main

import (
	"os"
	"strings"
	"testing"
)

// The README documents the CLI's exit codes; it must say what the code does.
func TestTheREADMEShowsTheExitCodeTable(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), strings.TrimSpace(exitCodeTable())) {
		t.Error("README.md's exit-code table differs from exitCodeTable(); paste the current one")
	}
}
