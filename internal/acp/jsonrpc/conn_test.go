package jsonrpc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// peer is the agent's end of a connection under test.
type peer struct {
	t      *testing.T
	toConn *io.PipeWriter // the agent's stdout
	lines  *bufio.Scanner // what the connection wrote (the agent's stdin)
	conn   *Conn
	notes  chan string
}

type recordingHandler struct{ notes chan string }

func (h recordingHandler) Request(ctx context.Context, method string, params json.RawMessage) (any, *ErrorObject) {
	if method == "echo" {
		return json.RawMessage(params), nil
	}
	return nil, &ErrorObject{Code: CodeMethodNotFound, Message: "no " + method}
}

func (h recordingHandler) Notify(method string, params json.RawMessage) bool {
	if !json.Valid(params) {
		return false
	}
	h.notes <- method + " " + string(params)
	return true
}

func newPeer(t *testing.T, opts Options) *peer {
	t.Helper()
	notes := make(chan string, 100)
	return newPeerServing(t, opts, recordingHandler{notes}, notes)
}

// newPeerServing is newPeer with the connection's handler h, which sends
// what it records on notes.
func newPeerServing(t *testing.T, opts Options, h Handler, notes chan string) *peer {
	t.Helper()
	agentOut, connIn := io.Pipe()
	// An OS pipe, as with a real agent: the connection's writes must not
	// wait for the peer to read them.
	connOut, agentIn, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	opts.Logger = slog.New(slog.DiscardHandler)
	c := New(agentOut, agentIn, h, opts)
	p := &peer{t: t, toConn: connIn, lines: bufio.NewScanner(connOut), conn: c, notes: notes}
	t.Cleanup(func() {
		_ = connIn.Close()
		c.Close()
		_ = connOut.Close()
		_ = agentIn.Close()
	})
	return p
}

// send writes one line as the agent. It may run on its own goroutine, so
// it reports with Error, not Fatal.
func (p *peer) send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.toConn, line+"\n"); err != nil {
		p.t.Error(err)
	}
}

func (p *peer) read() map[string]any {
	p.t.Helper()
	if !p.lines.Scan() {
		p.t.Fatal("the connection wrote nothing")
	}
	var m map[string]any
	if err := json.Unmarshal(p.lines.Bytes(), &m); err != nil {
		p.t.Fatalf("the connection wrote invalid JSON %q: %v", p.lines.Text(), err)
	}
	return m
}

func (p *peer) start(method string) <-chan Reply {
	p.t.Helper()
	ch, _, err := p.conn.Start(method, map[string]int{"x": 1})
	if err != nil {
		p.t.Fatal(err)
	}
	if got := p.read()["method"]; got != method {
		p.t.Fatalf("sent %v", got)
	}
	return ch
}

func wait(t *testing.T, ch <-chan Reply) Reply {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("no reply")
		return Reply{}
	}
}

