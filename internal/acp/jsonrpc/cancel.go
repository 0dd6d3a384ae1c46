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
//
// It sends it too, for every request of its own that Call abandons (its
// context ended before the answer): the agent may stop work nobody will
// read. ACP has no capability that advertises support ("cancellation
// remains optional"), and a peer that does not implement it ignores the
// notification, so it is sent to every agent. Its answer, if one still
// comes (a result, or error -32800), matches no waiting call and is
// counted as unmatched. session/prompt is never abandoned this way: a turn
// is cancelled with session/cancel, the prompt-specific mechanism, and
// its answer awaited.

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

// cancelOutbound tells the agent that request id was abandoned. The write
// runs on its own goroutine, which Close waits for: it must not hold up
// the abandoning caller behind an agent that does not read its stdin,
// and it ends when that agent is stopped and the write fails.
func (c *Conn) cancelOutbound(id int64) {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	c.notices.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.notices.Done()
		if err := c.Notify(CancelRequestMethod, cancelRequestParams{RequestID: id}); err != nil {
			c.log.Debug("sending $/cancel_request failed", "request", id, "err", err)
		}
	}()
}

// cancelRequestParams are $/cancel_request's params (CancelRequestNotification).
type cancelRequestParams struct {
	RequestID int64 `json:"requestId"`
}
