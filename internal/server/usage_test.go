package server_test

import (
	"context"
	"testing"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

func TestUsageAndCostReachTheStreamTheOutcomeAndTheSessionsRunningTotal(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	s, err := h.client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if u := s.GetUsage(); u != nil {
		t.Errorf("a session whose agent reported nothing shows usage %v", u)
	}
	turns := []struct {
		script      string
		used        int64
		cost        float64
		in, out     int64
		sumIn, sumT int64
	}{
		{"usage 1000 100 0.25 USD\nchunk a\nstop_usage end_turn 10 5", 100, 0.25, 10, 5, 10, 15},
		{"usage 1000 300 0.75 USD\nchunk b\nstop_usage end_turn 20 7", 300, 0.75, 20, 7, 30, 42},
	}
	for i, c := range turns {
		events := collectOK(t, h, s.GetId(), c.script)
		var streamed *acpgatev1.Usage
		for _, e := range events {
			if u := e.GetUsage(); u != nil {
				streamed = u
			}
		}
		if streamed.GetContextSize() != 1000 || streamed.GetContextUsed() != c.used || streamed.GetCostAmount() != c.cost || streamed.GetCostCurrency() != "USD" {
			t.Errorf("turn %d: the usage event is %v", i, streamed)
		}
		u := last(events).GetOutcome().GetUsage()
		if u.GetInputTokens() != c.in || u.GetOutputTokens() != c.out || u.GetContextUsed() != c.used || u.GetCostAmount() != c.cost {
			t.Errorf("turn %d: the outcome's usage is %v", i, u)
		}
		got, err := h.client.GetSession(ctx, &acpgatev1.GetSessionRequest{SessionId: s.GetId()})
		if err != nil {
			t.Fatal(err)
		}
		su := got.GetUsage()
		if su.GetInputTokens() != c.sumIn || su.GetTotalTokens() != c.sumT || su.GetContextUsed() != c.used || su.GetCostAmount() != c.cost || su.GetCostCurrency() != "USD" {
			t.Errorf("after turn %d the session's usage is %v", i, su)
		}
		if su.ThoughtTokens != nil {
			t.Errorf("a count no turn reported must stay absent: %v", su)
		}
	}
}
