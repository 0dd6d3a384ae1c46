package config_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/acpgate/acpgate/internal/config"
)

// The configurations shipped in examples/config must stay valid.
func TestTheExampleConfigurationsParse(t *testing.T) {
	files, err := filepath.Glob("../../examples/config/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example configurations found: %v", err)
	}
	lookup := func(string) (string, bool) { return "/usr/bin/example", true }
	for _, f := range files {
		if strings.HasPrefix(filepath.Base(f), "mesh-") {
			continue // TestTheMeshConfigurationsParse gives them their files
		}
		if _, err := config.Load(f, lookup); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
