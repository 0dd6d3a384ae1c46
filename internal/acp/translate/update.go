package translate

import (
	"bytes"
	"encoding/json"
	"fmt"

	acpsdk "github.com/coder/acp-go-sdk"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// Update is a decoded session/update: the event to emit and what it means
// for message accumulation and for the session's state.
type Update struct {
	Event *acpgatev1.PromptEvent
	// Chunk is an agent_message_chunk's message id and text (text content
	// only; other content passes through as events only), when HasChunk.
	// A value, not a pointer: a pointer would cost every chunk an
	// allocation.
	Chunk    Chunk
	HasChunk bool
	// Splits is true for updates after which an id-less message ends: the
	// agent turned to tools.
	Splits bool
	// Commands updates the session's state outside turns too.
	Commands *acpgatev1.AvailableCommands
	// Settings updates the session's settings, outside turns too.
	Settings SettingsUpdate
}

// Chunk is what a message chunk adds to the answer being reassembled: its
// message id, and its text when its content is text (IsText).
type Chunk struct {
	MessageID string
	Text      string
	IsText    bool
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
func decodeTextChunk(params json.RawMessage, ids *IDCache) (sessionID string, u Update, ok bool) {
	p, scanned := scanTextChunk(params, ids)
	if !scanned {
		var slow chunkParams
		if json.Unmarshal(params, &slow) != nil {
			return "", Update{}, false
		}
		p = slow.flat()
	}
	if !p.hasContent || p.contentType != "text" || !p.hasText {
		return "", Update{}, false
	}
	ce := new(chunkEvent)
	ce.chunk.Text, ce.chunk.MessageId = p.text, p.messageID
	switch p.kind {
	case "agent_message_chunk":
		ce.agent.AgentMessageChunk = &ce.chunk
		ce.event.Event = &ce.agent
		u = Update{Chunk: Chunk{MessageID: p.messageID, Text: p.text, IsText: true}, HasChunk: true}
	case "agent_thought_chunk":
		ce.thought.AgentThoughtChunk = &ce.chunk
		ce.event.Event = &ce.thought
	case "user_message_chunk":
		ce.user.UserMessageChunk = &ce.chunk
		ce.event.Event = &ce.user
	default:
		return "", Update{}, false
	}
	u.Event = &ce.event
	if !scanned {
		u.Event.Meta = ObjectStruct(p.meta, p.updateMeta)
	}
	return p.sessionID, u, true
}

// Decode decodes the params of a session/update notification. An
// update kind this version does not model becomes a raw event, so nothing
// is silently dropped; an update that does not decode as its kind also
// passes through raw, with the decoding problem logged by the caller.
func Decode(params json.RawMessage, ids *IDCache) (sessionID string, u Update, err error) {
	if sessionID, u, ok := decodeTextChunk(params, ids); ok {
		return sessionID, u, nil
	}
	var head updateHead
	if err := json.Unmarshal(params, &head); err != nil {
		return "", Update{}, fmt.Errorf("session/update params: %w", err)
	}
	var kind kindHead
	if err := json.Unmarshal(head.Update, &kind); err != nil {
		return head.SessionID, Update{}, fmt.Errorf("session/update update: %w", err)
	}
	u, err = translateUpdate(kind.SessionUpdate, head.Update)
	if err != nil {
		u = rawUpdate(kind.SessionUpdate, head.Update)
	}
	// The update's own _meta wins over the notification's.
	u.Event.Meta = ObjectStruct(head.Meta, kind.Meta)
	return head.SessionID, u, err
}

func rawUpdate(kind string, raw json.RawMessage) Update {
	var compact bytes.Buffer
	if json.Compact(&compact, raw) != nil {
		compact.Reset()
		compact.Write(raw)
	}
	return Update{Event: &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_Raw{
		Raw: &acpgatev1.RawUpdate{Kind: kind, Json: compact.String()},
	}}}
}

func translateUpdate(kind string, raw json.RawMessage) (Update, error) {
	switch kind {
	case "agent_message_chunk":
		var v acpsdk.SessionUpdateAgentMessageChunk
		if err := json.Unmarshal(raw, &v); err != nil {
			return Update{}, err
		}
		chunk, info := messageChunk(v.MessageId, v.Content)
		return Update{Event: &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_AgentMessageChunk{AgentMessageChunk: chunk}}, Chunk: info, HasChunk: true}, nil
	case "agent_thought_chunk":
		var v acpsdk.SessionUpdateAgentThoughtChunk
		if err := json.Unmarshal(raw, &v); err != nil {
			return Update{}, err
		}
		chunk, _ := messageChunk(v.MessageId, v.Content)
		return Update{Event: &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_AgentThoughtChunk{AgentThoughtChunk: chunk}}}, nil
	case "user_message_chunk":
		var v acpsdk.SessionUpdateUserMessageChunk
		if err := json.Unmarshal(raw, &v); err != nil {
			return Update{}, err
		}
		chunk, _ := messageChunk(v.MessageId, v.Content)
		return Update{Event: &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_UserMessageChunk{UserMessageChunk: chunk}}}, nil
	case "tool_call":
		var v acpsdk.SessionUpdateToolCall
		if err := json.Unmarshal(raw, &v); err != nil {
			return Update{}, err
		}
		return Update{Splits: true, Event: &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_ToolCall{ToolCall: &acpgatev1.ToolCall{
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
			return Update{}, err
		}
		return Update{Splits: true, Event: &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_ToolCallUpdate{ToolCallUpdate: ToolCallUpdate(v)}}}, nil
	case "plan":
		var v acpsdk.SessionUpdatePlan
		if err := json.Unmarshal(raw, &v); err != nil {
			return Update{}, err
		}
		plan := &acpgatev1.Plan{}
		for _, e := range v.Entries {
			plan.Entries = append(plan.Entries, &acpgatev1.PlanEntry{Content: e.Content, Priority: string(e.Priority), Status: string(e.Status)})
		}
		return Update{Event: &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_Plan{Plan: plan}}}, nil
	case "available_commands_update":
		var v acpsdk.SessionAvailableCommandsUpdate
		if err := json.Unmarshal(raw, &v); err != nil {
			return Update{}, err
		}
		cmds := &acpgatev1.AvailableCommands{}
		for _, c := range v.AvailableCommands {
			cmd := &acpgatev1.AvailableCommand{Name: c.Name, Description: c.Description}
			if c.Input != nil && c.Input.Unstructured != nil {
				cmd.InputHint = c.Input.Unstructured.Hint
			}
			cmds.Commands = append(cmds.Commands, cmd)
		}
		return Update{Commands: cmds, Event: &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_AvailableCommands{AvailableCommands: cmds}}}, nil
	case "current_mode_update":
		var v acpsdk.SessionCurrentModeUpdate
		if err := json.Unmarshal(raw, &v); err != nil {
			return Update{}, err
		}
		return Update{Settings: SettingsUpdate{Mode: string(v.CurrentModeId)}, Event: &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_CurrentMode{
			CurrentMode: &acpgatev1.CurrentMode{ModeId: string(v.CurrentModeId)},
		}}}, nil
	case "config_option_update":
		var v struct {
			ConfigOptions []WireOption `json:"configOptions"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return Update{}, err
		}
		opts := ConfigOptions(v.ConfigOptions)
		return Update{Settings: SettingsUpdate{Options: opts, HasOptions: true}, Event: &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_ConfigOptions{
			ConfigOptions: &acpgatev1.ConfigOptions{Options: opts},
		}}}, nil
	case "usage_update":
		var v acpsdk.SessionUsageUpdate
		if err := json.Unmarshal(raw, &v); err != nil {
			return Update{}, err
		}
		size, used := int64(v.Size), int64(v.Used)
		usage := &acpgatev1.Usage{ContextSize: &size, ContextUsed: &used}
		if v.Cost != nil {
			amount := v.Cost.Amount
			usage.CostAmount, usage.CostCurrency = &amount, v.Cost.Currency
		}
		return Update{Event: &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_Usage{Usage: usage}}}, nil
	default:
		return rawUpdate(kind, raw), nil
	}
}

// messageChunk is the contract's chunk for an ACP content block: a text
// block's text in text alone, any other block in content alone, so a chunk
// carries its text once (on the wire, in the journal, in every replay).
func messageChunk(id *string, content acpsdk.ContentBlock) (*acpgatev1.MessageChunk, Chunk) {
	chunk := &acpgatev1.MessageChunk{}
	info := Chunk{}
	if id != nil {
		chunk.MessageId, info.MessageID = *id, *id
	}
	if content.Text != nil {
		chunk.Text = content.Text.Text
		info.Text, info.IsText = content.Text.Text, true
	} else {
		chunk.Content = ContentToProto(content)
	}
	return chunk, info
}
