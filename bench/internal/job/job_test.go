package job

import "testing"

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
