// Package jsonrpc is the gateway's JSON-RPC 2.0 connection to an ACP agent:
// newline-delimited JSON over the agent's stdin and stdout.
//
// It exists, rather than a general-purpose JSON-RPC library, to keep the
// three ways a request can end distinct: the agent answered (an id-matched
// response, exactly as sent), the agent's stdout ended, or reading from or
// writing to it failed. A connection that reports a vanished peer in the
// shape of an error response, or that logs and skips an undecodable answer,
// would make the gateway assert a cause that did not happen.
//
// Threading model: one reader goroutine per connection reads lines in order.
// Responses are routed to their waiting Call by id. Notifications are handed
// to Handler.Notify on the reader goroutine, in arrival order, so a slow
// consumer slows the reader and, through the pipe, the agent: memory does not
// grow. Requests from the agent are served concurrently, each on its own
// goroutine, so an agent waiting for one answer never blocks the stream.
// Writes go through one mutex, one line at a time.
//
// Requests in flight are bounded (Options.MaxInFlightRequests): a request
// holds its slot from the moment it is read until its answer has been
// written. When every slot is taken the reader stops reading, exactly as a
// slow consumer of notifications makes it, until a slot frees: no goroutine
// and no buffer exist for requests beyond the bound, which wait in the
// agent's pipe. Without the bound an agent that sends requests and never
// reads its stdin makes the gateway hold every answer, each on a goroutine
// blocked writing it: sixty reads of an 8 MiB file cost over 600 MiB. The
// bytes those answers hold are bounded too (Options.MaxReplyBytes, see
// replies.go), each answer held once, so that large answers in every slot
// do not multiply the largest answer by the slots. The wait for a
// slot ends when the connection is closed, so Close never waits on it. An
// agent that stops reading while its requests wait to be answered stalls
// only itself: its writes block, the reader waits, and the turn's cancel
// grace stops the agent, which fails the blocked writes and frees every
// slot. Nothing the gateway sends may wait for those writes on a path that
// must reach the grace (see acp's requestCancel).
package jsonrpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acpgate/acpgate/internal/throttle"
	"github.com/acpgate/acpgate/outcome"
)

// DefaultMaxFrameBytes is the longest line accepted from an agent when
// Options.MaxFrameBytes is not set.
const DefaultMaxFrameBytes = 16 << 20

// DefaultMaxInFlightRequests is how many of the agent's requests are served
// at once when Options.MaxInFlightRequests is not set. An ACP agent has a
// few outstanding at a time (a permission request or a file read per tool
// call it runs in parallel), so 16 never slows an honest agent; and 16
// answers of the largest file read the gateway serves (8 MiB by default)
// are 128 MiB, the most a hostile agent can make one connection hold.
const DefaultMaxInFlightRequests = 16

