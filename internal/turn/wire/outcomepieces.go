package wire

import (
	"fmt"
	"strings"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/store"
)

// encodePieces encodes an event that carries a completed turn's outcome
// with its text and final message as pieces of their own, the strings'
// own memory, between pieces that hold the rest of the encoding.
//
// The outcome repeats the answer, twice for a one-message turn (text, and
// final_message, its tail). Encoded in one buffer, a 156 MiB answer was
// 312 MiB more, allocated and copied while the answer itself was live
// (the heap's peak of a long default turn, and about half a second of
// copying into fresh memory); in pieces it costs nothing beyond the
// answer. The bytes are those proto.Marshal gives (fields in number order,
// text and final_message first in the outcome), so a replay or a reader
// of the store sees an ordinary encoding.
//
// The pieces alias the strings, which are immutable: whoever receives
// them (the store, gRPC) reads and never writes them.
func encodePieces(e *acpgatev1.PromptEvent, o *acpgatev1.PromptOutcome) store.Event {
	// The event without the two strings: proto.Clone shares strings,
	// it does not copy them.
	rest := proto.Clone(e).(*acpgatev1.PromptEvent)
	rest.GetOutcome().Text, rest.GetOutcome().FinalMessage = "", ""
	b, err := proto.Marshal(rest)
	if err != nil {
		// A PromptEvent the gateway built always encodes.
		panic(fmt.Sprintf("encoding a journal event: %v", err))
	}
	start, value, end := findField(b, outcomeField)
	if start < 0 {
		panic("encoding a journal event: the outcome is not in its encoding")
	}
	size := len(value) + stringFieldSize(outcomeText, o.Text) + stringFieldSize(outcomeFinal, o.FinalMessage)
	head := append([]byte(nil), b[:start]...)
	head = protowire.AppendTag(head, outcomeField, protowire.BytesType)
	head = protowire.AppendVarint(head, uint64(size))
	ev := store.Event{Seq: e.Seq, Data: head}
	for _, f := range []struct {
		num protowire.Number
		s   string
	}{{outcomeText, o.Text}, {outcomeFinal, o.FinalMessage}} {
		if f.s == "" {
			continue
		}
		var prefix []byte
		prefix = protowire.AppendTag(prefix, f.num, protowire.BytesType)
		prefix = protowire.AppendVarint(prefix, uint64(len(f.s)))
		ev.More = append(ev.More, prefix, unsafe.Slice(unsafe.StringData(f.s), len(f.s)))
	}
	ev.More = append(ev.More, append(value[:len(value):len(value)], b[end:]...))
	// final_message is the answer's last message, the tail of text (all of
	// it for a one-message turn): the journal need not keep it twice.
	if o.FinalMessage != "" && strings.HasSuffix(o.Text, o.FinalMessage) {
		textAt := len(head) + stringFieldSize(outcomeText, o.Text) - len(o.Text)
		ev.Echo = store.Echo{
			From: textAt + len(o.Text) - len(o.FinalMessage),
			At:   textAt + len(o.Text) + stringFieldSize(outcomeFinal, o.FinalMessage) - len(o.FinalMessage),
			Len:  len(o.FinalMessage),
		}
	}
	return ev
}
