package server

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// checkChunkDelivery rejects a chunk_delivery this gateway does not know,
// and the one pair of fields that ask for opposite cuts. Without the check
// an unknown value would silently read as the default, and a client that
// asked for a delivery it misspelled would count chunks it never gets.
func checkChunkDelivery(req *acpgatev1.PromptRequest) error {
	switch d := req.GetChunkDelivery(); d {
	case acpgatev1.ChunkDelivery_CHUNK_DELIVERY_UNSPECIFIED, acpgatev1.ChunkDelivery_CHUNK_DELIVERY_COALESCED:
	case acpgatev1.ChunkDelivery_CHUNK_DELIVERY_EACH:
		//lint:ignore SA1019 the deprecated field is read to reject the conflict
		if req.GetCoalesceChunks() {
			return status.Error(codes.InvalidArgument, "coalesce_chunks asks for merged chunks and chunk_delivery CHUNK_DELIVERY_EACH for one event per chunk: set only chunk_delivery (coalesce_chunks is deprecated)")
		}
	default:
		return status.Errorf(codes.InvalidArgument, "chunk_delivery %d is not a ChunkDelivery this gateway knows: use CHUNK_DELIVERY_COALESCED (the default) or CHUNK_DELIVERY_EACH", int32(d))
	}
	return nil
}

// coalesces says whether a turn's pump merges the text chunks queued
// together: every delivery but CHUNK_DELIVERY_EACH, which checkChunkDelivery
// has already checked.
func coalesces(req *acpgatev1.PromptRequest) bool {
	return req.GetChunkDelivery() != acpgatev1.ChunkDelivery_CHUNK_DELIVERY_EACH
}
