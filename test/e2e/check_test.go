package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// serve --check judges a configuration as serve would at start, and
// exits without serving: deployment manifests are checked with it, where
// starting a gateway would bind ports and open the store.
func TestServeCheckJudgesAConfigurationWithoutServing(t *testing.T) {
	bin, _ := binaries(t)
	dir := t.TempDir()
	valid := filepath.Join(dir, "valid.yaml")
	stateDir := filepath.Join(dir, "state")
	if err := os.WriteFile(valid, []byte("listen: 127.0.0.1:1\nstate_dir: "+stateDir+"\nagents:\n  - {name: demo, command: "+bin+", args: [demo-agent]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	misspelt := filepath.Join(dir, "misspelt.yaml")
	if err := os.WriteFile(misspelt, []byte("listen: 127.0.0.1:1\nshutdown_grase: 5s\nagents:\n  - {name: demo, command: "+bin+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	exposed := filepath.Join(dir, "exposed.yaml")
	if err := os.WriteFile(exposed, []byte("listen: 0.0.0.0:7070\nagents:\n  - {name: demo, command: "+bin+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file     string
		wantCode int
		wantErr  string
	}{
		{valid, 0, "the configuration is valid"},
		{misspelt, 2, `unknown key "shutdown_grase"`},
		{exposed, 2, "insecure"},
	} {
		cmd := exec.Command(bin, "serve", "--check", "--config", c.file)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		done := make(chan error, 1)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { done <- cmd.Wait() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("%s: serve --check still running after 30s: it must not serve", c.file)
		}
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != c.wantCode || !strings.Contains(stderr.String(), c.wantErr) {
			t.Errorf("%s: exit %d, stderr %q; want %d and %q", filepath.Base(c.file), code, stderr.String(), c.wantCode, c.wantErr)
		}
	}
	if _, err := os.Stat(stateDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("serve --check created the state directory (%v): it must not open the store", err)
	}
}
