package wire

import (
	"google.golang.org/grpc/mem"

	"github.com/acpgate/acpgate/internal/store"
)

// Encoded is a PromptEvent already encoded (a journaled event), sent as it
// is: every stream of a turn carries the journal's bytes, and the gateway
// does not encode an event twice. The gateway's gRPC codec sends it as its
// Buffers instead of marshalling it.
type Encoded store.Event

// Buffers is e's encoding as gRPC buffers. An event in pieces (a completed
// turn's outcome, a long chunk) goes out as its pieces, which gRPC writes
// to the connection without joining them first.
func (e Encoded) Buffers() mem.BufferSlice {
	if len(e.More) == 0 {
		return mem.BufferSlice{mem.SliceBuffer(e.Data)}
	}
	pieces := store.Event(e).Pieces()
	out := make(mem.BufferSlice, len(pieces))
	for i, p := range pieces {
		out[i] = mem.SliceBuffer(p)
	}
	return out
}
