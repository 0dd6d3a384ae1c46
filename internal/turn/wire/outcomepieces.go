package wire

import (
	"fmt"
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
func encodePieces(e *acpgatev1.PromptEvent, text, final []string) store.Event {
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
	textLen, finalLen := piecesLen(text), piecesLen(final)
	size := len(value) + bytesFieldSize(outcomeText, textLen) + bytesFieldSize(outcomeFinal, finalLen)
	head := append([]byte(nil), b[:start]...)
	head = protowire.AppendTag(head, outcomeField, protowire.BytesType)
	head = protowire.AppendVarint(head, uint64(size))
	ev := store.Event{Seq: e.Seq, Data: head}
	for _, f := range []struct {
		num    protowire.Number
		pieces []string
		n      int
	}{{outcomeText, text, textLen}, {outcomeFinal, final, finalLen}} {
		if f.n == 0 {
			continue
		}
		var prefix []byte
		prefix = protowire.AppendTag(prefix, f.num, protowire.BytesType)
		prefix = protowire.AppendVarint(prefix, uint64(f.n))
		ev.More = append(ev.More, prefix)
		for _, p := range f.pieces {
			if p != "" {
				ev.More = append(ev.More, unsafe.Slice(unsafe.StringData(p), len(p)))
			}
		}
	}
	ev.More = append(ev.More, append(value[:len(value):len(value)], b[end:]...))
	// final_message is the answer's last message, the tail of text (all of
	// it for a one-message turn): the journal need not keep it twice.
	if finalLen > 0 && isTail(text, final) {
		textAt := len(head) + bytesFieldSize(outcomeText, textLen) - textLen
		ev.Echo = store.Echo{
			From: textAt + textLen - finalLen,
			At:   textAt + textLen + bytesFieldSize(outcomeFinal, finalLen) - finalLen,
			Len:  finalLen,
		}
	}
	return ev
}

// piecesLen is the length of pieces' concatenation.
func piecesLen(pieces []string) int {
	n := 0
	for _, p := range pieces {
		n += len(p)
	}
	return n
}

// isTail reports whether the concatenation of final ends that of text.
// It compares from the ends, piece by piece as far as the pieces line up
// (a text in pieces ends with its final message's very pieces, which
// compare at once: they share their memory).
func isTail(text, final []string) bool {
	t, f := len(text)-1, len(final)-1
	var ts, fs string
	for {
		for ts == "" && t >= 0 {
			ts, t = text[t], t-1
		}
		for fs == "" && f >= 0 {
			fs, f = final[f], f-1
		}
		if fs == "" {
			return true
		}
		if ts == "" {
			return false
		}
		n := min(len(ts), len(fs))
		if ts[len(ts)-n:] != fs[len(fs)-n:] {
			return false
		}
		ts, fs = ts[:len(ts)-n], fs[:len(fs)-n]
	}
}
