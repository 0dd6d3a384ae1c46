package sessions

import "testing"

func TestASessionsCumulativeCostIsCountedOnceAcrossItsTurns(t *testing.T) {
	var l Live
	for i, c := range []struct{ total, want float64 }{
		{0.5, 0.5}, // the first turn's report is all new
		{0.75, 0.25},
		{0.75, 0},  // a turn that cost nothing
		{0.1, 0.1}, // the agent's count restarted
	} {
		if got := l.CostAdded(c.total); got != c.want {
			t.Errorf("turn %d reporting %v: added %v, want %v", i+1, c.total, got, c.want)
		}
	}
}
