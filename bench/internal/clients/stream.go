// Package clients holds the measured ends of a benchmark turn: the clients
// that `acpbench client` runs for a job (the floor, which decodes the agent's
// stdout by hand; the peer, acp-go-sdk's client-side connection; the gateway
// clients, over gRPC; the WatchTurn replay), the naive agent that
// `acpbench agent` runs, and the busy loops that load the floor. Every
// client checks each chunk as it arrives (its index, its size) and times it
// with the agent's send stamp, in a Stream that Merge folds into the job's
// Result. They run in processes of their own, apart from the driver, so
// that no measurement inherits another's heap.
package clients

import (
	"context"
	"fmt"
	"sync"
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

// Stream is one turn's measurements, in the client's clock.
type Stream struct {
	v        verifier
	Start    time.Time // the call, or the spawn
	startup  time.Time
	prompted time.Time
	first    time.Time
	last     time.Time
	end      time.Time
	Sent     []int64 // per chunk: the agent's send time (Unix ns), when recording latency
	Arrived  []int64 // per chunk: arrival time (Unix ns), when recording latency
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

// NewStream is a turn's measurements for j, ready for its first chunk.
func NewStream(j job.Job) *Stream {
	s := &Stream{v: verifier{size: j.Size}, latency: j.Latency, gwPID: j.GatewayPID}
	if j.Latency {
		s.Sent = make([]int64, 0, j.N)
		s.Arrived = make([]int64, 0, j.N)
		if j.Client != "floor" && j.Client != "floor-sdk" && j.Client != "peer" && j.Client != job.FloorLoaded {
			s.relayed = make([]int64, 0, j.N)
		}
	}
	return s
}

// prompt marks the start of the turn proper.
func (s *Stream) prompt() {
	s.prompted = time.Now()
	s.cpu0 = proc.MarkCPU(s.gwPID)
}

// ended marks the turn's ending.
func (s *Stream) ended() {
	s.end = time.Now()
	s.cpu1 = proc.MarkCPU(s.gwPID)
}

// chunk records one arriving chunk.
func (s *Stream) chunk(text string) {
	now := time.Now()
	if s.v.chunks == 0 {
		s.first = now
	}
	s.last = now
	sent := s.v.chunk(text)
	if s.latency {
		s.Sent = append(s.Sent, sent)
		s.Arrived = append(s.Arrived, now.UnixNano())
	}
}

// Merge folds the streams of a job into its Result; cpu is the CPU used by
// the whole job.
func Merge(j job.Job, client string, wall time.Duration, cpu proc.CPUMark, ss []*Stream) job.Result {
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
		for i := range s.Sent {
			lat = append(lat, s.Arrived[i]-s.Sent[i])
		}
		for i := range s.relayed {
			hop1 = append(hop1, s.relayed[i]-s.Sent[i])
			hop2 = append(hop2, s.Arrived[i]-s.relayed[i])
		}
	}
	if len(ss) == 1 {
		s := ss[0]
		r.TurnID = s.turnID
		r.Scheduled = job.Summarize(job.ScheduleLatency(s.Sent, s.Arrived, j.Rate))
		since := func(t time.Time) int64 {
			if t.IsZero() {
				return 0
			}
			return int64(t.Sub(s.Start))
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

// runStreams runs the job's turns concurrently, each on its own stream.
func runStreams(ctx context.Context, j job.Job, turn func(context.Context, job.Job, *Stream)) job.Result {
	ss := make([]*Stream, j.NumStreams())
	for i := range ss {
		ss[i] = NewStream(j)
	}
	cpu0 := proc.MarkCPU(j.GatewayPID)
	start := time.Now()
	var wg sync.WaitGroup
	for _, s := range ss {
		wg.Go(func() { turn(ctx, j, s) })
	}
	wg.Wait()
	wall := time.Since(start)
	cpu1 := proc.MarkCPU(j.GatewayPID)
	return Merge(j, j.Client, wall, proc.CPUMark{Client: cpu1.Client - cpu0.Client, Gateway: cpu1.Gateway - cpu0.Gateway}, ss)
}

// waitStart waits for the job's StartAt, if it has one.
func waitStart(j job.Job) {
	if j.StartAt > 0 {
		time.Sleep(time.Until(time.Unix(0, j.StartAt)))
	}
}
