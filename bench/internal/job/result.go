package job

import (
	"slices"
	"time"
)

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
	// Scheduled is, for one paced turn (Job.Rate), each chunk's arrival
	// less the time the agent meant to send it (see ScheduleLatency).
	// Unlike Lat it counts the time a chunk waited in the agent before
	// its stamp: on a busy CPU, or with the agent below the gateway's
	// priority, a lower Lat may only have moved the wait there.
	Scheduled *Latency `json:"scheduled,omitempty"`
}

// ScheduleLatency is, for each of a paced turn's chunks, its arrival less
// the time the agent meant to send it: chunk i is due at the first chunk's
// send time plus i / rate, moved by the least lateness of any chunk's send
// (the agent's start, which the client does not see, is at most that much
// before the first stamp). nil without a rate or chunks.
func ScheduleLatency(sent, arrived []int64, rate int) []int64 {
	if rate <= 0 || len(sent) == 0 || len(arrived) != len(sent) {
		return nil
	}
	due := func(i int) int64 { return sent[0] + int64(i)*int64(time.Second)/int64(rate) }
	least := int64(0)
	for i, s := range sent {
		least = min(least, s-due(i))
	}
	out := make([]int64, len(sent))
	for i, a := range arrived {
		out[i] = a - (due(i) + least)
	}
	return out
}

// Latency summarises arrival minus send over a turn's chunks.
type Latency struct {
	Count int   `json:"count"`
	P50   int64 `json:"p50"`
	P99   int64 `json:"p99"`
	Max   int64 `json:"max"`
}

// Summarize is the count, p50, p99 and largest of latencies (ns); nil
// when there are none.
func Summarize(lat []int64) *Latency {
	if len(lat) == 0 {
		return nil
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	q := func(p float64) int64 { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return &Latency{Count: len(s), P50: q(0.50), P99: q(0.99), Max: s[len(s)-1]}
}

// Failed says whether the job erred, lost chunks or received them out of
// order.
func (r Result) Failed() bool { return r.Err != "" || r.Lost > 0 || r.OutOfOrder > 0 }

// ForeignCores is the CPU other processes used during the measurement, in
// cores on average over its wall time.
func (r Result) ForeignCores() float64 {
	if r.Wall <= 0 {
		return 0
	}
	return float64(r.Foreign) / float64(r.Wall)
}

// Rate is a single-stream result's chunks per second over its turn.
func (r Result) Rate() float64 {
	if r.Turn <= 0 {
		return 0
	}
	return float64(r.Chunks) / time.Duration(r.Turn).Seconds()
}

// MBps is a single-stream result's text in MB (10⁶ bytes) per second over
// its turn.
func (r Result) MBps() float64 {
	if r.Turn <= 0 {
		return 0
	}
	return float64(r.Bytes) / 1e6 / time.Duration(r.Turn).Seconds()
}

// StreamRate is the chunk rate between the first and the last chunk,
// without the turn's ending.
func (r Result) StreamRate() float64 {
	if r.Stream <= 0 {
		return 0
	}
	return float64(r.Chunks-1) / time.Duration(r.Stream).Seconds()
}

// Aggregate is all streams' chunks per second over the whole job.
func (r Result) Aggregate() float64 {
	if r.Wall <= 0 {
		return 0
	}
	return float64(r.Chunks) / time.Duration(r.Wall).Seconds()
}

// OK says whether the job completed: neither broke nor failed.
func (r Result) OK() bool { return !r.Broke && !r.Failed() }
