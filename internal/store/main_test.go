package store_test

import (
	"os"
	"testing"

	"github.com/acpgate/acpgate/internal/testpg"
)

// TestMain stops the PostgreSQL server of the benchmarks of the postgres
// backend, if one was started, when they end.
func TestMain(m *testing.M) { os.Exit(testpg.Main(m)) }
