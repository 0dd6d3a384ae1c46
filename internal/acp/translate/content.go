package translate

import (
	"fmt"

	acpsdk "github.com/coder/acp-go-sdk"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// Content blocks both ways: the agent's (in message chunks and tool calls)
// to the contract's, and a caller's prompt to ACP's, refusing on the way a
// block the agent should never be sent.

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

// ContentToProto converts an ACP content block to the contract's.
func ContentToProto(c acpsdk.ContentBlock) *acpgatev1.ContentBlock {
	switch {
	case c.Text != nil:
		return &acpgatev1.ContentBlock{Block: &acpgatev1.ContentBlock_Text{Text: c.Text.Text}}
	case c.Image != nil:
		return &acpgatev1.ContentBlock{Block: &acpgatev1.ContentBlock_Image{Image: &acpgatev1.ImageContent{
			Data: c.Image.Data, MimeType: c.Image.MimeType, Uri: deref(c.Image.Uri),
		}}}
	case c.Audio != nil:
		return &acpgatev1.ContentBlock{Block: &acpgatev1.ContentBlock_Audio{Audio: &acpgatev1.AudioContent{
			Data: c.Audio.Data, MimeType: c.Audio.MimeType,
		}}}
	case c.ResourceLink != nil:
		l := c.ResourceLink
		link := &acpgatev1.ResourceLink{Uri: l.Uri, Name: l.Name, MimeType: deref(l.MimeType), Title: deref(l.Title), Description: deref(l.Description)}
		if l.Size != nil {
			size := int64(*l.Size)
			link.Size = &size
		}
		return &acpgatev1.ContentBlock{Block: &acpgatev1.ContentBlock_ResourceLink{ResourceLink: link}}
	case c.Resource != nil:
		r := &acpgatev1.EmbeddedResource{}
		switch res := c.Resource.Resource; {
		case res.TextResourceContents != nil:
			r.Uri, r.MimeType = res.TextResourceContents.Uri, deref(res.TextResourceContents.MimeType)
			r.Contents = &acpgatev1.EmbeddedResource_Text{Text: res.TextResourceContents.Text}
		case res.BlobResourceContents != nil:
			r.Uri, r.MimeType = res.BlobResourceContents.Uri, deref(res.BlobResourceContents.MimeType)
			r.Contents = &acpgatev1.EmbeddedResource_Blob{Blob: res.BlobResourceContents.Blob}
		}
		return &acpgatev1.ContentBlock{Block: &acpgatev1.ContentBlock_Resource{Resource: r}}
	default:
		return &acpgatev1.ContentBlock{}
	}
}

// ContentFromProto converts a prompt content block to ACP's. A block with no
// arm set is an error: sending it would be sending nothing; so is one whose
// data is over its type's size limit (see MaxImageBlockBytes).
func ContentFromProto(b *acpgatev1.ContentBlock) (acpsdk.ContentBlock, error) {
	if err := checkBlockSize(b); err != nil {
		return acpsdk.ContentBlock{}, err
	}
	switch v := b.GetBlock().(type) {
	case *acpgatev1.ContentBlock_Text:
		return acpsdk.TextBlock(v.Text), nil
	case *acpgatev1.ContentBlock_Image:
		block := acpsdk.ImageBlock(v.Image.GetData(), v.Image.GetMimeType())
		if v.Image.GetUri() != "" {
			uri := v.Image.GetUri()
			block.Image.Uri = &uri
		}
		return block, nil
	case *acpgatev1.ContentBlock_Audio:
		return acpsdk.ContentBlock{Audio: &acpsdk.ContentBlockAudio{Type: "audio", Data: v.Audio.GetData(), MimeType: v.Audio.GetMimeType()}}, nil
	case *acpgatev1.ContentBlock_ResourceLink:
		l := v.ResourceLink
		link := &acpsdk.ContentBlockResourceLink{Type: "resource_link", Uri: l.GetUri(), Name: l.GetName(),
			MimeType: ptrIf(l.GetMimeType()), Title: ptrIf(l.GetTitle()), Description: ptrIf(l.GetDescription())}
		if l.Size != nil {
			size := int(l.GetSize())
			link.Size = &size
		}
		return acpsdk.ContentBlock{ResourceLink: link}, nil
	case *acpgatev1.ContentBlock_Resource:
		r := v.Resource
		var res acpsdk.EmbeddedResourceResource
		switch c := r.GetContents().(type) {
		case *acpgatev1.EmbeddedResource_Text:
			res.TextResourceContents = &acpsdk.TextResourceContents{Uri: r.GetUri(), MimeType: ptrIf(r.GetMimeType()), Text: c.Text}
		case *acpgatev1.EmbeddedResource_Blob:
			res.BlobResourceContents = &acpsdk.BlobResourceContents{Uri: r.GetUri(), MimeType: ptrIf(r.GetMimeType()), Blob: c.Blob}
		default:
			return acpsdk.ContentBlock{}, fmt.Errorf("an embedded resource needs text or blob contents")
		}
		return acpsdk.ContentBlock{Resource: &acpsdk.ContentBlockResource{Type: "resource", Resource: res}}, nil
	default:
		return acpsdk.ContentBlock{}, fmt.Errorf("a content block has no content")
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func ptrIf(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
