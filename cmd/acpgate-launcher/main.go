// Command acpgate-launcher is the launcher acpgate starts its agents
// through (`acpgate-launcher sandbox-exec …`, the same as `acpgate
// sandbox-exec …`): it gives the agent a /proc of its own and, with
// sandbox.enabled, confines it, then executes the agent in its place.
//
// Why a second binary: every agent start runs the launcher once, before
// the agent, on the path of a cold turn. acpgate itself is a 40 MB program
// whose start-up (mapping it, initialising gRPC, OpenTelemetry, SQLite and
// the rest) took 6–8 ms of each start; this one links only the launcher.
// acpgate uses it when it lies beside the acpgate executable (the release,
// the container image and `make build` put it there) and runs itself as
// the launcher otherwise, as with `go run` or `go install`.
package main

import (
	"fmt"
	"os"

	"github.com/acpgate/acpgate/internal/sandbox"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != sandbox.Command {
		fmt.Fprintf(os.Stderr, "acpgate-launcher is started by acpgate, as: %s %s ...\n", os.Args[0], sandbox.Command)
		os.Exit(2)
	}
	os.Exit(sandbox.Main(os.Args[2:], os.Stderr))
}
