package main

import (
	"bufio"
	"encoding/json"
	"time"
)

// sendRequests writes n requests of the agent's own, each with params, in
// one buffered burst, and returns without waiting for any answer:
// the way a hostile or broken agent floods its client. Each request is
// registered as pending with a buffered channel nobody reads, so that an
// answer is taken as expected (not reported as unmatched on stderr) and then
// dropped.
func (a *agent) sendRequests(method string, n int, params any) {
	ids := make([]int64, n)
	a.mu.Lock()
	for i := range ids {
		ids[i] = a.nextID
		a.nextID++
		a.pending[ids[i]] = make(chan *message, 1)
	}
	a.mu.Unlock()

	a.out.burst(func(w *bufio.Writer) {
		for i := range ids {
			line, err := json.Marshal(outRequest{JSONRPC: "2.0", ID: &ids[i], Method: method, Params: params})
			if err != nil {
				panic("testagent: marshal a flood request: " + err.Error())
			}
			_, _ = w.Write(line)
			_ = w.WriteByte('\n')
		}
	})
}

// stall makes the reader stop reading stdin for good.
func (a *agent) stall() { a.stallOnce.Do(func() { close(a.stalled) }) }

// waitIfStalled blocks the reader forever once the agent has stalled. It
// sleeps rather than waiting on a channel: with every goroutine blocked on
// channels (a script in hang, say) the runtime would report a deadlock and
// exit, and a stalled agent must stay alive until it is killed.
func (a *agent) waitIfStalled() {
	select {
	case <-a.stalled:
		for {
			time.Sleep(time.Hour)
		}
	default:
	}
}
