package translate

import (
	"encoding/json"
	"maps"

	"google.golang.org/protobuf/types/known/structpb"
)

// The agent's _meta (of an update, of a response) and the other free-form
// JSON objects it sends, as the contract's Structs.

// ObjectStruct converts JSON objects the agent sent (its _meta, an
// elicitation's schema) to one Struct, the later ones' keys winning; nil
// when none is a non-empty JSON object (absent, null, or not an object:
// _meta is advisory, so a malformed one is dropped, not a protocol
// violation).
func ObjectStruct(raws ...json.RawMessage) *structpb.Struct {
	var merged map[string]any
	for _, raw := range raws {
		if len(raw) == 0 {
			continue
		}
		var m map[string]any
		if json.Unmarshal(raw, &m) != nil || len(m) == 0 {
			continue
		}
		if merged == nil {
			merged = m
			continue
		}
		maps.Copy(merged, m)
	}
	if merged == nil {
		return nil
	}
	s, err := structpb.NewStruct(merged)
	if err != nil {
		return nil
	}
	return s
}

// ResultMeta is the _meta of a response's result, as a Struct.
func ResultMeta(result json.RawMessage) *structpb.Struct {
	var head struct {
		Meta json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(result, &head) != nil {
		return nil
	}
	return ObjectStruct(head.Meta)
}
