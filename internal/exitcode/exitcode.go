// Package exitcode is the one table of the acpgate command's exit codes:
// what a finished command tells its caller. A prompt (or a watch) exits
// with the code of its terminal event; a call the gateway rejected with a
// non-OK status exits with the status's code class. docs/cli.md shows the
// table as Table renders it, the examples in examples/ map each class to the
// same code, and the end-to-end tests expect these codes: all tested
// against this package.
package exitcode

import (
	"fmt"
	"strings"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/outcome"
)

// Exit codes of the client subcommands; see this file's documentation and
// Table.
const (
	OK                 = 0
	Usage              = 2
	Transport          = 3
	Protocol           = 4
	Harness            = 5
	PolicyRefused      = 6
	Cancelled          = 7
	AuthRequired       = 8
	Capability         = 9
	StaleTarget        = 10
	GatewayFailure     = 11
	InvalidArgument    = 64
	Rejected           = 65
	GatewayUnavailable = 69
)

// table is the exit-code table, in order; Table renders it.
var table = []struct {
	code    int
	meaning string
}{
	{OK, "Success. For `prompt` and `watch`: the turn completed (`outcome`, `end_turn`); for `prompt --detach`: the turn started."},
	{Usage, "Usage error: bad flags or arguments."},
	{Transport, "`error.transport`: the channel to the agent broke."},
	{Protocol, "`error.protocol`: the agent broke the ACP wire contract (also: the gateway ended the stream without a terminal event)."},
	{Harness, "`error.harness`: the agent reported a failure (neither cancelled nor auth_required); also an error class this client does not know."},
	{PolicyRefused, "`error.policy_refused`: the agent refused the prompt."},
	{Cancelled, "`error.harness` with `cancelled`: the turn was cancelled (also: the command was interrupted before the gateway reported an ending)."},
	{AuthRequired, "`error.harness` with `auth_required`: the agent needs credentials configured for the gateway."},
	{Capability, "`error.capability_not_supported`: the request needs a capability the agent did not advertise."},
	{StaleTarget, "`error.stale_target`: the request's target no longer applies."},
	{GatewayFailure, "`error.gateway`: the gateway itself failed the turn (it could not write the turn's journal)."},
	{InvalidArgument, "gRPC status `INVALID_ARGUMENT`: the gateway rejected the request as malformed."},
	{Rejected, "gRPC status `NOT_FOUND`, `FAILED_PRECONDITION`, `RESOURCE_EXHAUSTED` or any other non-OK status not listed here: no turn ran."},
	{GatewayUnavailable, "gRPC status `UNAVAILABLE` or `DEADLINE_EXCEEDED`: the gateway or the agent could not be reached, or the gateway is draining."},
}

// Table renders the client's exit codes as a Markdown table.
func Table() string {
	var b strings.Builder
	b.WriteString("| exit code | meaning |\n|---|---|\n")
	for _, e := range table {
		fmt.Fprintf(&b, "| %d | %s |\n", e.code, e.meaning)
	}
	return b.String()
}

// ClassExits is the exit code of each HarnessError class, named as
// outcome.Class names it. Classify refines harness by its cancelled and
// auth_required flags.
var ClassExits = map[string]int{
	"transport":                Transport,
	"protocol":                 Protocol,
	"harness":                  Harness,
	"policy_refused":           PolicyRefused,
	"capability_not_supported": Capability,
	"stale_target":             StaleTarget,
	"gateway":                  GatewayFailure,
}

// Classify names a HarnessError's class and its exit code. An error with no
// class set is labelled "error"; it, and a class missing from ClassExits,
// exits as harness.
func Classify(e *acpgatev1.HarnessError) (label string, code int) {
	if e.GetKind() == nil {
		return "error", Harness
	}
	label = outcome.Class(e)
	switch h := e.GetHarness(); {
	case h.GetCancelled():
		return label, Cancelled
	case h.GetAuthRequired():
		return label, AuthRequired
	}
	if code, ok := ClassExits[label]; ok {
		return label, code
	}
	return label, Harness
}
