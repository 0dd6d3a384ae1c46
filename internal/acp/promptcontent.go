package acp

import (
	acpsdk "github.com/coder/acp-go-sdk"
)

// What prompt content an agent may be sent. (How large one block may be is
// checked as the caller's prompt is converted: see
// translate.ContentFromProto.)
//
// ACP's baseline is text and resource links; images, audio and embedded
// resources each need the agent to opt in at initialize
// (agentCapabilities.promptCapabilities). The gateway checks this itself,
// before session/prompt is sent, because an agent that receives content it
// did not ask for is free to drop it without a word, and the caller would
// take the answer for one about the content it sent.

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
