package jsonrpc

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
)

// keptLineBytes is the most a lineReader keeps for the next line once a
// line is done. A line longer than the read buffer is assembled in buf,
// which then keeps its size: without this bound, one 16 MiB line (a large
// image or file in a message) left 16 MiB held for the rest of the
// session, and a gateway of 256 sessions could hold 4 GiB that no session
// was using. Lines of a few 64 KiB chunks still reuse the buffer.
const keptLineBytes = 1 << 20

// lineReader splits a stream into lines without ever holding more than the
// frame limit of one line in memory, and, between lines, no more than
// keptLineBytes.
type lineReader struct {
	r     *bufio.Reader
	limit int
	buf   []byte
}

func newLineReader(r io.Reader, limit int) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10), limit: limit}
}

// next returns the next line without its terminator. The slice is valid
// until the following call. A final line without a terminator is returned
// before io.EOF.
func (l *lineReader) next() ([]byte, error) {
	if cap(l.buf) > keptLineBytes {
		l.buf = nil
	}
	l.buf = l.buf[:0]
	for {
		chunk, err := l.r.ReadSlice('\n')
		if len(l.buf)+len(chunk) > l.limit+1 { // +1: the terminator
			return nil, fmt.Errorf("the agent sent a line longer than the frame limit of %d bytes", l.limit)
		}
		if err == nil {
			if len(l.buf) == 0 {
				return chunk[:len(chunk)-1], nil // no copy on the common path
			}
			l.buf = append(l.buf, chunk[:len(chunk)-1]...)
			return l.buf, nil
		}
		l.buf = append(l.buf, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF && len(l.buf) > 0 {
			return l.buf, nil
		}
		return nil, err
	}
}

// holdsLine reports whether a whole line is already buffered, so that next
// returns it without waiting for the agent.
func (l *lineReader) holdsLine() bool {
	n := l.r.Buffered()
	if n == 0 {
		return false
	}
	b, _ := l.r.Peek(n)
	return bytes.IndexByte(b, '\n') >= 0
}
