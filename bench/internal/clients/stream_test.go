package clients

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/acpgate/acpgate/bench/internal/job"
	"github.com/acpgate/acpgate/bench/internal/proc"
)

func stamped(i int, sent int64, size int) string {
	s := fmt.Sprintf("%09d %019d ", i, sent)
	return s + strings.Repeat("x", size-len(s))
}

func TestVerifier(t *testing.T) {
	v := verifier{size: 64}
	for _, i := range []int{0, 1, 2} {
		if got := v.chunk(stamped(i, 1234567890123456789, 64)); got != 1234567890123456789 {
			t.Fatalf("send time %d", got)
		}
	}
	if v.bad != 0 || v.chunks != 3 || v.bytes != 192 {
		t.Fatalf("in order: %+v", v)
	}
	v.chunk(stamped(4, 1, 64)) // 3 is missing
	v.chunk(stamped(3, 1, 64)) // and arrives late
	v.chunk(stamped(5, 1, 63)) // short
	if v.bad != 3 || v.badMsg == "" {
		t.Fatalf("disorder not seen: %+v", v)
	}
}

func TestMergeCountsLoss(t *testing.T) {
	j := job.Job{N: 5, Size: 64}
	s := NewStream(j)
	s.Start = time.Now()
	for i := range 3 {
		s.chunk(stamped(i, time.Now().UnixNano(), 64))
	}
	r := Merge(j, "floor", time.Second, proc.CPUMark{}, []*Stream{s})
	if r.Lost != 2 || !r.Failed() {
		t.Fatalf("%+v", r)
	}
	s.broke = true
	if r := Merge(j, "peer", time.Second, proc.CPUMark{}, []*Stream{s}); r.Lost != 0 || !r.Broke {
		t.Fatalf("a broken peer's missing chunks are not loss: %+v", r)
	}
}
