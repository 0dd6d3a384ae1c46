package main

// Output for programs (--json): one protojson line per message.

import (
	"bytes"
	"fmt"
	"io"
	"strconv"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// jsonSink prints every event as one protojson line.
// stdout receives nothing else; an error terminal is also reported on
// stderr, as in human mode, for a person watching a pipeline.
type jsonSink struct {
	out, err io.Writer
}

func (s *jsonSink) event(ev *acpgatev1.PromptEvent)   { writeJSONLine(s.out, ev) }
func (s *jsonSink) outcome(ev *acpgatev1.PromptEvent) { writeJSONLine(s.out, ev) }
func (s *jsonSink) failed(ev *acpgatev1.PromptEvent, label string) {
	writeJSONLine(s.out, ev)
	fmt.Fprintf(s.err, "acpgate: %s: %s\n", label, ev.GetError().GetMessage())
}
func (s *jsonSink) abort() {}

// writeJSONLine prints m as one protojson line.
func writeJSONLine(w io.Writer, m proto.Message) {
	b, err := protojson.MarshalOptions{}.Marshal(m)
	if err != nil {
		// Only an invalid message fails to marshal; say so on the line
		// rather than dropping it.
		b = []byte(strconv.Quote(err.Error()))
	}
	b = bytes.ReplaceAll(b, []byte("\n"), nil)
	b = append(b, '\n')
	_, _ = w.Write(b)
}
