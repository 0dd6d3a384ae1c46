package demoagent

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"sync"
	"time"
)

// The SDK treats EOF on its input as the peer being gone: it stops at once,
// and answers to requests it already read may never be written. A client
// that writes its requests and then closes the agent's stdin (say,
// `printf '...' | acpgate demo-agent`) would lose them. So Run watches the
// JSON-RPC traffic on both streams and, when its input ends, cancels the
// running turns and holds the EOF back from the SDK until every request read
// so far has been answered (or drainTimeout passes, or Run's context ends).

// drainTimeout bounds how long EOF is held back.
const drainTimeout = 5 * time.Second

// maxTrackedLine is the longest line whose id is tracked; longer lines (the
// SDK accepts up to 10 MiB) are passed on untracked.
const maxTrackedLine = 16 << 20

// tracker holds the ids of the client's requests that are not answered yet.
type tracker struct {
	mu      sync.Mutex
	pending map[string]struct{}
	idle    chan struct{} // signalled when pending becomes empty
}

func newTracker() *tracker {
	return &tracker{pending: make(map[string]struct{}), idle: make(chan struct{}, 1)}
}

// request notes a request read from the client.
func (t *tracker) request(id string) {
	t.mu.Lock()
	t.pending[id] = struct{}{}
	t.mu.Unlock()
}

// answered notes a response written to the client.
func (t *tracker) answered(id string) {
	t.mu.Lock()
	delete(t.pending, id)
	empty := len(t.pending) == 0
	t.mu.Unlock()
	if empty {
		select {
		case t.idle <- struct{}{}:
		default:
		}
	}
}

// waitIdle waits until no request is pending, ctx is done or d has passed.
func (t *tracker) waitIdle(ctx context.Context, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		t.mu.Lock()
		n := len(t.pending)
		t.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-t.idle:
		case <-ctx.Done():
			return
		case <-timer.C:
			return
		}
	}
}

// lineSplitter cuts a byte stream into lines.
type lineSplitter struct {
	buf  []byte
	skip bool // the current line grew past maxTrackedLine
}

// feed passes each complete line in p to fn.
func (s *lineSplitter) feed(p []byte, fn func(line []byte)) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if !s.skip {
				s.buf = append(s.buf, p...)
				if len(s.buf) > maxTrackedLine {
					s.buf, s.skip = nil, true
				}
			}
			return
		}
		if !s.skip {
			if len(s.buf) == 0 {
				fn(p[:i])
			} else {
				s.buf = append(s.buf, p[:i]...)
				fn(s.buf)
			}
		}
		s.buf, s.skip = s.buf[:0], false
		p = p[i+1:]
	}
}

// envelope classifies a JSON-RPC message: the id key ("" when it has no
// usable id) and whether it is a request (has a method).
func envelope(line []byte) (id string, isRequest bool) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(line, &m) != nil || len(m.ID) == 0 {
		return "", false
	}
	// Decode the id so that the same id spelled differently (the SDK
	// re-encodes it) gives the same key.
	dec := json.NewDecoder(bytes.NewReader(m.ID))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return "", false
	}
	switch v := v.(type) {
	case string:
		id = "s:" + v
	case json.Number:
		id = "n:" + v.String()
	default:
		return "", false // null, or not a valid id
	}
	return id, m.Method != ""
}

// inbound is the SDK's view of Run's input. It blocks until opened, notes
// the client's requests, and at the end of the input calls atEnd (which
// drains) before passing the end on.
type inbound struct {
	r     io.Reader
	open  chan struct{}
	tr    *tracker
	atEnd func()

	lines   lineSplitter
	endErr  error // the input's end, held back for the next Read
	drained bool
}

func (in *inbound) Read(p []byte) (int, error) {
	<-in.open
	if in.endErr != nil {
		if !in.drained {
			in.drained = true
			in.atEnd()
		}
		return 0, in.endErr
	}
	n, err := in.r.Read(p)
	if n > 0 {
		in.lines.feed(p[:n], func(line []byte) {
			if id, isRequest := envelope(line); id != "" && isRequest {
				in.tr.request(id)
			}
		})
	}
	if err != nil {
		// Hand over the data first: the SDK must dispatch every request
		// before the drain can wait for their answers. A last line without
		// a newline is not tracked.
		in.endErr = err
		if n > 0 {
			return n, nil
		}
		return in.Read(p)
	}
	return n, nil
}

// outbound is the SDK's view of Run's output: it notes the responses written.
type outbound struct {
	w  io.Writer
	tr *tracker

	mu    sync.Mutex
	lines lineSplitter
}

func (o *outbound) Write(p []byte) (int, error) {
	n, err := o.w.Write(p)
	o.mu.Lock()
	defer o.mu.Unlock()
	// Count p as written even on error: the answer is not coming anyway.
	o.lines.feed(p, func(line []byte) {
		if id, isRequest := envelope(line); id != "" && !isRequest {
			o.tr.answered(id)
		}
	})
	return n, err
}
