package acp_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acpgate/acpgate/internal/acp"
	"github.com/acpgate/acpgate/internal/acp/clientreq"
)

// Gemini CLI and Qwen Code create a file by reading it first through
// fs/read_text_file: only ACP's resource-not-found answer (-32002, "Resource
// not found") tells them it is new. Any other error fails the write.
func TestReadingAMissingFileAnswersACPsResourceNotFound(t *testing.T) {
	cwd := t.TempDir()
	cfg := agentConfig()
	cfg.FS = clientreq.FSAccess{Read: true, Write: true}
	s, err := acp.Open(context.Background(), cfg, acp.OpenOptions{Cwd: cwd})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, path := range []string{filepath.Join(cwd, "new.txt"), filepath.Join(cwd, "new-dir", "new.txt")} {
		r := prompt(t, s, "read "+path+"\nstop end_turn", nil)
		want := "read-error:-32002:Resource not found: "
		if got := r.Outcome.GetText(); !strings.HasPrefix(got, want) || !strings.Contains(got, path) {
			t.Errorf("reading the missing %s answered %q, want the prefix %q and the path", path, got, want)
		}
	}
}