func TestAnAnsweredCallCarriesTheResponseExactlyAsSent(t *testing.T) {
	p := newPeer(t, Options{})
	ch := p.start("m")
	p.send(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn", "extra": [1, 2]}}`)
	r := wait(t, ch)
	if r.End != nil || string(r.Response.Result) != `{"stopReason":"end_turn", "extra": [1, 2]}` || r.Response.Error != nil {
		t.Errorf("reply %+v result %s", r, r.Response.Result)
	}
}

func TestAnErrorResponseIsAnAnswerNotAnEnding(t *testing.T) {
	p := newPeer(t, Options{})
	ch := p.start("m")
	p.send(`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"boom"}}`)
	r := wait(t, ch)
	if r.End != nil || string(r.Response.Error) != `{"code":-32603,"message":"boom"}` {
		t.Errorf("reply %+v", r)
	}
}

func TestEOFWithACallOutstandingIsStreamEnded(t *testing.T) {
	p := newPeer(t, Options{})
	ch := p.start("m")
	_ = p.toConn.Close()
	r := wait(t, ch)
	if r.End == nil || r.End.Kind != EndStream {
		t.Fatalf("reply %+v", r)
	}
	// A call made after the end is answered at once with the same ending.
	late, _, _ := p.conn.Start("late", nil)
	if r := wait(t, late); r.End == nil || r.End.Kind != EndStream {
		t.Errorf("late reply %+v", r)
	}
}

func TestAReadErrorWithACallOutstandingIsTransportFailed(t *testing.T) {
	p := newPeer(t, Options{})
	ch := p.start("m")
	_ = p.toConn.CloseWithError(errors.New("disk on fire"))
	r := wait(t, ch)
	if r.End == nil || r.End.Kind != EndTransport || !strings.Contains(r.End.Detail, "disk on fire") {
		t.Fatalf("reply %+v", r.End)
	}
}

func TestALineOverTheFrameLimitIsTransportFailed(t *testing.T) {
	p := newPeer(t, Options{MaxFrameBytes: 1024})
	ch := p.start("m")
	go p.send(`{"jsonrpc":"2.0","method":"n","params":"` + strings.Repeat("x", 5000) + `"}`)
	r := wait(t, ch)
	if r.End == nil || r.End.Kind != EndTransport || !strings.Contains(r.End.Detail, "frame limit of 1024 bytes") {
		t.Fatalf("reply %+v", r.End)
	}
}

func TestALineExactlyAtTheFrameLimitIsAccepted(t *testing.T) {
	p := newPeer(t, Options{MaxFrameBytes: 70 << 10})
	prefix, suffix := `{"jsonrpc":"2.0","method":"n","params":"`, `"}`
	line := prefix + strings.Repeat("y", 70<<10-len(prefix)-len(suffix)) + suffix
	go p.send(line)
	select {
	case n := <-p.notes:
		if len(n) != len("n ")+len(line)-len(prefix)-len(suffix)+2 {
			t.Errorf("notification of %d bytes", len(n))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the notification never arrived")
	}
}

func TestStrayLinesAreSkippedAndCountedUnlessFramingIsStrict(t *testing.T) {
	p := newPeer(t, Options{})
	ch := p.start("m")
	p.send("starting up...")
	p.send(`[1,2,3]`)
	p.send(`{"jsonrpc":"2.0"}`)
	p.send(`{"jsonrpc":"2.0","id":1,"result":{}}`)
	if r := wait(t, ch); r.End != nil {
		t.Fatalf("reply %+v", r)
	}
	if s := p.conn.Stats(); s.SkippedLines != 3 {
		t.Errorf("skipped %d", s.SkippedLines)
	}

	strict := newPeer(t, Options{StrictFraming: true})
	ch = strict.start("m")
	strict.send("starting up...")
	r := wait(t, ch)
	if r.End == nil || r.End.Kind != EndViolation || !strings.Contains(r.End.Detail, "starting up") {
		t.Errorf("strict reply %+v", r.End)
	}
}

func TestAnUndecodableAnswerToACallIsAViolationOfThatCall(t *testing.T) {
	p := newPeer(t, Options{})
	ch := p.start("m")
	p.send(`{"jsonrpc":"2.0","id":1,"result":`)
	r := wait(t, ch)
	if r.Violation == "" || r.End != nil {
		t.Fatalf("reply %+v", r)
	}
}

func TestAResponseMatchingNoCallIsCounted(t *testing.T) {
	p := newPeer(t, Options{})
	ch := p.start("m")
	p.send(`{"jsonrpc":"2.0","id":99,"result":{}}`)
	p.send(`{"jsonrpc":"2.0","id":"abc","result":{}}`)
	p.send(`{"jsonrpc":"2.0","id":1,"result":{}}`)
	wait(t, ch)
	if s := p.conn.Stats(); s.UnmatchedResponses != 2 {
		t.Errorf("unmatched %d", s.UnmatchedResponses)
	}
}

func TestNotificationsArriveInOrderAndRequestsAreAnswered(t *testing.T) {
	p := newPeer(t, Options{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 100 {
			p.send(`{"jsonrpc":"2.0","method":"n","params":` + strings.Repeat("1", i+1) + `}`)
		}
		p.send(`{"jsonrpc":"2.0","id":"req-1","method":"echo","params":{"a":1}}`)
		p.send(`{"jsonrpc":"2.0","id":7,"method":"terminal/create","params":{}}`)
	}()
	for i := range 100 {
		if n := <-p.notes; n != "n "+strings.Repeat("1", i+1) {
			t.Fatalf("notification %d out of order: %s", i, n)
		}
	}
	answers := map[string]map[string]any{}
	for range 2 {
		m := p.read()
		id, _ := json.Marshal(m["id"])
		answers[string(id)] = m
	}
	wg.Wait()
	if r := answers[`"req-1"`]; r == nil || r["result"].(map[string]any)["a"] != float64(1) {
		t.Errorf("echo answer %v", r)
	}
	if r := answers[`7`]; r == nil || r["error"].(map[string]any)["code"] != float64(CodeMethodNotFound) {
		t.Errorf("unknown method answer %v", r)
	}
}

func TestCallReturnsWhenItsContextEnds(t *testing.T) {
	p := newPeer(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := p.conn.Call(ctx, "slow", nil)
		errc <- err
	}()
	p.read()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("err %v", err)
	}
}

func TestTheNotificationFastPathIsExactOrRefused(t *testing.T) {
	cases := []struct {
		line, method, params string
		ok                   bool
	}{
		{`{"jsonrpc":"2.0","method":"session/update","params":{"a":"}"}}`, "session/update", `{"a":"}"}`, true},
		{`{"jsonrpc":"2.0","method":"m","params":[1]}`, "m", `[1]`, true},
		// Anything after params makes the split value invalid JSON, so the
		// handler refuses it and the general path sees the whole line.
		{`{"jsonrpc":"2.0","method":"m","params":{},"id":3}`, "m", `{},"id":3`, true},
		{`{"jsonrpc":"2.0","method":"a\"b","params":{}}`, "", "", false},
		{`{"method":"m","params":{},"jsonrpc":"2.0"}`, "", "", false},
		{`{"jsonrpc":"2.0","method":"m"}`, "", "", false},
	}
	for _, c := range cases {
		method, params, ok := splitNotification([]byte(c.line))
		if ok != c.ok || method != c.method || string(params) != c.params {
			t.Errorf("%s: got %q %q %v", c.line, method, params, ok)
		}
	}
}

func TestARequestThatLooksLikeANotificationIsServedAsARequest(t *testing.T) {
	p := newPeer(t, Options{})
	p.send(`{"jsonrpc":"2.0","method":"echo","params":{"v":1},"id":42}`)
	m := p.read()
	if m["id"] != float64(42) || m["result"].(map[string]any)["v"] != float64(1) {
		t.Errorf("answer %v", m)
	}
	select {
	case n := <-p.notes:
		t.Errorf("a request was also handled as a notification: %s", n)
	default:
	}
}

func FuzzDispatchNeverPanics(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":1,"result":{}}`, `{"id":1,"result":`, `garbage`, `{"method":"x"}`, `{"id":null}`, `{"id":1,"method":"y","params":[]}`, "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		notes := make(chan string, 1000)
		c := &Conn{opts: Options{MaxFrameBytes: 1 << 20}, log: slog.New(slog.DiscardHandler), handler: recordingHandler{notes},
			pending: map[int64]chan Reply{1: make(chan Reply, 1)}, w: bufio.NewWriter(io.Discard),
			slots: make(chan struct{}, 1)}
		c.ctx, c.cancel = context.WithCancel(context.Background())
		defer c.cancel()
		_ = c.dispatch([]byte(line))
		c.handlers.Wait()
	})
}

