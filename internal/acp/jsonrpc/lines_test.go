package jsonrpc

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

func TestALineReaderDoesNotKeepALongLinesMemoryForTheNextLine(t *testing.T) {
	long := strings.Repeat("x", 8<<20)
	r := newLineReader(strings.NewReader(long+"\n"+"short\n"+strings.Repeat("y", 200<<10)+"\nshort\n"), 16<<20)
	line, err := r.next()
	if err != nil || len(line) != len(long) {
		t.Fatalf("the long line: %d bytes, %v", len(line), err)
	}
	if line, err = r.next(); err != nil || string(line) != "short" {
		t.Fatalf("the line after it: %q, %v", line, err)
	}
	if cap(r.buf) > keptLineBytes {
		t.Fatalf("after an 8 MiB line the reader keeps %d bytes, want at most %d", cap(r.buf), keptLineBytes)
	}
	// A line over the read buffer but under the bound keeps its buffer
	// for the next one.
	if line, err = r.next(); err != nil || len(line) != 200<<10 {
		t.Fatalf("the 200 KiB line: %d bytes, %v", len(line), err)
	}
	kept := cap(r.buf)
	if line, err = r.next(); err != nil || string(line) != "short" {
		t.Fatalf("the last line: %q, %v", line, err)
	}
	if kept < 200<<10 || cap(r.buf) != kept {
		t.Fatalf("a 200 KiB line's buffer: %d bytes, then %d, want it kept", kept, cap(r.buf))
	}
	if _, err := r.next(); err != io.EOF {
		t.Fatalf("after the last line: %v, want io.EOF", err)
	}
}

func TestALineReaderRefusesALineOverTheFrameLimit(t *testing.T) {
	r := newLineReader(bytes.NewReader(append(bytes.Repeat([]byte("z"), 100<<10), '\n')), 64<<10)
	if _, err := r.next(); err == nil || !strings.Contains(err.Error(), "longer than the frame limit of 65536 bytes") {
		t.Fatalf("a 100 KiB line under a 64 KiB limit: %v", err)
	}
}
