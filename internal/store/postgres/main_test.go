package postgres_test

import (
	"os"
	"testing"

	"github.com/acpgate/acpgate/internal/testpg"
)

// TestMain stops the PostgreSQL server of these tests, if
// one was started, when the tests end.
func TestMain(m *testing.M) { os.Exit(testpg.Main(m)) }
