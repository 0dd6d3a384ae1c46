package jsonrpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/acpgate/acpgate/internal/bytebudget"
	"time"
	"unicode/utf8"
)

// The answers to an agent's requests are bounded in bytes as well as in
// number (Options.MaxInFlightRequests). The slots alone let an agent that
// sends reads of large files and never reads its stdin make the gateway
// hold as many of them as there are slots: sixteen 8 MiB reads, each held
// as the file's text, its encoding and the encoder's grown buffer, cost
// over 300 MiB. A connection lends its answers at most
// Options.MaxReplyBytes, counted from before an answer is built (a handler
// reserves what it is about to read, Reserve) until it has been written,
// and holds each answer once: a TextResult's text is escaped as it is
// written, never encoded whole beside it.
//
// A request whose answer does not fit waits for room, up to
// Options.ReplyWait, and is then answered with an error saying why. The
// wait is what an honest agent meets: it reads its answers, the room frees
// within milliseconds, and its parallel reads all succeed. An agent that
// does not read gets, after the wait, a small error in place of each
// answer that would not fit; those errors wait in its pipe with the rest,
// within the slots, and the turn's cancel grace ends it. Refusing at once
// would fail an honest agent's parallel reads of large files; waiting
// without a bound would hold a request, and its slot, for as long as the
// agent chose.

// DefaultMaxReplyBytes is Options.MaxReplyBytes when it is not set: four
// of the largest file reads the gateway serves (8 MiB), and the cost to
// the gateway of an agent that floods it with them and does not read.
const DefaultMaxReplyBytes = 32 << 20

// DefaultReplyWait is Options.ReplyWait when it is not set. An agent that
// reads its stdin frees the room for an answer in milliseconds; ten
// seconds is a slow agent, not one that reads.
const DefaultReplyWait = 10 * time.Second

// CodeReplyLimit answers a request whose answer did not fit the bytes a
// connection holds for answers not yet read (a JSON-RPC server error code).
const CodeReplyLimit = -32001

// replyBudget is the bytes a connection lends to answers being built or
// waiting to be written.
type replyBudget struct{ *bytebudget.Budget }

func newReplyBudget(capacity int64, wait time.Duration) *replyBudget {
	return &replyBudget{bytebudget.New(capacity, wait)}
}

// take lends n bytes, waiting for room up to the budget's wait; it fails
// at once for an answer larger than the whole budget, which no wait can
// make room for.
func (b *replyBudget) take(ctx context.Context, n int64) *ErrorObject {
	if n > b.Size() {
		return &ErrorObject{Code: CodeReplyLimit, Message: fmt.Sprintf(
			"the answer would hold %d bytes, more than the %d bytes the gateway holds for this agent's answers (limits.max_agent_reply_bytes); ask for less at once (a read with line and limit)", n, b.Size())}
	}
	ok, err := b.Take(ctx, n)
	switch {
	case err != nil:
		return &ErrorObject{Code: CodeRequestCancelled, Message: "request cancelled while waiting for the agent to read earlier answers: " + err.Error()}
	case !ok:
		return &ErrorObject{Code: CodeReplyLimit, Message: fmt.Sprintf(
			"the gateway already holds %d bytes of answers this agent has not read (limits.max_agent_reply_bytes), and none was read for %s; read the answers on stdin before asking for more", b.Size(), b.Wait())}
	}
	return nil
}

// give returns n bytes and wakes every request waiting for room. Giving
// nothing touches nothing: an account that never took may have no budget.
func (b *replyBudget) give(n int64) {
	if n != 0 {
		b.Give(n)
	}
}

// account is what one request being served holds of its connection's
// budget. It is used by the request's own goroutine only.
type account struct {
	budget *replyBudget
	held   int64
}

type accountKey struct{}

// settle makes what the request holds exactly n bytes.
func (a *account) settle(ctx context.Context, n int64) *ErrorObject {
	if n <= a.held {
		a.budget.give(a.held - n)
		a.held = n
		return nil
	}
	if err := a.budget.take(ctx, n-a.held); err != nil {
		return err
	}
	a.held = n
	return nil
}

