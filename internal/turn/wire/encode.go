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
	e.Seq = seq
	e.Time = timestamppb.Now()
	if o := e.GetOutcome(); o.GetText() != "" || o.GetFinalMessage() != "" {
		return encodePieces(e, o)
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
