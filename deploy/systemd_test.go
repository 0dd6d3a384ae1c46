package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The systemd unit passes systemd-analyze verify with nothing to say:
// verify exits 0 even for an unknown or misspelt key, which it only warns
// of, so any output fails the test. ExecStart is pointed at a freshly
// built acpgate, since verify requires the executable to exist.
func TestTheSystemdUnitVerifiesWithoutWarnings(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("ACPGATE_REQUIRE_SYSTEMD") != "" {
			t.Fatal("systemd-analyze is required (Debian's systemd package: make deps)")
		}
		t.Skip("systemd-analyze not installed (Debian's systemd package: make deps)")
	}
	unit, err := os.ReadFile("systemd/acpgate.service")
	if err != nil {
		t.Fatal(err)
	}
	text := string(unit)
	if !strings.Contains(text, "ExecStart=/usr/local/bin/acpgate ") {
		t.Fatal("ExecStart no longer runs /usr/local/bin/acpgate: update this test")
	}
	for _, want := range []string{"DynamicUser=yes", "StateDirectory=acpgate", "ProtectSystem=strict", "NoNewPrivileges=yes"} {
		if !strings.Contains(text, "\n"+want+"\n") {
			t.Errorf("the unit lacks %s", want)
		}
	}
	path := filepath.Join(t.TempDir(), "acpgate.service")
	text = strings.ReplaceAll(text, "ExecStart=/usr/local/bin/acpgate ", "ExecStart="+acpgate(t)+" ")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", "--man=no", path).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) != 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
