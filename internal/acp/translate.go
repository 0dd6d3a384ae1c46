package acp

import (
	"bytes"
	"encoding/json"
	"fmt"

	acpsdk "github.com/coder/acp-go-sdk"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// The translation from ACP's JSON shapes to the contract's protobuf events.
// It is the one place that knows both vocabularies.

// update is a decoded session/update: the event to emit and what it means
// for message accumulation.
type update struct {
	event *acpgatev1.PromptEvent
	// chunk is an agent_message_chunk's message id and text (text content
	// only; other content passes through as events only), when hasChunk.
	// A value, not a pointer: a pointer would cost every chunk an
	// allocation.
	chunk    chunkInfo
	hasChunk bool
	// splits is true for updates after which an id-less message ends: the
	// agent turned to tools.
	splits bool
	// commands updates the session's state outside turns too.
	commands *acpgatev1.AvailableCommands
	// settings updates the session's settings, outside turns too.
	settings settingsUpdate
}

type chunkInfo struct {
	messageID string
	text      string
	isText    bool
}

// updateHead splits a session/update's params into the session id and the
// raw update, and kindHead reads the update's discriminator, so the update
// itself is decoded once, as its own kind.
type updateHead struct {
	SessionID string          `json:"sessionId"`
	Update    json.RawMessage `json:"update"`
	Meta      json.RawMessage `json:"_meta"`
}

type kindHead struct {
	SessionUpdate string          `json:"sessionUpdate"`
	Meta          json.RawMessage `json:"_meta"`
}

// chunkParams decodes a session/update whose update is a text chunk in one
// pass. Message chunks are nearly all of an agent's traffic, and
// encoding/json's cost is per pass over the bytes: the general path (find
// the kind, then decode the SDK's union types, each of which decodes twice)
// reads a chunk's text about ten times, this one twice.
type chunkParams struct {
	SessionID string `json:"sessionId"`
	// Meta is the notification's _meta: the scanner refuses any, so only
	// the encoding/json path sets it, and a chunk without _meta costs
	// nothing more.
	Meta   json.RawMessage `json:"_meta"`
	Update struct {
		SessionUpdate string          `json:"sessionUpdate"`
		MessageID     *string         `json:"messageId"`
		Meta          json.RawMessage `json:"_meta"`
		Content       *struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		} `json:"content"`
	} `json:"update"`
}

// textChunk is a text chunk update's params as the fast path uses them:
// values, not pointers, so that reading a chunk allocates its strings and
// nothing else (chunkParams' pointers cost three allocations a chunk).
type textChunk struct {
	sessionID, kind, messageID string
	hasMessageID               bool
	contentType, text          string
	hasContent, hasText        bool
	// meta and updateMeta are the _meta members, which only the
	// encoding/json path reads.
	meta, updateMeta json.RawMessage
}

// flat is p as a textChunk.
func (p chunkParams) flat() textChunk {
	c := textChunk{sessionID: p.SessionID, kind: p.Update.SessionUpdate, meta: p.Meta, updateMeta: p.Update.Meta}
	if p.Update.MessageID != nil {
		c.messageID, c.hasMessageID = *p.Update.MessageID, true
	}
	if ct := p.Update.Content; ct != nil {
		c.hasContent, c.contentType = true, ct.Type
		if ct.Text != nil {
			c.text, c.hasText = *ct.Text, true
		}
	}
	return c
}

// chunkEvent is a text chunk's event and the messages it points to,
// allocated together: one allocation a chunk instead of five, for the
// updates that are nearly all of an agent's traffic. They live and die
// together anyway (the event is the only way to them).
type chunkEvent struct {
	event   acpgatev1.PromptEvent
	chunk   acpgatev1.MessageChunk
	agent   acpgatev1.PromptEvent_AgentMessageChunk
	thought acpgatev1.PromptEvent_AgentThoughtChunk
	user    acpgatev1.PromptEvent_UserMessageChunk
}

// decodeTextChunk is the fast path for text message chunks. ok is false for
// anything else, which then takes the general path.
func decodeTextChunk(params json.RawMessage, ids *idCache) (sessionID string, u update, ok bool) {
	p, scanned := scanTextChunk(params, ids)
	if !scanned {
		var slow chunkParams
		if json.Unmarshal(params, &slow) != nil {
			return "", update{}, false
		}
		p = slow.flat()
	}
	if !p.hasContent || p.contentType != "text" || !p.hasText {
		return "", update{}, false
	}
	ce := new(chunkEvent)
	ce.chunk.Text, ce.chunk.MessageId = p.text, p.messageID
	switch p.kind {
	case "agent_message_chunk":
		ce.agent.AgentMessageChunk = &ce.chunk
		ce.event.Event = &ce.agent
		u = update{chunk: chunkInfo{messageID: p.messageID, text: p.text, isText: true}, hasChunk: true}
	case "agent_thought_chunk":
		ce.thought.AgentThoughtChunk = &ce.chunk
		ce.event.Event = &ce.thought
	case "user_message_chunk":
		ce.user.UserMessageChunk = &ce.chunk
		ce.event.Event = &ce.user
	default:
		return "", update{}, false
	}
	u.event = &ce.event
	if !scanned {
		u.event.Meta = objectStruct(p.meta, p.updateMeta)
	}
	return p.sessionID, u, true
}

