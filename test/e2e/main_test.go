package e2e

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/acpgate/acpgate/internal/testpg"
)

// TestMain checks that the tests leak no goroutine, once the PostgreSQL
// server of the tests that use one has stopped.
func TestMain(m *testing.M) { goleak.VerifyTestMain(testpg.Wrap(m)) }