func (a *account) release() {
	a.budget.give(a.held)
	a.held = 0
}

// Reserve takes n more bytes of the connection's answer budget for the
// answer the request served under ctx is about to build, before it
// allocates them: a file read reserves the file's size before reading it.
// It waits for room as the package's answers do, and returns the error to
// answer with when there is none. What a request reserved is settled to
// the size of its answer once the handler returns and released once the
// answer is written. Outside a connection's handler it reserves nothing.
func Reserve(ctx context.Context, n int64) *ErrorObject {
	a, ok := ctx.Value(accountKey{}).(*account)
	if !ok {
		return nil
	}
	if err := a.budget.take(ctx, n); err != nil {
		return err
	}
	a.held += n
	return nil
}

// TextResult is a result of one string member, {"<Member>":"<Text>"}, the
// shape of a file read's answer. The connection holds it as Text alone and
// escapes it as it writes it: encoded whole it would be held twice (and
// its encoder's buffer, grown by doubling, up to twice more).
type TextResult struct {
	Member string
	Text   string
}

// answer is one encoded answer, held until written: the envelope around
// the result, and the result as encoded bytes or as a TextResult.
type answer struct {
	head, tail []byte
	body       []byte
	text       *TextResult
}

// size is what the answer holds.
func (a *answer) size() int64 {
	n := int64(len(a.head) + len(a.body) + len(a.tail))
	if a.text != nil {
		n += int64(len(a.text.Text))
	}
	return n
}

// encodeAnswer encodes the answer to request id.
func encodeAnswer(id json.RawMessage, result any, rpcErr *ErrorObject) (*answer, error) {
	head := append(append([]byte(`{"jsonrpc":"2.0","id":`), id...), ',')
	if rpcErr != nil {
		body, err := marshal(rpcErr)
		if err != nil {
			return nil, err
		}
		return &answer{head: append(head, `"error":`...), body: body, tail: []byte("}\n")}, nil
	}
	head = append(head, `"result":`...)
	if t, ok := result.(TextResult); ok {
		member, err := marshal(t.Member)
		if err != nil {
			return nil, err
		}
		head = append(append(append(head, '{'), member...), `:"`...)
		return &answer{head: head, text: &t, tail: []byte("\"}}\n")}, nil
	}
	if result == nil {
		result = struct{}{}
	}
	body, err := marshal(result)
	if err != nil {
		return nil, err
	}
	return &answer{head: head, body: body, tail: []byte("}\n")}, nil
}

// marshal encodes v as the connection writes JSON: without HTML escaping.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// writeAnswer writes an answer as one line.
func (c *Conn) writeAnswer(a *answer) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if _, err := c.w.Write(a.head); err != nil {
		return err
	}
	if a.text != nil {
		if err := writeEscaped(c.w, a.text.Text); err != nil {
			return err
		}
	} else if _, err := c.w.Write(a.body); err != nil {
		return err
	}
	if _, err := c.w.Write(a.tail); err != nil {
		return err
	}
	return c.w.Flush()
}

// escapeChunk is how much text writeEscaped escapes at a time.
const escapeChunk = 32 << 10

// writeEscaped writes s as the inside of a JSON string, exactly as
// encoding/json escapes it (it does the escaping), a chunk at a time. A
// chunk ends before a byte that starts a UTF-8 sequence, or 3 bytes back
// at most, so no valid sequence is split and every chunk decodes as it
// would within the whole.
func writeEscaped(w *bufio.Writer, s string) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for len(s) > 0 {
		n := min(len(s), escapeChunk)
		for back := 0; n < len(s) && back < utf8.UTFMax-1 && !utf8.RuneStart(s[n]); back++ {
			n--
		}
		b.Reset()
		if err := enc.Encode(s[:n]); err != nil {
			return err
		}
		quoted := b.Bytes() // "…"\n
		if _, err := w.Write(quoted[1 : len(quoted)-2]); err != nil {
			return err
		}
		s = s[n:]
	}
	return nil
}