// ErrorObject is a JSON-RPC error, as the gateway sends it to an agent.
type ErrorObject struct {
	Code    int64  `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

func (e *ErrorObject) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }

// Standard JSON-RPC error codes the gateway answers with.
const (
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
)

// Handler serves what the agent sends on its own initiative.
type Handler interface {
	// Request serves one request from the agent on its own goroutine. The
	// context is cancelled when the connection closes. Returning a non-nil
	// *ErrorObject answers with that error.
	Request(ctx context.Context, method string, params json.RawMessage) (any, *ErrorObject)
	// Notify handles one notification on the reader goroutine, in arrival
	// order. It may block: that is the connection's backpressure. params
	// is valid only during the call, and may not have been checked to be
	// valid JSON: Notify returns false, having done nothing, when it is
	// not, and the line is then handled as the stray line it is.
	Notify(method string, params json.RawMessage) bool
}

// An IdleHandler is a Handler that is also told, on the reader goroutine,
// each time the reader has handled every complete line it holds and is
// about to wait for more of the agent's output, and each time it is about
// to wait for a request slot (see the package doc). That is the moment for
// a consumer that holds notifications' effects back, to send several at
// once, to send them: holding them longer would delay them for nothing.
type IdleHandler interface {
	Handler
	Idle()
}

// Options configure a Conn.
type Options struct {
	// MaxFrameBytes is the longest line accepted; a longer one fails the
	// connection. DefaultMaxFrameBytes when zero.
	MaxFrameBytes int
	// StrictFraming makes a line that is not a JSON-RPC message a protocol
	// violation that ends the connection. Otherwise such lines (real agents
	// sometimes print stray text on stdout) are logged, counted and skipped.
	StrictFraming bool
	// Logger receives diagnostics; slog.Default() when nil.
	Logger *slog.Logger
	// MaxInFlightRequests bounds the agent's requests being served at
	// once; when they are all taken the reader waits for one to be
	// answered (see the package doc). DefaultMaxInFlightRequests when
	// zero or negative.
	MaxInFlightRequests int
	// MaxReplyBytes bounds the bytes the answers to the agent's requests
	// hold, from before they are built until they are written (see
	// replies.go). DefaultMaxReplyBytes when zero or negative.
	MaxReplyBytes int64
	// ReplyWait bounds how long a request waits for room for its answer
	// before it is answered with an error. DefaultReplyWait when zero or
	// negative.
	ReplyWait time.Duration
}

// EndKind is how a connection's input ended.
type EndKind int

const (
	// EndStream: the agent closed its stdout.
	EndStream EndKind = iota + 1
	// EndTransport: reading failed, or a line exceeded the frame limit.
	EndTransport
	// EndViolation: the agent broke the framing contract under strict
	// framing.
	EndViolation
	// EndClosed: the gateway closed the connection itself.
	EndClosed
)

// End records why a connection's input ended.
type End struct {
	Kind   EndKind
	Detail string
}

// Reply is how one call ended: with the agent's response, or with the end
// of the connection before any response arrived.
type Reply struct {
	// Response is the id-matched response; valid when End is nil.
	Response outcome.Response
	// End is set when the connection ended with the call outstanding.
	End *End
	// Violation is set when a line that names this call's id arrived but
	// does not decode: the agent answered, in a form that breaks the wire
	// contract.
	Violation string
}

// Stats counts the irregularities a connection tolerated.
type Stats struct {
	// SkippedLines counts stdout lines that were not JSON-RPC messages.
	SkippedLines uint64
	// UnmatchedResponses counts responses that matched no outstanding call.
	UnmatchedResponses uint64
}

// Conn is a JSON-RPC connection to one agent.
type Conn struct {
	opts    Options
	log     *slog.Logger
	handler Handler
	idle    IdleHandler   // handler, when it is one
	slots   chan struct{} // one token per request being served
	replies *replyBudget  // the bytes the answers being served hold

	writeMu sync.Mutex
	w       *bufio.Writer

	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan Reply
	end     *End
	inbound map[string]context.CancelCauseFunc // the agent's requests being served, by id

	done     chan struct{} // closed when the reader has ended
	ctx      context.Context
	cancel   context.CancelFunc
	handlers sync.WaitGroup
	notices  sync.WaitGroup // $/cancel_request notifications being written
	closing  bool           // Close is waiting for notices; under mu

	skipped   atomic.Uint64
	unmatched atomic.Uint64
	// strays spaces the warnings about lines the gateway cannot use: the
	// agent decides how many it writes.
	strays throttle.Throttle
}

// New starts a connection reading r and writing w. The reader goroutine runs
// until r ends or fails; Close waits for it and for every request handler.
func New(r io.Reader, w io.Writer, h Handler, opts Options) *Conn {
	if opts.MaxFrameBytes <= 0 {
		opts.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if opts.MaxInFlightRequests <= 0 {
		opts.MaxInFlightRequests = DefaultMaxInFlightRequests
	}
	if opts.MaxReplyBytes <= 0 {
		opts.MaxReplyBytes = DefaultMaxReplyBytes
	}
	if opts.ReplyWait <= 0 {
		opts.ReplyWait = DefaultReplyWait
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	idle, _ := h.(IdleHandler)
	c := &Conn{
		opts:    opts,
		log:     log,
		handler: h,
		idle:    idle,
		slots:   make(chan struct{}, opts.MaxInFlightRequests),
		replies: newReplyBudget(opts.MaxReplyBytes, opts.ReplyWait),
		w:       bufio.NewWriterSize(w, 64<<10),
		pending: make(map[int64]chan Reply),
		done:    make(chan struct{}),
		ctx:     ctx,
		cancel:  cancel,
	}
	go c.read(r)
	return c
}

// Done is closed when the connection's input has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Ended reports why the input ended, or nil while it is still open.
func (c *Conn) Ended() *End {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.end
}

// Stats returns the connection's counters.
func (c *Conn) Stats() Stats {
	return Stats{SkippedLines: c.skipped.Load(), UnmatchedResponses: c.unmatched.Load()}
}

// Call sends a request and waits for its reply. It returns an error only
// when the request could not be sent or ctx ended first; every way the agent
// can end the call is a Reply.
func (c *Conn) Call(ctx context.Context, method string, params any) (Reply, error) {
	ch, id, err := c.Start(method, params)
	if err != nil {
		return Reply{}, err
	}
	select {
	case reply := <-ch:
		return reply, nil
	case <-ctx.Done():
		if c.forget(id) {
			c.cancelOutbound(id)
		}
		return Reply{}, ctx.Err()
	}
}

// Start sends a request and returns the channel its single Reply arrives on.
// It is for callers that must do other work while they wait (a prompt turn
// that may need to cancel). If the write fails because the agent's input is
// gone, the reply reports how the connection ended.
func (c *Conn) Start(method string, params any) (<-chan Reply, int64, error) {
	ch := make(chan Reply, 1)
	c.mu.Lock()
	if c.end != nil {
		end := *c.end
		c.mu.Unlock()
		ch <- Reply{End: &end}
		return ch, 0, nil
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = ch
	c.mu.Unlock()

	msg := struct {
		JSONRPC string `json:"jsonrpc"`
		ID      int64  `json:"id"`
		Method  string `json:"method"`
		Params  any    `json:"params,omitempty"`
	}{"2.0", id, method, params}
	if err := c.write(msg); err != nil {
		var encodeErr *json.UnsupportedTypeError
		if errors.As(err, &encodeErr) {
			c.forget(id)
			return nil, 0, fmt.Errorf("encoding %s: %w", method, err)
		}
		// The agent stopped reading: its stdin is closed or broken. The
		// reader will observe how its stdout ended and answer the call.
		c.log.Debug("writing to the agent failed", "method", method, "err", err)
	}
	return ch, id, nil
}

// Notify sends a notification.
func (c *Conn) Notify(method string, params any) error {
	msg := struct {
		JSONRPC string `json:"jsonrpc"`
		Method  string `json:"method"`
		Params  any    `json:"params,omitempty"`
	}{"2.0", method, params}
	return c.write(msg)
}

// forget stops waiting for request id's reply; it reports whether the
// request was still unanswered.
func (c *Conn) forget(id int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, pending := c.pending[id]
	delete(c.pending, id)
	return pending
}

// Close stops serving: it cancels request handlers and waits for them and
// for the reader. The caller must have made the reader's input end (by
// closing or killing the agent) or Close blocks until it does, unless the
// reader is waiting for a request slot: that wait ends at once. A handler
// blocked writing its answer to an agent that does not read ends when the
// agent is stopped and the write fails.
func (c *Conn) Close() {
	c.cancel()
	<-c.done
	c.handlers.Wait()
	c.mu.Lock()
	c.closing = true // no notice starts after the Wait begins
	c.mu.Unlock()
	c.notices.Wait()
}

// write encodes msg and writes it, one message at a time. The encoding is
// written from encoding/json's own buffer, which it keeps in a sync.Pool
// that the garbage collector empties: a connection keeps no buffer of its
// own, which one large answer (an 8 MiB file read) would have grown for
// the connection's whole life, and no second copy of the encoding exists.
// That buffer holds one encoding at a time, under writeMu, while the write
// waits for the agent to read: at most about twice (growth by doubling)
// six times (JSON escapes a control byte as six) the largest string the
// message carries.
func (c *Conn) write(msg any) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	enc := json.NewEncoder(c.w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(msg); err != nil { // Encode appends the '\n'.
		return err
	}
	return c.w.Flush()
}

// envelope is any JSON-RPC message; which members are present says which.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

func (c *Conn) read(r io.Reader) {
	reader := newLineReader(r, c.opts.MaxFrameBytes)
	end := End{Kind: EndStream}
	for {
		if c.idle != nil && !reader.holdsLine() {
			c.idle.Idle()
		}
		line, err := reader.next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				end = End{Kind: EndTransport, Detail: err.Error()}
			}
			break
		}
		if v := c.dispatch(line); v != "" {
			end = End{Kind: EndViolation, Detail: v}
			break
		}
		if c.ctx.Err() != nil {
			end = End{Kind: EndClosed, Detail: "the gateway closed the connection"}
			break
		}
	}
	c.mu.Lock()
	c.end = &end
	pending := c.pending
	c.pending = nil
	c.mu.Unlock()
	for _, ch := range pending {
		e := end
		ch <- Reply{End: &e}
	}
	close(c.done)
}

// notify handles a notification: $/cancel_request here, the others by the
// handler. It reports false for params that are not JSON.
func (c *Conn) notify(method string, params json.RawMessage) bool {
	if method == CancelRequestMethod {
		return c.cancelInbound(params)
	}
	return c.handler.Notify(method, params)
}

// dispatch routes one line. It returns a description of a framing violation
// that must end the connection, or "".
func (c *Conn) dispatch(line []byte) string {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return ""
	}
	if method, params, ok := splitNotification(line); ok && c.notify(method, params) {
		return ""
	}
	var env envelope
	if line[0] != '{' || json.Unmarshal(line, &env) != nil {
		return c.stray(line)
	}
	hasID := len(env.ID) > 0 && !bytes.Equal(env.ID, []byte("null"))
	switch {
	case env.Method != "" && hasID:
		if !c.takeSlot() {
			return "" // closed: the reader stops after this line
		}
		c.handlers.Add(1)
		// Registered here, on the reader, so that a $/cancel_request
		// read after the request always finds it.
		ctx, done := c.serving(env.ID)
		go c.serve(ctx, done, env)
	case env.Method != "":
		c.notify(env.Method, env.Params)
	case hasID:
		c.route(env)
	default:
		return c.stray(line)
	}
	return ""
}

// notificationPrefix starts a notification in the member order agents
// overwhelmingly write (the JSON-RPC libraries of the ACP SDKs among them).
var notificationPrefix = []byte(`{"jsonrpc":"2.0","method":"`)

// splitNotification finds the method and params of a notification line
// written as {"jsonrpc":"2.0","method":M,"params":P} without decoding it.
// Agents stream thousands of updates per turn, and decoding the envelope
// before the params would read every update twice. The split is exact or
// refused: P is everything between "params": and the line's final brace, so
// if anything else followed P (an id, a second member) P is not one valid
// JSON value, the handler's decoding fails, and the line takes the general
// path.
func splitNotification(line []byte) (method string, params []byte, ok bool) {
	rest, ok := bytes.CutPrefix(line, notificationPrefix)
	if !ok {
		return "", nil, false
	}
	end := bytes.IndexByte(rest, '"')
	if end < 0 || bytes.IndexByte(rest[:end], '\\') >= 0 {
		return "", nil, false
	}
	method = string(rest[:end])
	rest, ok = bytes.CutPrefix(rest[end+1:], []byte(`,"params":`))
	if !ok || len(rest) < 2 || rest[len(rest)-1] != '}' {
		return "", nil, false
	}
	return method, rest[:len(rest)-1], true
}

func (c *Conn) stray(line []byte) string {
	shown := Clip(line)
	if id, ok := undecodableAnswer(line); ok {
		c.mu.Lock()
		ch, pending := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		if pending {
			ch <- Reply{Violation: fmt.Sprintf("the agent answered request %d with a line that is not valid JSON: %q", id, shown)}
			return ""
		}
	}
	if c.opts.StrictFraming {
		return fmt.Sprintf("the agent wrote a line that is not a JSON-RPC message on stdout (strict framing): %q", shown)
	}
	c.skipped.Add(1)
	c.strays.Warn(c.log, "skipping a stdout line that is not a JSON-RPC message", "line", shown)
	return ""
}

// answerID finds the id member of a broken JSON-RPC response line.
var answerID = regexp.MustCompile(`^\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?\d+)\s*,\s*"(?:result|error)"`)

// undecodableAnswer recognises a line that starts like a response to one of
// our requests but is not valid JSON. Only this narrow shape counts: any
// other stray text stays stray.
func undecodableAnswer(line []byte) (int64, bool) {
	m := answerID.FindSubmatch(line)
	if m == nil {
		return 0, false
	}
	id, err := strconv.ParseInt(string(m[1]), 10, 64)
	return id, err == nil
}

func (c *Conn) route(env envelope) {
	id, err := strconv.ParseInt(string(env.ID), 10, 64)
	c.mu.Lock()
	ch, ok := c.pending[id]
	if ok && err == nil {
		delete(c.pending, id)
	}
	c.mu.Unlock()
	if err != nil || !ok {
		c.unmatched.Add(1)
		c.strays.Warn(c.log, "a response matched no outstanding request", "id", Clip(env.ID))
		return
	}
	ch <- Reply{Response: outcome.Response{Result: env.Result, Error: env.Error}}
}

// takeSlot waits for a free request slot, on the reader goroutine, so that
// the agent's output is not read while every slot is taken. It reports
// false when the connection was closed first. Before waiting it tells an
// IdleHandler, as before waiting for the agent: the reader is about to
// stop, and what a consumer holds back must not wait with it.
func (c *Conn) takeSlot() bool {
	select {
	case c.slots <- struct{}{}:
		return true
	default:
	}
	if c.idle != nil {
		c.idle.Idle()
	}
	select {
	case c.slots <- struct{}{}:
		return true
	case <-c.ctx.Done():
		return false
	}
}

// serve answers one request and then frees its slot: the slot covers the
// answer until it is written, since an answer waiting for an agent that
// does not read is what the bound is there to limit. So does the answer's
// account of the connection's reply budget (see replies.go).
func (c *Conn) serve(ctx context.Context, done func(), env envelope) {
	defer c.handlers.Done()
	defer func() { <-c.slots }()
	acc := &account{budget: c.replies}
	defer acc.release()
	ctx = context.WithValue(ctx, accountKey{}, acc)
	result, rpcErr := c.handler.Request(ctx, env.Method, env.Params)
	if rpcErr != nil {
		acc.release() // an error answer is small; what was reserved for a result is not held
	}
	a, err := encodeAnswer(env.ID, result, rpcErr)
	if err != nil {
		a, err = encodeAnswer(env.ID, nil, &ErrorObject{Code: CodeInternalError, Message: fmt.Sprintf("encoding the answer to %s: %v", env.Method, err)})
	}
	if err == nil && rpcErr == nil {
		if limitErr := acc.settle(ctx, a.size()); limitErr != nil {
			acc.release()
			a, err = encodeAnswer(env.ID, nil, limitErr)
		}
	}
	done()
	if withdrawn(ctx) {
		acc.release()
		a, err = encodeAnswer(env.ID, nil, &ErrorObject{Code: CodeRequestCancelled, Message: "request cancelled: " + ErrCancelledByPeer.Error()})
	}
	if err == nil {
		err = c.writeAnswer(a)
	}
	if err != nil {
		c.log.Debug("answering the agent failed", "method", env.Method, "err", err)
	}
}
