package exitcode

import (
	"os"
	"strings"
	"testing"
)

// The CLI guide documents the exit codes; it must say what the code does.
func TestTheCLIGuideShowsTheExitCodeTable(t *testing.T) {
	readme, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), strings.TrimSpace(Table())) {
		t.Error("docs/cli.md's exit-code table differs from Table(); paste the current one")
	}
}
