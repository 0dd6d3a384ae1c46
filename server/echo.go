package server

import (
	"google.golang.org/protobuf/encoding/protowire"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/store"
)

// chunkTexts returns the field of e that holds a text chunk, and the
// chunk, when e is a text chunk whose content repeats its text.
func chunkTexts(e *acpgatev1.PromptEvent) (protowire.Number, *acpgatev1.MessageChunk) {
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
	if c.GetText() == "" || c.GetContent().GetText() != c.GetText() {
		return 0, nil
	}
	return field, c
}

// chunkEcho finds, in the encoding b of an event, a text chunk's text and
// its copy in the chunk's content, for the journal to keep once (see
// store.Echo). No echo when the event is not a text chunk.
func chunkEcho(e *acpgatev1.PromptEvent, b []byte) store.Echo {
	field, c := chunkTexts(e)
	if c == nil {
		return store.Echo{}
	}
	chunkAt, chunk := valueOf(b, field)
	textAt, text := valueOf(chunk, chunkText)
	contentAt, content := valueOf(chunk, chunkContent)
	copyAt, copied := valueOf(content, blockText)
	if textAt < 0 || copyAt < 0 || len(text) != len(c.Text) || len(copied) != len(c.Text) {
		return store.Echo{}
	}
	from, at := chunkAt+textAt, chunkAt+contentAt+copyAt
	if at < from {
		from, at = at, from
	}
	return store.Echo{From: from, At: at, Len: len(text)}
}
