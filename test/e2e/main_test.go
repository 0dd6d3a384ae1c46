package e2e

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/acpgate/acpgate/internal/testpg"
)

// TestMain checks that the tests leak no goroutine, once the PostgreSQL
// server of the tests that use one has stopped. Started by a test as the
// wrapper denyingSetpriority names, the binary runs no test.
func TestMain(m *testing.M) {
	if os.Getenv(denySetpriorityEnv) == "1" {
		execDenyingSetpriority()
	}
	goleak.VerifyTestMain(testpg.Wrap(m))
}
