package wire

import (
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/store"
)

// Encode numbers, stamps and encodes an event of a journal: a
// completed turn's outcome with an answer in pieces (see encodePieces), a
// long text chunk with its text in pieces (see encodeChunkPieces),
// anything else in one.
func Encode(e *acpgatev1.PromptEvent, seq uint64) store.Event {
	return EncodeTerminal(e, seq, Pieces{})
}

// Pieces are a completed outcome's text and final message in parts
// (outcome.Result.TextPieces and FinalPieces), which the outcome itself
// then leaves empty.
type Pieces struct{ Text, Final []string }

// EncodeTerminal is Encode, with a completed outcome's text and final
// message given as p when they are in pieces: encoded from the pieces' own
// memory, the bytes are those of the outcome with the joined strings.
func EncodeTerminal(e *acpgatev1.PromptEvent, seq uint64, p Pieces) store.Event {
	e.Seq = seq
	e.Time = timestamppb.Now()
	if o := e.GetOutcome(); o != nil && (p.Text != nil || p.Final != nil) {
		if o.GetText() != "" || o.GetFinalMessage() != "" {
			panic("encoding a journal event: an outcome with its text both in it and in pieces")
		}
		return encodePieces(e, p.Text, p.Final)
	}
	if o := e.GetOutcome(); o.GetText() != "" || o.GetFinalMessage() != "" {
		return encodePieces(e, nonEmpty(o.GetText()), nonEmpty(o.GetFinalMessage()))
	}
	if field, c := textChunk(e); c != nil && len(c.Text) >= minChunkPieces {
		return encodeChunkPieces(e, field, c)
	}
	data, err := proto.Marshal(e)
	if err != nil {
		// A PromptEvent the gateway built always encodes.
		panic(fmt.Sprintf("encoding a journal event: %v", err))
	}
	return store.Event{Seq: seq, Data: data}
}

// nonEmpty is s as the one piece of a text, or none.
func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}
