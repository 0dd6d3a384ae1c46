package throttle

import "testing"

func TestAThrottleLetsTheFirstWarningThroughAndCountsTheHeldOnes(t *testing.T) {
	var th Throttle
	if ok, held := th.Allow(); !ok || held != 0 {
		t.Fatalf("the first warning: %v, %d held back", ok, held)
	}
	for range 99 {
		if ok, _ := th.Allow(); ok {
			t.Fatal("a second warning within a minute was let through")
		}
	}
	// As if a minute had passed.
	th.last.Add(-int64(Every))
	if ok, held := th.Allow(); !ok || held != 99 {
		t.Fatalf("a minute later: %v, %d held back, want true and 99", ok, held)
	}
}