// decodeUpdate decodes the params of a session/update notification. An
// update kind this version does not model becomes a raw event, so nothing
// is silently dropped; an update that does not decode as its kind also
// passes through raw, with the decoding problem logged by the caller.
func decodeUpdate(params json.RawMessage, ids *idCache) (sessionID string, u update, err error) {
	if sessionID, u, ok := decodeTextChunk(params, ids); ok {
		return sessionID, u, nil
	}
	var head updateHead
	if err := json.Unmarshal(params, &head); err != nil {
		return "", update{}, fmt.Errorf("session/update params: %w", err)
	}
	var kind kindHead
	if err := json.Unmarshal(head.Update, &kind); err != nil {
		return head.SessionID, update{}, fmt.Errorf("session/update update: %w", err)
	}
	u, err = translateUpdate(kind.SessionUpdate, head.Update)
	if err != nil {
		u = rawUpdate(kind.SessionUpdate, head.Update)
	}
	// The update's own _meta wins over the notification's.
	u.event.Meta = objectStruct(head.Meta, kind.Meta)
	return head.SessionID, u, err
}

func rawUpdate(kind string, raw json.RawMessage) update {
	var compact bytes.Buffer
	if json.Compact(&compact, raw) != nil {
		compact.Reset()
		compact.Write(raw)
	}
	return update{event: &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_Raw{
		Raw: &acpgatev1.RawUpdate{Kind: kind, Json: compact.String()},
	}}}
}

