package wire

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// The few places of a PromptEvent's encoding the gateway reads or writes
// itself: where an answer or a chunk's text goes, so that it can be
// encoded in pieces that share the string's memory (encodePieces,
// encodeChunkPieces).
// Numbers come from the descriptors, so a renumbered field cannot be
// missed here.

// Field numbers of a completed turn's outcome and of its answer, in the
// encoding of a PromptEvent.
var (
	outcomeField = fieldNumber(&acpgatev1.PromptEvent{}, "outcome")
	outcomeText  = fieldNumber(&acpgatev1.PromptOutcome{}, "text")
	outcomeFinal = fieldNumber(&acpgatev1.PromptOutcome{}, "final_message")
)

// Field numbers of a chunk event and of its text.
var (
	agentChunkField   = fieldNumber(&acpgatev1.PromptEvent{}, "agent_message_chunk")
	thoughtChunkField = fieldNumber(&acpgatev1.PromptEvent{}, "agent_thought_chunk")
	userChunkField    = fieldNumber(&acpgatev1.PromptEvent{}, "user_message_chunk")
	chunkText         = fieldNumber(&acpgatev1.MessageChunk{}, "text")
)

func fieldNumber(m proto.Message, name protoreflect.Name) protowire.Number {
	f := m.ProtoReflect().Descriptor().Fields().ByName(name)
	if f == nil {
		panic(fmt.Sprintf("%T has no field %s", m, name))
	}
	return f.Number()
}

// stringFieldSize is the encoded size of string field num holding s; 0 for
// "", which proto3 does not encode.
func stringFieldSize(num protowire.Number, s string) int {
	return bytesFieldSize(num, len(s))
}

// bytesFieldSize is the encoded size of a string or bytes field of n
// bytes; 0 for none, which proto3 leaves out.
func bytesFieldSize(num protowire.Number, n int) int {
	if n == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeBytes(n)
}

// findField finds the top-level length-delimited field num in the
// encoding b: where it starts (its tag), its value, and where it ends.
// start is -1 when it is not there.
func findField(b []byte, num protowire.Number) (start int, value []byte, end int) {
	for i := 0; i < len(b); {
		n, typ, tagLen := protowire.ConsumeTag(b[i:])
		if tagLen < 0 {
			return -1, nil, 0
		}
		valLen := protowire.ConsumeFieldValue(n, typ, b[i+tagLen:])
		if valLen < 0 {
			return -1, nil, 0
		}
		if n == num && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(b[i+tagLen:])
			return i, v, i + tagLen + valLen
		}
		i += tagLen + valLen
	}
	return -1, nil, 0
}