type idleRecordingHandler struct{ recordingHandler }

func (h idleRecordingHandler) Idle() { h.notes <- "idle" }

func TestAnIdleHandlerHearsWhenEveryBufferedLineIsHandled(t *testing.T) {
	notes := make(chan string, 100)
	out, in, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	defer in.Close()
	// Three lines arrive in one read, then a fourth alone after a pause: the
	// handler hears "idle" before the first read, after the third line and
	// after the fourth, never between lines the reader already holds.
	agentOut, agentWrites := io.Pipe()
	c := New(agentOut, in, idleRecordingHandler{recordingHandler{notes}}, Options{Logger: slog.New(slog.DiscardHandler)})
	defer c.Close()
	defer agentWrites.Close() // first: the reader must see EOF for Close to return
	note := func(n int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","method":"n","params":%d}`, n)
	}
	want := []string{"idle", "n 1", "n 2", "n 3", "idle"}
	go func() { _, _ = agentWrites.Write([]byte(note(1) + "\n" + note(2) + "\n" + note(3) + "\n")) }()
	for i, w := range want {
		if got := <-notes; got != w {
			t.Fatalf("event %d: %q, want %q", i, got, w)
		}
	}
	go func() { _, _ = agentWrites.Write([]byte(note(4) + "\n")) }()
	for i, w := range []string{"n 4", "idle"} {
		if got := <-notes; got != w {
			t.Fatalf("event %d after the pause: %q, want %q", i, got, w)
		}
	}
	_ = agentWrites.Close()
	<-c.Done()
}

