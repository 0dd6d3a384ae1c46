package fakegemini

import "strings"

// jsonSchema is the part of a response schema the stand-in reads: the
// Gemini API's Schema (types in upper case) and JSON Schema (lower case)
// alike.
type jsonSchema struct {
	Type       any                    `json:"type"` // a name, or a list of names in JSON Schema
	Enum       []any                  `json:"enum"`
	Properties map[string]*jsonSchema `json:"properties"`
	Items      *jsonSchema            `json:"items"`
}

// smallest is the smallest value of the schema: every property of an
// object, the first value of an enum, text for a string, zero, false, an
// empty list.
func (s *jsonSchema) smallest(text string) any {
	if s == nil {
		return map[string]any{}
	}
	if len(s.Enum) > 0 {
		return s.Enum[0]
	}
	switch s.typeName() {
	case "string":
		return text
	case "number", "integer":
		return 0
	case "boolean":
		return false
	case "array":
		return []any{}
	case "null":
		return nil
	default:
		obj := map[string]any{}
		for name, p := range s.Properties {
			obj[name] = p.smallest(text)
		}
		return obj
	}
}

// typeName is the schema's type in lower case: the first that is not
// "null" when JSON Schema lists several.
func (s *jsonSchema) typeName() string {
	switch t := s.Type.(type) {
	case string:
		return strings.ToLower(t)
	case []any:
		for _, v := range t {
			if name, ok := v.(string); ok && name != "null" {
				return strings.ToLower(name)
			}
		}
	}
	if len(s.Properties) > 0 {
		return "object"
	}
	return ""
}
