package jsonrpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"
)

// waitingHandler serves "wait" until its context ends, reporting the cause.
type waitingHandler struct {
	recordingHandler
	causes chan error
}

func (h waitingHandler) Request(ctx context.Context, method string, params json.RawMessage) (any, *ErrorObject) {
	if method != "wait" {
		return h.recordingHandler.Request(ctx, method, params)
	}
	select {
	case <-ctx.Done():
		h.causes <- context.Cause(ctx)
		return map[string]string{"late": "answer"}, nil
	case <-time.After(10 * time.Second):
		return nil, &ErrorObject{Code: CodeInternalError, Message: "never withdrawn"}
	}
}

func TestARequestTheAgentWithdrawsIsAnsweredRequestCancelledAndOthersAreNot(t *testing.T) {
	notes := make(chan string, 10)
	h := waitingHandler{recordingHandler{notes}, make(chan error, 1)}
	p := newPeerServing(t, Options{}, h, notes)
	p.send(`{"jsonrpc":"2.0","id":"w-1","method":"wait","params":{}}`)
	p.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"unknown"}}`)
	p.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId": "w-1"}}`)
	m := p.read()
	if m["id"] != "w-1" || m["error"].(map[string]any)["code"] != float64(CodeRequestCancelled) || m["result"] != nil {
		t.Errorf("the withdrawn request was answered %v", m)
	}
	if cause := <-h.causes; !errors.Is(cause, ErrCancelledByPeer) {
		t.Errorf("the handler's context ended with %v", cause)
	}
	p.send(`{"jsonrpc":"2.0","id":2,"method":"echo","params":{"a":1}}`)
	if m := p.read(); m["result"] == nil {
		t.Errorf("echo: %v", m)
	}
	// Withdrawing a request already answered changes nothing: the next
	// request is served as usual.
	p.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":2}}`)
	p.send(`{"jsonrpc":"2.0","id":3,"method":"echo","params":{"a":2}}`)
	if m := p.read(); m["id"] != float64(3) || m["result"] == nil {
		t.Errorf("after a late withdrawal: %v", m)
	}
	select {
	case n := <-notes:
		t.Errorf("$/cancel_request reached the handler: %s", n)
	default:
	}
}

func TestACallAbandonedByItsContextIsWithdrawnWithCancelRequest(t *testing.T) {
	p := newPeer(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := p.conn.Call(ctx, "session/set_mode", nil)
		errc <- err
	}()
	sent := p.read()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	m := p.read()
	params, _ := m["params"].(map[string]any)
	if m["method"] != CancelRequestMethod || params["requestId"] != sent["id"] || m["id"] != nil {
		t.Fatalf("after abandoning request %v the connection wrote %v, want the notification $/cancel_request naming it", sent["id"], m)
	}
	// The agent answers as ACP asks: the late answer is counted, not
	// delivered to anyone.
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%v,"error":{"code":%d,"message":"cancelled"}}`, sent["id"], CodeRequestCancelled))
	ch := p.start("next")
	p.send(`{"jsonrpc":"2.0","id":2,"result":{}}`)
	if r := wait(t, ch); string(r.Response.Result) != "{}" {
		t.Errorf("the next call got %+v", r)
	}
	if s := p.conn.Stats(); s.UnmatchedResponses != 1 {
		t.Errorf("unmatched responses %d, want the abandoned call's answer counted", s.UnmatchedResponses)
	}
}

func TestACallAnsweredBeforeItsContextEndsIsNotWithdrawn(t *testing.T) {
	p := newPeer(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := make(chan error, 1)
	go func() {
		_, err := p.conn.Call(ctx, "quick", nil)
		ch <- err
	}()
	sent := p.read()
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%v,"result":{}}`, sent["id"]))
	if err := <-ch; err != nil {
		t.Fatal(err)
	}
	cancel()
	next := p.start("next")
	p.send(`{"jsonrpc":"2.0","id":2,"result":{}}`)
	wait(t, next)
}
