package translate

import (
	"encoding/json"

	acpsdk "github.com/coder/acp-go-sdk"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// ToolCallUpdate converts an ACP tool call update (of a session/update, or
// the tool call a permission request is about) to the contract's.
func ToolCallUpdate(v acpsdk.ToolCallUpdate) *acpgatev1.ToolCallUpdate {
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
