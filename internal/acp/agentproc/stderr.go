package agentproc

import (
	"bytes"
	"sync"
)

func (p *Process) drainStderr(onLine func(string)) {
	defer close(p.stderrDone)
	buf := make([]byte, 32<<10)
	var partial []byte
	for {
		n, err := p.stderr.Read(buf)
		if n > 0 {
			p.tail.Write(buf[:n])
			if onLine != nil {
				partial = emitLines(append(partial, buf[:n]...), onLine)
			}
		}
		if err != nil {
			if onLine != nil && len(partial) > 0 {
				onLine(string(partial))
			}
			return
		}
	}
}

// emitLines calls onLine for each complete line and returns the rest. A
// line longer than 4 KiB is emitted in pieces so a stderr flood without
// newlines cannot grow the buffer.
func emitLines(b []byte, onLine func(string)) []byte {
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if len(b) > 4<<10 {
				onLine(string(b))
				return b[:0]
			}
			return b
		}
		onLine(string(b[:i]))
		b = b[i+1:]
	}
}

// ringBuffer keeps the last n bytes written to it.
type ringBuffer struct {
	mu   sync.Mutex
	buf  []byte
	size int
	full bool
	pos  int
}

func newRingBuffer(n int) *ringBuffer {
	return &ringBuffer{buf: make([]byte, 0, min(n, 4096)), size: n}
}

func (r *ringBuffer) Write(b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(b) >= r.size {
		r.buf = append(r.buf[:0], b[len(b)-r.size:]...)
		r.full, r.pos = true, 0
		return
	}
	if !r.full {
		if len(r.buf)+len(b) <= r.size {
			r.buf = append(r.buf, b...)
			return
		}
		grown := make([]byte, r.size)
		copy(grown, r.buf)
		r.pos = len(r.buf)
		r.buf = grown
		r.full = true
	}
	for len(b) > 0 {
		n := copy(r.buf[r.pos:], b)
		b = b[n:]
		r.pos = (r.pos + n) % r.size
	}
}

// String returns the kept bytes in order.
func (r *ringBuffer) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.full {
		return string(r.buf)
	}
	return string(r.buf[r.pos:]) + string(r.buf[:r.pos])
}
