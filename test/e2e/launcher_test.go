package e2e

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// Agents start through acpgate-launcher when it lies beside acpgate (the
// release and the image put it there), and through acpgate itself when it
// does not (go run, go install): either way a turn completes, with the
// agent in its own /proc.
func TestAgentsStartThroughTheLauncherBesideAcpgateOrThroughAcpgateItself(t *testing.T) {
	bin, _ := binaries(t)
	alone := filepath.Join(t.TempDir(), "acpgate")
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(alone, data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, bin, launcher string
	}{
		{"beside", bin, filepath.Join(filepath.Dir(bin), "acpgate-launcher")},
		{"alone", alone, alone},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := startServeCmd(t, exec.Command(c.bin, "serve", "--listen", "127.0.0.1:0", "--log-level", "debug"))
			if err != nil {
				t.Fatal(err)
			}
			if want := `msg="agent launcher" path=` + c.launcher; !strings.Contains(s.log(), want) {
				t.Errorf("the log does not say %s:\n%s", want, s.log())
			}
			client, _ := s.client(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			stream, err := client.Prompt(ctx, &acpgatev1.PromptRequest{Agent: "demo", Text: "hello"})
			if err != nil {
				t.Fatal(err)
			}
			var outcome *acpgatev1.PromptOutcome
			for {
				ev, err := stream.Recv()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if o := ev.GetOutcome(); o != nil {
					outcome = o
				}
			}
			if outcome == nil {
				t.Fatalf("the demo turn did not complete:\n%s", s.log())
			}
			if !strings.Contains(s.log(), "own_proc=true") {
				t.Errorf("the agent got no /proc of its own through %s:\n%s", c.launcher, s.log())
			}
		})
	}
}
