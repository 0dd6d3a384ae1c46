package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/acpgate/acpgate/bench/internal/job"
	"github.com/acpgate/acpgate/bench/internal/proc"
)

// verifier checks a turn's chunks as they arrive: each chunk's text starts
// with its index, so a lost or reordered chunk is seen at once.
type verifier struct {
	size   int
	next   int
	chunks int64
	bytes  int64
	bad    int64 // chunks at the wrong position, or malformed
	badMsg string
}

// chunk checks one chunk's text and returns its send time (Unix ns).
func (v *verifier) chunk(text string) (sent int64) {
	v.chunks++
	v.bytes += int64(len(text))
	idx, ok := parseDigits(text, 0, 9)
	if len(text) != v.size || !ok || int(idx) != v.next {
		v.bad++
		if v.badMsg == "" {
			v.badMsg = fmt.Sprintf("chunk %d: got %d bytes starting %.40q", v.next, len(text), text)
		}
	}
	v.next++
	if len(text) >= 29 {
		sent, _ = parseDigits(text, 10, 29)
	}
	return sent
}

func parseDigits(s string, from, to int) (int64, bool) {
	if len(s) < to {
		return 0, false
	}
	var n int64
	for i := from; i < to; i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// stream is one turn's measurements, in the client's clock.
type stream struct {
	v        verifier
	t0       time.Time // the call, or the spawn
	startup  time.Time
	prompted time.Time
	first    time.Time
	last     time.Time
	end      time.Time
	sent     []int64 // per chunk: the agent's send time (Unix ns), when recording latency
	arrived  []int64 // per chunk: arrival time (Unix ns), when recording latency
	relayed  []int64 // per chunk: the gateway's event time (Unix ns), gateway clients only
	latency  bool
	gwPID    int
	cpu0     proc.CPUMark // at the prompt
	cpu1     proc.CPUMark // at the ending
	err      error
	broke    bool
	turnID   string // the gateway's turn
	events   int64  // chunk events (several chunks each when coalesced)
}

func newStream(j job.Job) *stream {
	s := &stream{v: verifier{size: j.Size}, latency: j.Latency, gwPID: j.GatewayPID}
	if j.Latency {
		s.sent = make([]int64, 0, j.N)
		s.arrived = make([]int64, 0, j.N)
		if j.Client != "floor" && j.Client != "floor-sdk" && j.Client != "peer" && j.Client != job.FloorLoaded {
			s.relayed = make([]int64, 0, j.N)
		}
	}
	return s
}

// prompt marks the start of the turn proper.
func (s *stream) prompt() {
	s.prompted = time.Now()
	s.cpu0 = proc.MarkCPU(s.gwPID)
}

// ended marks the turn's ending.
func (s *stream) ended() {
	s.end = time.Now()
	s.cpu1 = proc.MarkCPU(s.gwPID)
}

// chunk records one arriving chunk.
func (s *stream) chunk(text string) {
	now := time.Now()
	if s.v.chunks == 0 {
		s.first = now
	}
	s.last = now
	sent := s.v.chunk(text)
	if s.latency {
		s.sent = append(s.sent, sent)
		s.arrived = append(s.arrived, now.UnixNano())
	}
}

// merge folds the streams of a job into its Result; cpu is the CPU used by
// the whole job.
func merge(j job.Job, client string, wall time.Duration, cpu proc.CPUMark, ss []*stream) job.Result {
	r := job.Result{Client: client, Streams: len(ss), Wall: int64(wall), CPU: int64(cpu.Client), GatewayCPU: int64(cpu.Gateway)}
	var lat, hop1, hop2 []int64
	for _, s := range ss {
		r.Chunks += s.v.chunks
		r.Bytes += s.v.bytes
		r.OutOfOrder += s.v.bad
		r.Events += s.events
		if s.broke {
			r.Broke = true
		}
		if s.err != nil && r.Err == "" {
			r.Err = s.err.Error()
		}
		if !s.broke && s.v.chunks < int64(j.N) {
			r.Lost += int64(j.N) - s.v.chunks
		}
		if s.v.badMsg != "" && r.Err == "" {
			r.Err = s.v.badMsg
		}
		for i := range s.sent {
			lat = append(lat, s.arrived[i]-s.sent[i])
		}
		for i := range s.relayed {
			hop1 = append(hop1, s.relayed[i]-s.sent[i])
			hop2 = append(hop2, s.arrived[i]-s.relayed[i])
		}
	}
	if len(ss) == 1 {
		s := ss[0]
		r.TurnID = s.turnID
		since := func(t time.Time) int64 {
			if t.IsZero() {
				return 0
			}
			return int64(t.Sub(s.t0))
		}
		r.Startup = since(s.startup)
		r.First = since(s.first)
		r.End = since(s.end)
		if !s.end.IsZero() && !s.prompted.IsZero() {
			r.Turn = int64(s.end.Sub(s.prompted))
		}
		if !s.first.IsZero() {
			r.Stream = int64(s.last.Sub(s.first))
		}
		if !s.end.IsZero() && !s.prompted.IsZero() {
			r.CPU = int64(s.cpu1.Client - s.cpu0.Client)
			r.GatewayCPU = int64(s.cpu1.Gateway - s.cpu0.Gateway)
		}
	}
	r.Lat = job.Summarize(lat)
	r.ToGateway = job.Summarize(hop1)
	r.FromGateway = job.Summarize(hop2)
	return r
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
