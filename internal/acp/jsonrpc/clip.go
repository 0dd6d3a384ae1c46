package jsonrpc

import (
	"fmt"
	"strings"
)

// MaxShownBytes is how much of a string of the agent's the gateway shows,
// in its log or in an error: ids, stray lines, undecodable answers. What
// the agent writes may be megabytes long (up to the frame limit) and is
// its doing; an operator needs enough to recognise it, and a log line per
// agent line of megabytes would let the agent fill the disk. One length
// and one form everywhere, so that a cut string always reads the same.
const MaxShownBytes = 256

// Clip is s as the gateway shows an agent's string: whole when it is at
// most MaxShownBytes long, otherwise its first MaxShownBytes (less a rune
// cut in two) followed by "… (N bytes)", N being its whole length.
func Clip[S ~string | ~[]byte](s S) string {
	if len(s) <= MaxShownBytes {
		return string(s)
	}
	return fmt.Sprintf("%s… (%d bytes)", strings.ToValidUTF8(string(s[:MaxShownBytes]), ""), len(s))
}
