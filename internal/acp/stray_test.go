package acp_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/acpgate/acpgate/internal/acp/jsonrpc"
	"github.com/acpgate/acpgate/internal/testutil"
)

func TestAFloodOfUpdatesForAnotherSessionLogsOneShortLine(t *testing.T) {
	var logs testutil.LockedBuffer
	cfg := agentConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	s := open(t, cfg)
	// 2,000 updates for sessions that are not this one, each id 10 KB.
	var script strings.Builder
	for i := range 2000 {
		id := fmt.Sprintf("other-%d-%s", i, strings.Repeat("x", 10<<10))
		fmt.Fprintf(&script, `stray {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"forged"}}}}`+"\n", id)
	}
	script.WriteString("chunk ok\nstop end_turn")
	r := prompt(t, s, script.String(), nil)
	if got := r.Outcome.GetText(); got != "ok" {
		t.Fatalf("the turn: %q, %v (the forged chunks must not be in it)", got, r.Error)
	}
	var warnings []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "ignoring a session/update") {
			warnings = append(warnings, line)
		}
	}
	if len(warnings) != 1 {
		t.Fatalf("%d warnings for 2,000 stray updates, want 1", len(warnings))
	}
	if n := len(warnings[0]); n > 1024 {
		t.Errorf("the warning is %d bytes long: the agent's 10 KB id was logged whole", n)
	}
}

func TestAnAgentPrintingThousandsOfNonJSONLinesLogsOneWarning(t *testing.T) {
	var logs testutil.LockedBuffer
	cfg := agentConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	s := open(t, cfg)
	script := strings.Repeat("stray Loading model shard...\n", 2000) + "chunk ok\nstop end_turn"
	r := prompt(t, s, script, nil)
	if got := r.Outcome.GetText(); got != "ok" {
		t.Fatalf("the turn: %q, %v", got, r.Error)
	}
	if s.Stats().SkippedLines != 2000 {
		t.Errorf("skipped %d lines, want all 2,000 counted", s.Stats().SkippedLines)
	}
	if n := strings.Count(logs.String(), "skipping a stdout line"); n != 1 {
		t.Errorf("%d warnings for 2,000 lines, want 1", n)
	}
}

func TestEveryStringOfTheAgentsInTheLogIsCutByOneRule(t *testing.T) {
	long := func(prefix string) string { return prefix + strings.Repeat("é", 4<<10) }
	line, id, session := long("line-"), long("id-"), long("session-")
	// Each on an agent process of its own: a process's warnings about its
	// stray output are spaced, and the first would hold the next back.
	for _, c := range []struct{ key, whole, stray string }{
		{"line", line, line},
		{"id", fmt.Sprintf("%q", id), fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"result":{}}`, id)},
		{"update_session", session, fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"forged"}}}}`, session)},
	} {
		var logs testutil.LockedBuffer
		cfg := agentConfig()
		cfg.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
		s := open(t, cfg)
		if r := prompt(t, s, "stray "+c.stray+"\nchunk ok\nstop end_turn", nil); r.Outcome.GetText() != "ok" {
			t.Fatalf("the turn: %v", r.Error)
		}
		var shown string
		for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			var rec map[string]any
			if err := json.Unmarshal([]byte(l), &rec); err != nil {
				t.Fatalf("log line %q: %v", l, err)
			}
			if v, ok := rec[c.key].(string); ok {
				shown = v
			}
		}
		want := jsonrpc.Clip(c.whole)
		if shown != want {
			t.Errorf("%s logged as %.80q… (%d bytes), want it cut as every other: %.80q… (%d bytes)", c.key, shown, len(shown), want, len(want))
		}
		if !strings.HasSuffix(want, fmt.Sprintf("… (%d bytes)", len(c.whole))) || len(want) > jsonrpc.MaxShownBytes+32 {
			t.Errorf("%s: the cut %.80q does not say how long the whole was, or is too long", c.key, want)
		}
	}
}
