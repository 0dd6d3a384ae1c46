package server

import (
	"fmt"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/store"
)

// minChunkPieces is the text from which a chunk's event is encoded in
// pieces (encodeChunkPieces): below it, copying the text costs less than
// the pieces do.
const minChunkPieces = 16 << 10

// encodeChunkPieces encodes the event of a text chunk with its text as
// pieces of their own, the string's own memory, twice (`text`, and the text
// of `content`), between pieces that hold the rest of the encoding, and
// says where the second copy is (store.Echo).
//
// Encoded in one buffer, every 64 KiB chunk of a flood cost a fresh
// 128 KiB buffer and two copies of its text into it, a tenth of the
// gateway's CPU on such a flood and most of its garbage; the journal files
// and gRPC take pieces as they are. The bytes are those proto.Marshal
// gives (tested byte for byte).
func encodeChunkPieces(e *acpgatev1.PromptEvent, field protowire.Number, c *acpgatev1.MessageChunk) store.Event {
	text := c.Text
	// The event without the two copies: proto.Clone shares strings, it
	// does not copy them. content keeps its text arm, empty, which
	// protobuf encodes (a oneof's arm is encoded even when empty).
	rest := proto.Clone(e).(*acpgatev1.PromptEvent)
	_, rc := chunkTexts(rest)
	rc.Text = ""
	rc.Content = &acpgatev1.ContentBlock{Block: &acpgatev1.ContentBlock_Text{}}
	b, err := proto.Marshal(rest)
	if err != nil {
		// A PromptEvent the gateway built always encodes.
		panic(fmt.Sprintf("encoding a journal event: %v", err))
	}
	start, chunk, end := findField(b, field)
	cStart, content, cEnd := findField(chunk, chunkContent)
	if start < 0 || cStart < 0 || len(content) != 2 {
		panic("encoding a journal event: the chunk's content is not in its encoding")
	}
	// chunk is message_id (field 1), then content (field 3): text (field 2)
	// goes between them, and the text arm is content's one field.
	contentSize := stringFieldSize(blockText, text)
	chunkSize := len(chunk) - (cEnd - cStart) + stringFieldSize(chunkText, text) +
		protowire.SizeTag(chunkContent) + protowire.SizeBytes(contentSize)

	head := append([]byte(nil), b[:start]...)
	head = protowire.AppendTag(head, field, protowire.BytesType)
	head = protowire.AppendVarint(head, uint64(chunkSize))
	head = append(head, chunk[:cStart]...)
	head = protowire.AppendTag(head, chunkText, protowire.BytesType)
	head = protowire.AppendVarint(head, uint64(len(text)))

	var mid []byte
	mid = protowire.AppendTag(mid, chunkContent, protowire.BytesType)
	mid = protowire.AppendVarint(mid, uint64(contentSize))
	mid = protowire.AppendTag(mid, blockText, protowire.BytesType)
	mid = protowire.AppendVarint(mid, uint64(len(text)))

	tail := append(chunk[cEnd:len(chunk):len(chunk)], b[end:]...)
	t := unsafe.Slice(unsafe.StringData(text), len(text))
	return store.Event{
		Seq:  e.Seq,
		Data: head,
		More: [][]byte{t, mid, t, tail},
		Echo: store.Echo{From: len(head), At: len(head) + len(text) + len(mid), Len: len(text)},
	}
}
