package jsonrpc

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// An 8 MiB file read's answer (the largest the gateway serves by default),
// written as the connection writes it: the text escaped chunk by chunk
// from the one copy held. BenchmarkAnEightMiBAnswerEncodedWhole is the
// way answers were written before, encoded whole in encoding/json's
// buffer, for comparison.
var eightMiBText = strings.Repeat("a line of source code, with \"quotes\" and a tab\t\n", 8<<20/50)

func BenchmarkAnEightMiBAnswerEscapedAsWritten(b *testing.B) {
	w := bufio.NewWriterSize(io.Discard, 64<<10)
	c := &Conn{w: w}
	b.SetBytes(int64(len(eightMiBText)))
	b.ReportAllocs()
	for b.Loop() {
		a, err := encodeAnswer(json.RawMessage("7"), TextResult{Member: "content", Text: eightMiBText}, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := c.writeAnswer(a); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAnEightMiBAnswerEncodedWhole(b *testing.B) {
	w := bufio.NewWriterSize(io.Discard, 64<<10)
	b.SetBytes(int64(len(eightMiBText)))
	b.ReportAllocs()
	for b.Loop() {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		msg := struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Result  any             `json:"result"`
		}{"2.0", json.RawMessage("7"), struct {
			Content string `json:"content"`
		}{eightMiBText}}
		if err := enc.Encode(msg); err != nil {
			b.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
	}
}
