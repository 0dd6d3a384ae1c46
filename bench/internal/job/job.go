// Package job is what passes between the benchmark's driver and a client
// process: the Job one `acpbench client` runs (which client, which agent or
// gateway, what flood or pace) and the Result it prints as JSON, with the
// measures every section and the report read from a Result, and the labels
// that name a client's results (on the naive agent, on the baseline's
// gateway). Each measurement runs in a process of its own so that none
// inherits another's heap; this package is the protocol between the two,
// and depends on nothing else of the harness.
package job

import (
	"fmt"
	"time"
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
	// Naive runs the naive agent (`acpbench agent`) instead of the test agent: the
	// floor spawns it, the gateway clients prompt the gateway's NaiveAgent.
	Naive bool `json:"naive,omitempty"`
	// StartAt, when set (Unix ns), is when the turn starts: the client
	// connects first, then waits for it, so that the turns of many client
	// processes start together.
	StartAt int64 `json:"start_at,omitempty"`
	// ReadRate, for the gateway clients, is the most chunks/s the client
	// reads (0: as fast as it can): a slow client, to see whether
	// coalescing follows its pace.
	ReadRate int `json:"read_rate,omitempty"`
	// Launcher is, for floor-contained, acpgate's launcher
	// (acpgate-launcher), through which that client starts its agent.
	Launcher string `json:"launcher,omitempty"`
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

// Script is the test agent's script for the job's turn.
func (j Job) Script() string {
	if j.Rate > 0 {
		return fmt.Sprintf("flood_timed %d %d %d\n", j.N, j.Size, j.Rate)
	}
	return fmt.Sprintf("flood_timed %d %d\n", j.N, j.Size)
}

// NumStreams is the job's concurrent turns: Streams, at least 1.
func (j Job) NumStreams() int { return max(1, j.Streams) }
