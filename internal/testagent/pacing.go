package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// parsePacing parses the directives that set a turn's pace: waits, floods
// of chunks, stalls, and ignoring session/cancel.
func parsePacing(name, rest string) (step, error) {
	switch name {
	case "sleep":
		v, err := intArgs(rest, 1)
		if err != nil {
			return nil, err
		}
		return func(t *turn) bool {
			t.wait(time.Duration(v[0]) * time.Millisecond)
			return false
		}, nil

	case "hang":
		return noArgs(rest, func(t *turn) bool {
			t.wait(-1)
			return false
		})

	case "ignore_cancel":
		return noArgs(rest, func(t *turn) bool {
			t.mu.Lock()
			t.ignoreCancel = true
			t.mu.Unlock()
			return false
		})

	case "flood":
		v, err := intArgs(rest, 2)
		if err != nil {
			return nil, err
		}
		return func(t *turn) bool {
			line, _ := json.Marshal(outRequest{JSONRPC: "2.0", Method: "session/update", Params: obj{
				"sessionId": t.sessionID,
				"update":    textChunk("agent_message_chunk", strings.Repeat("x", v[1]), "flood"),
			}})
			t.a.out.writeRepeated(line, v[0])
			return false
		}, nil

	case "flood_timed":
		f, err := fields(rest, 2, 3)
		if err != nil {
			return nil, err
		}
		v, err := ints(f)
		if err != nil {
			return nil, err
		}
		for _, x := range v {
			if x < 0 {
				return nil, fmt.Errorf("argument %d is negative", x)
			}
		}
		if v[1] < stampLen {
			return nil, fmt.Errorf("SIZE %d is shorter than the %d-byte stamp", v[1], stampLen)
		}
		rate := 0
		if len(v) == 3 {
			rate = v[2]
		}
		return func(t *turn) bool {
			floodTimed(t, v[0], v[1], rate)
			return false
		}, nil

	case "stall":
		return noArgs(rest, func(t *turn) bool {
			t.a.stall()
			return false
		})
	}
	return nil, errOtherDirective
}
