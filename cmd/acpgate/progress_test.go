package main

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// What the status line says of an agent's start comes from ListAgents:
// a failed last start-up first (the likeliest reason for a long silence),
// then a ready warm process, then a cold start with the last one's length.
func TestTheStartingLineSaysWhatStartingTheAgentWillTake(t *testing.T) {
	for _, c := range []struct {
		agent *acpgatev1.Agent
		want  string
	}{
		{&acpgatev1.Agent{}, "cold start"},
		{&acpgatev1.Agent{LastStartupDuration: durationpb.New(3400 * time.Millisecond)}, "cold start; the last took 3.4s"},
		{&acpgatev1.Agent{WarmTarget: 2, WarmReady: 1, LastStartupDuration: durationpb.New(time.Second)}, "warm: a started process is ready"},
		{&acpgatev1.Agent{WarmTarget: 2, LastStartupFailure: &acpgatev1.StartupFailure{Message: "exec: no such file"}},
			"its last start-up failed: exec: no such file"},
	} {
		if got := startDetail(c.agent); got != c.want {
			t.Errorf("startDetail(%v) = %q, want %q", c.agent, got, c.want)
		}
	}
}

// A line wider than the terminal would wrap, and \r would then rewrite
// only its last row: it is cut to fit.
func TestTheStatusLineIsCutToTheTerminalsWidth(t *testing.T) {
	if got := fitColumns("· starting agent gemini… 3s", 12); got != "· starting …" {
		t.Errorf("fitColumns = %q", got)
	}
	if got := fitColumns("short", 12); got != "short" {
		t.Errorf("fitColumns = %q", got)
	}
}