func translateUpdate(kind string, raw json.RawMessage) (update, error) {
	switch kind {
	case "agent_message_chunk":
		var v acpsdk.SessionUpdateAgentMessageChunk
		if err := json.Unmarshal(raw, &v); err != nil {
			return update{}, err
		}
		chunk, info := messageChunk(v.MessageId, v.Content)
		return update{event: &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_AgentMessageChunk{AgentMessageChunk: chunk}}, chunk: info, hasChunk: true}, nil
	case "agent_thought_chunk":
		var v acpsdk.SessionUpdateAgentThoughtChunk
		if err := json.Unmarshal(raw, &v); err != nil {
			return update{}, err
		}
		chunk, _ := messageChunk(v.MessageId, v.Content)
		return update{event: &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_AgentThoughtChunk{AgentThoughtChunk: chunk}}}, nil
	case "user_message_chunk":
		var v acpsdk.SessionUpdateUserMessageChunk
		if err := json.Unmarshal(raw, &v); err != nil {
			return update{}, err
		}
		chunk, _ := messageChunk(v.MessageId, v.Content)
		return update{event: &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_UserMessageChunk{UserMessageChunk: chunk}}}, nil
	case "tool_call":
		var v acpsdk.SessionUpdateToolCall
		if err := json.Unmarshal(raw, &v); err != nil {
			return update{}, err
		}
		return update{splits: true, event: &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_ToolCall{ToolCall: &acpgatev1.ToolCall{
			ToolCallId:    string(v.ToolCallId),
			Title:         v.Title,
			Kind:          string(v.Kind),
			Status:        string(v.Status),
			Content:       toolContents(v.Content),
			Locations:     locations(v.Locations),
			RawInputJson:  jsonOf(v.RawInput),
			RawOutputJson: jsonOf(v.RawOutput),
		}}}}, nil
	case "tool_call_update":
		var v acpsdk.ToolCallUpdate
		if err := json.Unmarshal(raw, &v); err != nil {
			return update{}, err
		}
		return update{splits: true, event: &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_ToolCallUpdate{ToolCallUpdate: toolCallUpdate(v)}}}, nil
	case "plan":
		var v acpsdk.SessionUpdatePlan
		if err := json.Unmarshal(raw, &v); err != nil {
			return update{}, err
		}
		plan := &acpgatev1.Plan{}
		for _, e := range v.Entries {
			plan.Entries = append(plan.Entries, &acpgatev1.PlanEntry{Content: e.Content, Priority: string(e.Priority), Status: string(e.Status)})
		}
		return update{event: &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_Plan{Plan: plan}}}, nil
	case "available_commands_update":
		var v acpsdk.SessionAvailableCommandsUpdate
		if err := json.Unmarshal(raw, &v); err != nil {
			return update{}, err
		}
		cmds := &acpgatev1.AvailableCommands{}
		for _, c := range v.AvailableCommands {
			cmd := &acpgatev1.AvailableCommand{Name: c.Name, Description: c.Description}
			if c.Input != nil && c.Input.Unstructured != nil {
				cmd.InputHint = c.Input.Unstructured.Hint
			}
			cmds.Commands = append(cmds.Commands, cmd)
		}
		return update{commands: cmds, event: &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_AvailableCommands{AvailableCommands: cmds}}}, nil
	case "current_mode_update":
		var v acpsdk.SessionCurrentModeUpdate
		if err := json.Unmarshal(raw, &v); err != nil {
			return update{}, err
		}
		return update{settings: settingsUpdate{mode: string(v.CurrentModeId)}, event: &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_CurrentMode{
			CurrentMode: &acpgatev1.CurrentMode{ModeId: string(v.CurrentModeId)},
		}}}, nil
	case "config_option_update":
		var v struct {
			ConfigOptions []wireOption `json:"configOptions"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return update{}, err
		}
		opts := optionsProto(v.ConfigOptions)
		return update{settings: settingsUpdate{options: opts, hasOptions: true}, event: &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_ConfigOptions{
			ConfigOptions: &acpgatev1.ConfigOptions{Options: opts},
		}}}, nil
	case "usage_update":
		var v acpsdk.SessionUsageUpdate
		if err := json.Unmarshal(raw, &v); err != nil {
			return update{}, err
		}
		size, used := int64(v.Size), int64(v.Used)
		usage := &acpgatev1.Usage{ContextSize: &size, ContextUsed: &used}
		if v.Cost != nil {
			amount := v.Cost.Amount
			usage.CostAmount, usage.CostCurrency = &amount, v.Cost.Currency
		}
		return update{event: &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_Usage{Usage: usage}}}, nil
	default:
		return rawUpdate(kind, raw), nil
	}
}

// messageChunk is the contract's chunk for an ACP content block: a text
// block's text in text alone, any other block in content alone, so a chunk
// carries its text once (on the wire, in the journal, in every replay).
func messageChunk(id *string, content acpsdk.ContentBlock) (*acpgatev1.MessageChunk, chunkInfo) {
	chunk := &acpgatev1.MessageChunk{}
	info := chunkInfo{}
	if id != nil {
		chunk.MessageId, info.messageID = *id, *id
	}
	if content.Text != nil {
		chunk.Text = content.Text.Text
		info.text, info.isText = content.Text.Text, true
	} else {
		chunk.Content = ContentToProto(content)
	}
	return chunk, info
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

func toolCallUpdate(v acpsdk.ToolCallUpdate) *acpgatev1.ToolCallUpdate {
	u := &acpgatev1.ToolCallUpdate{
		ToolCallId:    string(v.ToolCallId),
		Title:         v.Title,
		Content:       toolContents(v.Content),
		Locations:     locations(v.Locations),
		RawInputJson:  jsonOf(v.RawInput),
		RawOutputJson: jsonOf(v.RawOutput),
	}
	if v.Kind != nil {
		k := string(*v.Kind)
		u.Kind = &k
	}
	if v.Status != nil {
		s := string(*v.Status)
		u.Status = &s
	}
	return u
}

func toolContents(in []acpsdk.ToolCallContent) []*acpgatev1.ToolCallContent {
	var out []*acpgatev1.ToolCallContent
	for _, c := range in {
		switch {
		case c.Content != nil:
			out = append(out, &acpgatev1.ToolCallContent{Item: &acpgatev1.ToolCallContent_Content{Content: ContentToProto(c.Content.Content)}})
		case c.Diff != nil:
			out = append(out, &acpgatev1.ToolCallContent{Item: &acpgatev1.ToolCallContent_Diff{Diff: &acpgatev1.Diff{
				Path: c.Diff.Path, OldText: c.Diff.OldText, NewText: c.Diff.NewText,
			}}})
		case c.Terminal != nil:
			out = append(out, &acpgatev1.ToolCallContent{Item: &acpgatev1.ToolCallContent_TerminalId{TerminalId: c.Terminal.TerminalId}})
		}
	}
	return out
}

func locations(in []acpsdk.ToolCallLocation) []*acpgatev1.ToolCallLocation {
	var out []*acpgatev1.ToolCallLocation
	for _, l := range in {
		loc := &acpgatev1.ToolCallLocation{Path: l.Path}
		if l.Line != nil {
			line := int64(*l.Line)
			loc.Line = &line
		}
		out = append(out, loc)
	}
	return out
}

func jsonOf(v any) string {
	if v == nil {
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
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
