package job

import (
	"slices"
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	var lat []int64
	for i := range 1000 {
		lat = append(lat, int64(1000-i))
	}
	l := Summarize(lat)
	if l.P50 != 501 || l.P99 != 991 || l.Max != 1000 || l.Count != 1000 {
		t.Fatalf("%+v", l)
	}
}

func TestTheScheduleLatencyCountsWhatAChunkWaitedInTheAgentBeforeItsStamp(t *testing.T) {
	ms := int64(time.Millisecond)
	// 100 chunks/s: due every 10 ms. The first chunk went out 1 ms after
	// the agent's start (which the client does not see), the third 4 ms
	// late; each arrived 1 ms after its stamp.
	sent := []int64{1000 * ms, 1010 * ms, 1023 * ms, 1030 * ms}
	arrived := []int64{1001 * ms, 1011 * ms, 1024 * ms, 1031 * ms}
	got := ScheduleLatency(sent, arrived, 100)
	want := []int64{1 * ms, 1 * ms, 4 * ms, 1 * ms}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v: the chunk sent 3 ms behind the others' pace counts 3 ms more", got, want)
	}
	// A first chunk that was itself late: the others, on time, show it.
	sent = []int64{1005 * ms, 1010 * ms, 1020 * ms}
	arrived = []int64{1006 * ms, 1011 * ms, 1021 * ms}
	if got, want := ScheduleLatency(sent, arrived, 100), []int64{6 * ms, 1 * ms, 1 * ms}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if ScheduleLatency(sent, arrived, 0) != nil {
		t.Error("an unpaced turn has no schedule")
	}
}
