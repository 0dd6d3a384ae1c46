package main

// The client's exit codes: what a finished command tells its caller. A prompt
// (or a watch) exits with the code of its terminal event; a call the gateway
// rejected with a non-OK status exits with the status's code class. exitCodes
// is the one table: docs/cli.md shows it as exitCodeTable renders it, and the
// examples in examples/ map each class to the same code (both tested).

import (
	"fmt"
	"strings"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/outcome"
)

// Exit codes of the client subcommands; see this file's documentation and
// exitCodeTable.
const (
	exitOK                 = 0
	exitUsage              = 2
	exitTransport          = 3
	exitProtocol           = 4
	exitHarness            = 5
	exitPolicyRefused      = 6
	exitCancelled          = 7
	exitAuthRequired       = 8
	exitCapability         = 9
	exitStaleTarget        = 10
	exitGatewayFailure     = 11
	exitInvalidArgument    = 64
	exitRejected           = 65
	exitGatewayUnavailable = 69
)

// exitCodes is the exit-code table, in order; exitCodeTable renders it.
var exitCodes = []struct {
	code    int
	meaning string
}{
	{exitOK, "Success. For `prompt` and `watch`: the turn completed (`outcome`, `end_turn`); for `prompt --detach`: the turn started."},
	{exitUsage, "Usage error: bad flags or arguments."},
	{exitTransport, "`error.transport`: the channel to the agent broke."},
	{exitProtocol, "`error.protocol`: the agent broke the ACP wire contract (also: the gateway ended the stream without a terminal event)."},
	{exitHarness, "`error.harness`: the agent reported a failure (neither cancelled nor auth_required); also an error class this client does not know."},
	{exitPolicyRefused, "`error.policy_refused`: the agent refused the prompt."},
	{exitCancelled, "`error.harness` with `cancelled`: the turn was cancelled (also: the command was interrupted before the gateway reported an ending)."},
	{exitAuthRequired, "`error.harness` with `auth_required`: the agent needs credentials configured for the gateway."},
	{exitCapability, "`error.capability_not_supported`: the request needs a capability the agent did not advertise."},
	{exitStaleTarget, "`error.stale_target`: the request's target no longer applies."},
	{exitGatewayFailure, "`error.gateway`: the gateway itself failed the turn (it could not write the turn's journal)."},
	{exitInvalidArgument, "gRPC status `INVALID_ARGUMENT`: the gateway rejected the request as malformed."},
	{exitRejected, "gRPC status `NOT_FOUND`, `FAILED_PRECONDITION`, `RESOURCE_EXHAUSTED` or any other non-OK status not listed here: no turn ran."},
	{exitGatewayUnavailable, "gRPC status `UNAVAILABLE` or `DEADLINE_EXCEEDED`: the gateway or the agent could not be reached, or the gateway is draining."},
}

// exitCodeTable renders the client's exit codes as a Markdown table.
func exitCodeTable() string {
	var b strings.Builder
	b.WriteString("| exit code | meaning |\n|---|---|\n")
	for _, e := range exitCodes {
		fmt.Fprintf(&b, "| %d | %s |\n", e.code, e.meaning)
	}
	return b.String()
}

// classExits is the exit code of each HarnessError class, named as
// outcome.Class names it. classify refines harness by its cancelled and
// auth_required flags.
var classExits = map[string]int{
	"transport":                exitTransport,
	"protocol":                 exitProtocol,
	"harness":                  exitHarness,
	"policy_refused":           exitPolicyRefused,
	"capability_not_supported": exitCapability,
	"stale_target":             exitStaleTarget,
	"gateway":                  exitGatewayFailure,
}

// classify names a HarnessError's class and its exit code. An error with no
// class set is labelled "error"; it, and a class missing from classExits,
// exits as harness.
func classify(e *acpgatev1.HarnessError) (label string, code int) {
	if e.GetKind() == nil {
		return "error", exitHarness
	}
	label = outcome.Class(e)
	switch h := e.GetHarness(); {
	case h.GetCancelled():
		return label, exitCancelled
	case h.GetAuthRequired():
		return label, exitAuthRequired
	}
	if code, ok := classExits[label]; ok {
		return label, code
	}
	return label, exitHarness
}
