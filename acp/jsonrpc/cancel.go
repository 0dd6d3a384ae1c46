package jsonrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
)

// ACP's $/cancel_request (a protocol-level notification, schema v1): the
// peer withdraws a request it sent. The connection honours it for the
// agent's requests it is serving: the handler's context is cancelled with
// ErrCancelledByPeer, and the request is answered with error -32800
// whatever the handler returns, as ACP prescribes ("an error response with
// code -32800"). A request already answered, or an id never seen, is
// ignored.

// CancelRequestMethod is the method of ACP's cancellation notification.
const CancelRequestMethod = "$/cancel_request"

// CodeRequestCancelled answers a request the peer withdrew.
const CodeRequestCancelled = -32800

// ErrCancelledByPeer is the cause of a request handler's context when the
// agent withdrew the request with $/cancel_request.
var ErrCancelledByPeer = errors.New("the agent withdrew the request ($/cancel_request)")

// serving registers a request being served under its id and returns its
// context; done unregisters it.
func (c *Conn) serving(id json.RawMessage) (ctx context.Context, done func()) {
	ctx, cancel := context.WithCancelCause(c.ctx)
	key := idKey(id)
	c.mu.Lock()
	if c.inbound == nil {
		c.inbound = make(map[string]context.CancelCauseFunc)
	}
	c.inbound[key] = cancel
	c.mu.Unlock()
	return ctx, func() {
		c.mu.Lock()
		delete(c.inbound, key)
		c.mu.Unlock()
		cancel(nil)
	}
}

// cancelInbound handles $/cancel_request's params; it reports false only
// for params that are not JSON.
func (c *Conn) cancelInbound(params json.RawMessage) bool {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return false
	}
	c.mu.Lock()
	cancel := c.inbound[idKey(p.RequestID)]
	c.mu.Unlock()
	if cancel == nil {
		c.log.Debug("ignoring $/cancel_request for a request not being served", "request", string(p.RequestID))
		return true
	}
	cancel(ErrCancelledByPeer)
	return true
}

// idKey is a request id in a canonical spelling, so that the id in
// $/cancel_request matches however the agent spaced it.
func idKey(id json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, id) != nil {
		return string(id)
	}
	return b.String()
}

// withdrawn reports whether ctx's request was withdrawn by the peer.
func withdrawn(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), ErrCancelledByPeer)
}
