package acp

import (
	"fmt"

	acpsdk "github.com/coder/acp-go-sdk"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// What prompt content an agent may be sent, and how large one block may be.
//
// ACP's baseline is text and resource links; images, audio and embedded
// resources each need the agent to opt in at initialize
// (agentCapabilities.promptCapabilities). The gateway checks this itself,
// before session/prompt is sent, because an agent that receives content it
// did not ask for is free to drop it without a word, and the caller would
// take the answer for one about the content it sent.

// Per-block size limits, in bytes of the block's encoded data (the base64
// text of an image, audio clip or blob, or an embedded resource's text).
// They bound what one block can make an agent (and its model API) take,
// whatever the gateway's max_prompt_bytes allows the prompt as a whole; a
// prompt is still bounded by max_prompt_bytes, which is smaller by default.
const (
	MaxImageBlockBytes    = 8 << 20
	MaxAudioBlockBytes    = 16 << 20
	MaxResourceBlockBytes = 8 << 20
)

// checkBlockSize refuses a block whose data exceeds its type's limit.
func checkBlockSize(b *acpgatev1.ContentBlock) error {
	var kind string
	var size, limit int
	switch v := b.GetBlock().(type) {
	case *acpgatev1.ContentBlock_Image:
		kind, size, limit = "image", len(v.Image.GetData()), MaxImageBlockBytes
	case *acpgatev1.ContentBlock_Audio:
		kind, size, limit = "audio", len(v.Audio.GetData()), MaxAudioBlockBytes
	case *acpgatev1.ContentBlock_Resource:
		kind, size, limit = "embedded resource", len(v.Resource.GetText())+len(v.Resource.GetBlob()), MaxResourceBlockBytes
	default:
		return nil
	}
	if size > limit {
		return fmt.Errorf("the %s block's data is %d bytes, over the limit of %d bytes for one %s block", kind, size, limit, kind)
	}
	return nil
}

// unsupportedContent finds the first block of prompt whose type the agent
// did not opt in to. It returns its index, the block type as the
// contract's ContentBlock names it, and the capability it needs; ok is
// false when every block may be sent.
func unsupportedContent(caps acpsdk.PromptCapabilities, prompt []acpsdk.ContentBlock) (index int, blockType, primitive string, ok bool) {
	for i, b := range prompt {
		switch {
		case b.Image != nil && !caps.Image:
			return i, "image", "promptCapabilities.image", true
		case b.Audio != nil && !caps.Audio:
			return i, "audio", "promptCapabilities.audio", true
		case b.Resource != nil && !caps.EmbeddedContext:
			return i, "resource", "promptCapabilities.embeddedContext", true
		}
	}
	return 0, "", "", false
}
