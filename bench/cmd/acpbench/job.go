package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/acpgate/acpgate/bench/internal/proc"
)

// Job is one measurement, run by `acpbench client` in a process of its own
// so that no measurement inherits another's heap.
type Job struct {
	Client  string `json:"client"`            // floor | peer | gateway
	Agent   string `json:"agent,omitempty"`   // the test agent's binary (floor, peer)
	Addr    string `json:"addr,omitempty"`    // the gateway's address (gateway)
	N       int    `json:"n"`                 // chunks per turn
	Size    int    `json:"size"`              // bytes of text per chunk
	Rate    int    `json:"rate,omitempty"`    // the agent's pace in chunks/s; 0: as fast as it can
	Streams int    `json:"streams,omitempty"` // concurrent turns, each with its own agent; 0 means 1
	Latency bool   `json:"latency,omitempty"` // record arrival minus send for every chunk
	// Naive runs the naive agent (naive.go) instead of the test agent: the
	// floor spawns it, the gateway clients prompt the gateway's naiveAgent.
	Naive bool `json:"naive,omitempty"`
	// StartAt, when set (Unix ns), is when the turn starts: the client
	// connects first, then waits for it, so that the turns of many client
	// processes start together.
	StartAt int64 `json:"start_at,omitempty"`
	// ReadRate, for the gateway clients, is the most chunks/s the client
	// reads (0: as fast as it can): a slow client, to see whether
	// coalescing follows its pace.
	ReadRate int `json:"read_rate,omitempty"`
	// GatewayPID is acpgate's pid, to read its CPU time (gateway).
	GatewayPID int `json:"gateway_pid,omitempty"`
	// TurnID is, for watch, the finished turn to replay.
	TurnID string `json:"turn_id,omitempty"`
	// SessionID is, for the gateway clients, an open session to prompt
	// instead of a one-shot turn of the flood agent.
	SessionID string `json:"session_id,omitempty"`
	// Load is, for floor-loaded, the CPU in cores that each of a set of
	// busy-loop processes burns during the turn: the gateway's and its
	// client's share of the machine in the same run, so that the floor
	// competes for the CPU as the gateway's chunks do.
	Load    []float64     `json:"load,omitempty"`
	Timeout time.Duration `json:"timeout"`
}

// script is the test agent's script for the job's turn.
func (j Job) script() string {
	if j.Rate > 0 {
		return fmt.Sprintf("flood_timed %d %d %d\n", j.N, j.Size, j.Rate)
	}
	return fmt.Sprintf("flood_timed %d %d\n", j.N, j.Size)
}

func (j Job) streams() int { return max(1, j.Streams) }

// Result is what one job measured. Durations are nanoseconds.
type Result struct {
	Client string `json:"client"`
	// Err is set when the job failed; Broke when the failure was the
	// client's connection giving up (the peer's notification queue).
	Err   string `json:"err,omitempty"`
	Broke bool   `json:"broke,omitempty"`

	// TurnID is the gateway's id of the (single) turn.
	TurnID string `json:"turn_id,omitempty"`
	// Events counts the chunk events received: fewer than Chunks when the
	// gateway coalesced chunks.
	Events int64 `json:"events,omitempty"`

	Streams    int   `json:"streams"`
	Chunks     int64 `json:"chunks"`       // chunks received, all streams
	Bytes      int64 `json:"bytes"`        // text bytes received
	Lost       int64 `json:"lost"`         // chunks expected but not received (not counted when Broke)
	OutOfOrder int64 `json:"out_of_order"` // chunks received at the wrong position

	// One stream, from the call (gateway) or the spawn (floor, peer).
	Startup int64 `json:"startup,omitempty"` // spawn → initialize answered (floor, peer)
	First   int64 `json:"first,omitempty"`   // → first chunk
	End     int64 `json:"end,omitempty"`     // → the turn's ending received
	Turn    int64 `json:"turn,omitempty"`    // prompt sent (gateway: started event) → ending
	Stream  int64 `json:"stream,omitempty"`  // first chunk → last chunk
	Wall    int64 `json:"wall"`              // the whole job, all streams
	// CPU time over the turn (one stream) or the job (several): the client
	// process's, and acpgate's own (agents excluded) for gateway jobs.
	CPU        int64 `json:"cpu"`
	GatewayCPU int64 `json:"gateway_cpu,omitempty"`

	// Foreign is the CPU time other processes on the machine used during
	// the measurement (set by the driver).
	Foreign int64 `json:"foreign"`

	Lat *Latency `json:"lat,omitempty"`
	// Load is the Job's Load, for floor-loaded.
	Load []float64 `json:"load,omitempty"`
	// ToGateway and FromGateway split a gateway client's latency at the
	// event's time, which the gateway stamps as it journals the event:
	// agent → gateway (reading, decoding, translating, queueing) and
	// gateway → client (the stream's read of the journal, HTTP/2, the
	// client's decoding).
	ToGateway   *Latency `json:"to_gateway,omitempty"`
	FromGateway *Latency `json:"from_gateway,omitempty"`
}

// Latency summarises arrival minus send over a turn's chunks.
type Latency struct {
	Count int   `json:"count"`
	P50   int64 `json:"p50"`
	P99   int64 `json:"p99"`
	Max   int64 `json:"max"`
}

func summarize(lat []int64) *Latency {
	if len(lat) == 0 {
		return nil
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	q := func(p float64) int64 { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return &Latency{Count: len(s), P50: q(0.50), P99: q(0.99), Max: s[len(s)-1]}
}

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

func newStream(j Job) *stream {
	s := &stream{v: verifier{size: j.Size}, latency: j.Latency, gwPID: j.GatewayPID}
	if j.Latency {
		s.sent = make([]int64, 0, j.N)
		s.arrived = make([]int64, 0, j.N)
		if j.Client != "floor" && j.Client != "floor-sdk" && j.Client != "peer" && j.Client != floorLoaded {
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
func merge(j Job, client string, wall time.Duration, cpu proc.CPUMark, ss []*stream) Result {
	r := Result{Client: client, Streams: len(ss), Wall: int64(wall), CPU: int64(cpu.Client), GatewayCPU: int64(cpu.Gateway)}
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
	r.Lat = summarize(lat)
	r.ToGateway = summarize(hop1)
	r.FromGateway = summarize(hop2)
	return r
}

func (r Result) failed() bool { return r.Err != "" || r.Lost > 0 || r.OutOfOrder > 0 }

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
