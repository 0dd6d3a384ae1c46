package translate

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"unicode/utf8"
)

// scanTextChunk reads the params of a text chunk update without reflection:
// an object whose members are only sessionId and update, where update holds
// only sessionUpdate, messageId and content, and content only type and
// text, every value a string. It refuses (ok false) anything else — another
// member, a duplicate, a number, an escape it would have to interpret in a
// key — and the caller then decodes with encoding/json, so the scanner never
// decides what a message means, it only reads the common case faster. A
// fuzz target holds it to encoding/json's answer.
func scanTextChunk(params []byte, ids *IDCache) (p textChunk, ok bool) {
	s := scanner{b: params}
	var seen [5]bool // sessionId, update, sessionUpdate, messageId, content
	hasType := false
	if !s.object(func(key []byte) bool {
		switch string(key) {
		case "sessionId":
			if seen[0] {
				return false
			}
			seen[0] = true
			v, ok := s.id(ids.slot(0))
			p.sessionID = v
			return ok
		case "update":
			if seen[1] {
				return false
			}
			seen[1] = true
			return s.object(func(key []byte) bool {
				switch string(key) {
				case "sessionUpdate":
					if seen[2] {
						return false
					}
					seen[2] = true
					v, ok := s.str()
					p.kind = v
					return ok
				case "messageId":
					if seen[3] {
						return false
					}
					seen[3] = true
					v, ok := s.id(ids.slot(1))
					p.messageID, p.hasMessageID = v, true
					return ok
				case "content":
					if seen[4] {
						return false
					}
					seen[4] = true
					p.hasContent = true
					return s.object(func(key []byte) bool {
						switch string(key) {
						case "type":
							if hasType {
								return false
							}
							hasType = true
							v, ok := s.str()
							p.contentType = v
							return ok
						case "text":
							if p.hasText {
								return false
							}
							p.hasText = true
							v, ok := s.str()
							p.text = v
							return ok
						}
						return false
					})
				}
				return false
			})
		}
		return false
	}) {
		return textChunk{}, false
	}
	s.space()
	if s.i != len(s.b) || !seen[4] || !hasType || !p.hasText {
		return textChunk{}, false
	}
	return p, true
}

// wellKnown returns raw as a string, without allocating for the values
// every chunk repeats: its update kind and its content type.
func wellKnown(raw []byte) string {
	switch string(raw) {
	case "agent_message_chunk":
		return "agent_message_chunk"
	case "agent_thought_chunk":
		return "agent_thought_chunk"
	case "user_message_chunk":
		return "user_message_chunk"
	case "text":
		return "text"
	}
	return string(raw)
}

type scanner struct {
	b []byte
	i int
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) consume(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// object reads {"key": value, ...}, calling member for each key with the
// scanner positioned at the value; member consumes the value.
func (s *scanner) object(member func(key []byte) bool) bool {
	if !s.consume('{') {
		return false
	}
	if s.consume('}') {
		return true
	}
	for {
		s.space()
		key, ok := s.plainString()
		if !ok || !s.consume(':') {
			return false
		}
		s.space()
		if !member(key) {
			return false
		}
		if s.consume(',') {
			continue
		}
		return s.consume('}')
	}
}

// plainString reads a string without escapes or control characters, as
// valid UTF-8, and returns its bytes (valid until the buffer changes).
func (s *scanner) plainString() ([]byte, bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false
	}
	start := s.i + 1
	end := bytes.IndexByte(s.b[start:], '"')
	if end < 0 {
		return nil, false
	}
	raw := s.b[start : start+end]
	if !literal(raw) || !utf8.Valid(raw) {
		return nil, false
	}
	s.i = start + end + 1
	return raw, true
}

// literal reports whether b has no control character and no backslash:
// whether the bytes of a JSON string are its value. It tests eight bytes
// at a time (a 64 KiB chunk's text is most of what the scanner reads, and
// a byte at a time this loop was a seventh of the gateway's CPU on a flood
// of such chunks): with ones = 0x0101…01, a word w has a byte below 0x20
// exactly when (w − 0x20·ones) & ^w & 0x80·ones is not zero, and a
// backslash exactly when w ^ 0x5c·ones has a zero byte, tested the same
// way with 1 for 0x20.
func literal(b []byte) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for ; len(b) >= 8; b = b[8:] {
		w := binary.LittleEndian.Uint64(b)
		bs := w ^ (ones * '\\')
		if ((w-ones*0x20)&^w|(bs-ones)&^bs)&highs != 0 {
			return false
		}
	}
	for _, c := range b {
		if c < 0x20 || c == '\\' {
			return false
		}
	}
	return true
}

// IDCache keeps the last session id and message id a connection's chunks
// carried: every chunk of a message repeats both, and a string read anew
// is an allocation a chunk. Used by one goroutine (the connection's
// reader); nil keeps nothing.
type IDCache struct {
	ids [2]string // session id, message id
}

func (c *IDCache) slot(i int) *string {
	if c == nil {
		return nil
	}
	return &c.ids[i]
}

// id reads a string value like str, returning *last instead of a new
// string when they are equal, and keeping the value in *last otherwise.
func (s *scanner) id(last *string) (string, bool) {
	start := s.i
	raw, ok := s.plainString()
	if !ok || last == nil {
		s.i = start
		return s.str()
	}
	if string(raw) != *last {
		*last = string(raw)
	}
	return *last, true
}

// str reads a string value. A string with escapes is handed to
// encoding/json, which knows every rule (surrogates, invalid UTF-8); only
// the plain case is read here.
func (s *scanner) str() (string, bool) {
	if raw, ok := s.plainString(); ok {
		return wellKnown(raw), true
	}
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return "", false
	}
	end := s.i + 1
	for end < len(s.b) {
		switch s.b[end] {
		case '\\':
			end += 2
			continue
		case '"':
			var v string
			if json.Unmarshal(s.b[s.i:end+1], &v) != nil {
				return "", false
			}
			s.i = end + 1
			return v, true
		}
		end++
	}
	return "", false
}
