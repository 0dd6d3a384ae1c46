package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"time"
)

// stampLen is the length of the stamp that starts every flood_timed chunk:
// the chunk's index as 9 decimal digits, a space, the send time as 19
// decimal digits of Unix nanoseconds, a space.
const stampLen = 9 + 1 + 19 + 1

// floodTimed sends n agent_message_chunk updates (messageId "flood") whose
// text is size bytes: the stamp, then 'x' padding. With rate 0 the chunks
// go out as one buffered burst, each stamped as it enters the buffer. With a
// rate, chunk i is due at start + i/rate; at every wake-up the agent sends
// every chunk that is due, stamped as it is written, and flushes, so the
// pacing is exact on average and bursty at the resolution of the sleep
// (about a millisecond). A cancel stops the flood between writes.
func floodTimed(t *turn, n, size, rate int) {
	const marker = "\x01"
	line, _ := json.Marshal(outRequest{JSONRPC: "2.0", Method: "session/update", Params: obj{
		"sessionId": t.sessionID,
		"update":    textChunk("agent_message_chunk", marker, "flood"),
	}})
	// The marker is escaped as \u0001 in the encoded line.
	at := bytes.Index(line, []byte(`\u0001`))
	text := []byte(strings.Repeat("x", size))
	line = append(append(append([]byte{}, line[:at]...), text...), line[at+len(`\u0001`):]...)
	line = append(line, '\n')
	for i := range stampLen {
		line[at+i] = '0'
	}
	line[at+9], line[at+stampLen-1] = ' ', ' '

	stamp := func(i int) {
		putDigits(line[at:at+9], uint64(i))
		putDigits(line[at+10:at+29], uint64(time.Now().UnixNano()))
	}

	o := t.a.out
	if rate == 0 {
		o.burst(func(w *bufio.Writer) {
			for i := range n {
				if i&255 == 0 && t.isCancelled() {
					break
				}
				stamp(i)
				_, _ = w.Write(line)
			}
		})
		return
	}

	interval := time.Second / time.Duration(rate)
	maxBatch := max(1, (1<<20)/len(line)) // a late writer catches up in bounded writes
	var buf []byte
	start := time.Now()
	for i := 0; i < n; {
		if t.isCancelled() {
			return
		}
		due := start.Add(time.Duration(i) * interval)
		if wait := time.Until(due); wait > 0 {
			t.wait(wait)
			continue
		}
		now := time.Now()
		buf = buf[:0]
		for k := 0; i < n && k < maxBatch && !start.Add(time.Duration(i)*interval).After(now); i, k = i+1, k+1 {
			stamp(i)
			buf = append(buf, line...)
		}
		o.mu.Lock()
		if !o.closed {
			_, _ = o.f.Write(buf)
		}
		o.mu.Unlock()
	}
}

// putDigits writes v as decimal digits right-aligned in b, zero-padded.
func putDigits(b []byte, v uint64) {
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = byte('0' + v%10)
		v /= 10
	}
}
