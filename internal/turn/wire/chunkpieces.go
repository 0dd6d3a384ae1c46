package wire

import (
	"fmt"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/store"
)

// minChunkPieces is the text from which a chunk's event is encoded in
// pieces (encodeChunkPieces): below it, copying the text costs less than
// the pieces do.
const minChunkPieces = 16 << 10

// textChunk returns the field of e that holds a text chunk, and the chunk,
// when e is a text chunk with text. A text chunk carries its text in text
// alone (content is set only for other blocks; see acp.messageChunk).
func textChunk(e *acpgatev1.PromptEvent) (protowire.Number, *acpgatev1.MessageChunk) {
	var field protowire.Number
	var c *acpgatev1.MessageChunk
	switch ev := e.GetEvent().(type) {
	case *acpgatev1.PromptEvent_AgentMessageChunk:
		field, c = agentChunkField, ev.AgentMessageChunk
	case *acpgatev1.PromptEvent_AgentThoughtChunk:
		field, c = thoughtChunkField, ev.AgentThoughtChunk
	case *acpgatev1.PromptEvent_UserMessageChunk:
		field, c = userChunkField, ev.UserMessageChunk
	default:
		return 0, nil
	}
	if c.GetText() == "" || c.GetContent() != nil {
		return 0, nil
	}
	return field, c
}

// encodeChunkPieces encodes the event of a text chunk with its text as a
// piece of its own, the string's own memory, between pieces that hold the
// rest of the encoding.
//
// Encoded in one buffer, every 64 KiB chunk of a flood cost a fresh buffer
// and a copy of its text into it, a tenth of the gateway's CPU on such a
// flood and most of its garbage; the journal files and gRPC take pieces as
// they are. The bytes are those proto.Marshal gives (tested byte for byte).
func encodeChunkPieces(e *acpgatev1.PromptEvent, field protowire.Number, c *acpgatev1.MessageChunk) store.Event {
	text := c.Text
	// The event without its text: proto.Clone shares strings, it does not
	// copy them.
	rest := proto.Clone(e).(*acpgatev1.PromptEvent)
	_, rc := textChunk(rest)
	rc.Text = ""
	b, err := proto.Marshal(rest)
	if err != nil {
		// A PromptEvent the gateway built always encodes.
		panic(fmt.Sprintf("encoding a journal event: %v", err))
	}
	start, chunk, end := findField(b, field)
	if start < 0 {
		panic("encoding a journal event: the chunk is not in its encoding")
	}
	// Without content, the chunk is message_id (field 1) alone, and text
	// (field 2) follows it.
	chunkSize := len(chunk) + stringFieldSize(chunkText, text)
	head := append([]byte(nil), b[:start]...)
	head = protowire.AppendTag(head, field, protowire.BytesType)
	head = protowire.AppendVarint(head, uint64(chunkSize))
	head = append(head, chunk...)
	head = protowire.AppendTag(head, chunkText, protowire.BytesType)
	head = protowire.AppendVarint(head, uint64(len(text)))

	tail := b[end:len(b):len(b)]
	t := unsafe.Slice(unsafe.StringData(text), len(text))
	return store.Event{Seq: e.Seq, Data: head, More: [][]byte{t, tail}}
}