// blockingHandler serves every request by waiting until it is released or
// the connection closes, and counts how many requests it serves at once.
type blockingHandler struct {
	recordingHandler
	started chan string   // each request's params, as its handler starts
	release chan struct{} // one receive ends one request
	running atomic.Int32
	peak    atomic.Int32
}

func newBlockingHandler() *blockingHandler {
	return &blockingHandler{recordingHandler: recordingHandler{make(chan string, 100)},
		started: make(chan string, 100), release: make(chan struct{})}
}

func (h *blockingHandler) Request(ctx context.Context, method string, params json.RawMessage) (any, *ErrorObject) {
	n := h.running.Add(1)
	defer h.running.Add(-1)
	for p := h.peak.Load(); n > p && !h.peak.CompareAndSwap(p, n); p = h.peak.Load() {
	}
	h.started <- string(params)
	select {
	case <-h.release:
	case <-ctx.Done():
	}
	return "done", nil
}

// expectStarted waits for handlers to start for the requests whose params
// are want, in any order: each runs on its own goroutine.
func (h *blockingHandler) expectStarted(t *testing.T, want ...string) {
	t.Helper()
	var got []string
	for range want {
		select {
		case p := <-h.started:
			got = append(got, p)
		case <-time.After(5 * time.Second):
			t.Fatalf("handlers started for %v, want %v", got, want)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("handlers started for %v, want %v", got, want)
	}
}

// expectNothing checks that no handler starts and no notification arrives
// for a while: the reader is not reading.
func (h *blockingHandler) expectNothing(t *testing.T) {
	t.Helper()
	select {
	case got := <-h.started:
		t.Fatalf("a handler started for %s beyond the bound of requests in flight", got)
	case n := <-h.notes:
		t.Fatalf("the notification %q was read while every request slot was taken", n)
	case <-time.After(200 * time.Millisecond):
	}
}

func TestAtMostMaxInFlightRequestsAreServedAtOnceAndTheReaderWaitsForASlot(t *testing.T) {
	h := newBlockingHandler()
	p := newPeerServing(t, Options{MaxInFlightRequests: 4}, h, h.notes)
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for i := range 10 {
			p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"block","params":%d}`, i, i))
		}
		p.send(`{"jsonrpc":"2.0","method":"after","params":0}`)
	}()
	h.expectStarted(t, "0", "1", "2", "3")
	h.expectNothing(t)
	for i := 4; i < 10; i++ {
		h.release <- struct{}{} // one answer goes out, one slot frees
		if m := p.read(); m["result"] != "done" {
			t.Fatalf("answer %v", m)
		}
		h.expectStarted(t, fmt.Sprint(i))
		if i < 9 {
			h.expectNothing(t)
		}
	}
	// The last request took the last free slot; a notification needs none.
	select {
	case n := <-h.notes:
		if n != "after 0" {
			t.Errorf("notification %q", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the reader did not go on reading once the last request had a slot")
	}
	<-sent
	for range 4 {
		h.release <- struct{}{}
		p.read()
	}
	if peak := h.peak.Load(); peak != 4 {
		t.Errorf("%d requests were served at once, want at most (and here exactly) 4", peak)
	}
}

func TestCloseReturnsPromptlyWhileTheReaderWaitsForARequestSlot(t *testing.T) {
	h := newBlockingHandler()
	p := newPeerServing(t, Options{MaxInFlightRequests: 1}, h, h.notes)
	go func() {
		p.send(`{"jsonrpc":"2.0","id":1,"method":"block","params":1}`)
		// Read by the reader, which then waits for the slot. The peer's
		// output stays open: only the wait for a slot can end the reader.
		p.send(`{"jsonrpc":"2.0","id":2,"method":"block","params":2}`)
	}()
	select {
	case <-h.started:
	case <-time.After(5 * time.Second):
		t.Fatal("no handler started")
	}
	time.Sleep(200 * time.Millisecond) // for the reader to read the second and wait
	closed := make(chan struct{})
	go func() {
		p.conn.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited while the reader was waiting for a request slot")
	}
	if e := p.conn.Ended(); e == nil || e.Kind != EndClosed {
		t.Errorf("ended %+v, want EndClosed", e)
	}
	select {
	case got := <-h.started:
		t.Errorf("the request that waited for a slot was served after Close: %s", got)
	default:
	}
}
