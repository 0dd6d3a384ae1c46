package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	channelzpb "google.golang.org/grpc/channelz/grpc_channelz_v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// The tests in this file play a hostile client or a broken agent against
// the real binary: each promise of the README is checked where it can be
// broken.

// hostileConfig has short graces, so the bounds under test are short too.
const hostileConfig = `
shutdown_grace: 3s
agents:
  - name: test
    command: "${ACPGATE_E2E_AGENT}"
    args: [--unique-sessions]
    cancel_grace: 2s
  - name: timed
    command: "${ACPGATE_E2E_AGENT}"
    args: [--unique-sessions]
    cancel_grace: 1s
    turn_timeout: 1s
  - name: mute
    command: "${ACPGATE_E2E_AGENT}"
    args: [--hang-on, initialize]
    handshake_timeout: 1s
  - name: mute-new
    command: "${ACPGATE_E2E_AGENT}"
    args: [--hang-on, session/new]
    handshake_timeout: 1s
`

// stalledClient is a connection whose flow-control windows are gRPC's
// smallest and never grow (no BDP estimation): once a stream's reader stops
// reading, the gateway cannot send it more than 64 KiB.
func (s *served) stalledClient(t *testing.T) acpgatev1.AgentGatewayClient {
	t.Helper()
	conn, err := grpc.NewClient(s.addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10),
		grpc.WithInitialConnWindowSize(64<<10),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return acpgatev1.NewAgentGatewayClient(conn)
}

// stall starts a flood on a stalled connection and reads only its
// started event, then stops reading without cancelling.
func stall(t *testing.T, client acpgatev1.AgentGatewayClient, req *acpgatev1.PromptRequest) {
	t.Helper()
	req.Text = "flood 200000 512"
	stream, err := client.Prompt(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if e, err := stream.Recv(); err != nil || e.GetStarted() == nil {
		t.Fatalf("first event %v, %v", e, err)
	}
	// Give the flood time to fill every buffer between agent and client.
	time.Sleep(500 * time.Millisecond)
}

func TestAClientThatStopsReadingDoesNotHoldUpShutdown(t *testing.T) {
	s := serve(t, "--config", writeConfig(t, hostileConfig))
	stall(t, s.stalledClient(t), &acpgatev1.PromptRequest{Agent: "test"})
	s.terminate(t, 3*time.Second)
}

// terminate sends the gateway SIGTERM and fails the test unless it exits
// with status 0 within its shutdown grace (grace) and two seconds more.
func (s *served) terminate(t *testing.T, grace time.Duration) {
	t.Helper()
	start := time.Now()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.exited:
		if err != nil {
			t.Errorf("acpgate exited with %v, want status 0\n%s", err, s.log())
		}
		t.Logf("exited %s after SIGTERM (shutdown_grace %s)", time.Since(start).Round(time.Millisecond), grace)
	case <-time.After(grace + 2*time.Second):
		t.Fatalf("acpgate still running %s after SIGTERM, with a shutdown_grace of %s\n%s", grace+2*time.Second, grace, s.log())
	}
}

func TestCloseSessionReturnsWithinTheCancelGraceWhileItsClientStallsTheStream(t *testing.T) {
	s := serve(t, "--config", writeConfig(t, hostileConfig))
	client, _ := s.client(t)
	ctx := context.Background()
	sess, err := client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "test"})
	if err != nil {
		t.Fatal(err)
	}
	stall(t, s.stalledClient(t), &acpgatev1.PromptRequest{SessionId: sess.GetId()})
	start := time.Now()
	callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := client.CloseSession(callCtx, &acpgatev1.CloseSessionRequest{SessionId: sess.GetId()}); err != nil {
		t.Fatalf("CloseSession: %v after %s", err, time.Since(start))
	}
	// cancel_grace is 2 s; the agent's stop after it has a grace of its own
	// only for an agent that ignores the end of its stdin, which this one
	// does not.
	if d := time.Since(start); d > 2*time.Second+time.Second {
		t.Errorf("CloseSession took %s, over cancel_grace (2 s) plus 1 s", d)
	}
}

func TestTurnTimeoutEndsATurnWhoseClientStallsTheStream(t *testing.T) {
	s := serve(t, "--config", writeConfig(t, hostileConfig))
	client, _ := s.client(t)
	ctx := context.Background()
	sess, err := client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "timed"})
	if err != nil {
		t.Fatal(err)
	}
	stall(t, s.stalledClient(t), &acpgatev1.PromptRequest{SessionId: sess.GetId()})
	// turn_timeout 1 s, cancel_grace 1 s: the turn has ended, and its
	// session is free, well within 5 s whatever the client does.
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := client.GetSession(ctx, &acpgatev1.GetSessionRequest{SessionId: sess.GetId()})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetState() == acpgatev1.SessionState_SESSION_STATE_IDLE && got.GetTurns() == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session is still %v with %d turns 5 s after a 1 s turn_timeout", got.GetState(), got.GetTurns())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestMaxSessionsHoldsForConcurrentCreateSessions(t *testing.T) {
	s := serve(t, "--config", writeConfig(t, "limits: {max_sessions: 6}\n"+hostileConfig))
	client, _ := s.client(t)
	var opened, refused, other atomic.Int32
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := client.CreateSession(context.Background(), &acpgatev1.CreateSessionRequest{Agent: "test"})
			switch status.Code(err) {
			case codes.OK:
				opened.Add(1)
			case codes.ResourceExhausted:
				refused.Add(1)
			default:
				other.Add(1)
				t.Errorf("CreateSession: %v", err)
			}
		}()
	}
	wg.Wait()
	if opened.Load() != 6 || refused.Load() != 44 {
		t.Errorf("%d opened, %d refused, %d failed otherwise; want 6 opened and 44 refused", opened.Load(), refused.Load(), other.Load())
	}
	if n := len(childrenRunning(s.cmd.Process.Pid, agentBin)); n != 6 {
		t.Errorf("%d agent processes run, want 6", n)
	}
}

func TestMaxSessionsBoundsTheAgentsOfConcurrentOneShotTurns(t *testing.T) {
	s := serve(t, "--config", writeConfig(t, "limits: {max_sessions: 40}\n"+hostileConfig))
	client, _ := s.client(t)
	stopSampling := peakAgents(s.cmd.Process.Pid)
	var completed, refused atomic.Int32
	var wg sync.WaitGroup
	for range 300 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stream, err := client.Prompt(context.Background(), &acpgatev1.PromptRequest{Agent: "test", Text: "sleep 300\nchunk done"})
			if err != nil {
				t.Error(err)
				return
			}
			for {
				e, err := stream.Recv()
				if status.Code(err) == codes.ResourceExhausted {
					refused.Add(1)
					return
				}
				if err != nil {
					t.Errorf("Recv: %v", err)
					return
				}
				if e.GetOutcome() != nil {
					completed.Add(1)
					return
				}
			}
		}()
	}
	wg.Wait()
	peak := stopSampling()
	if completed.Load()+refused.Load() != 300 || completed.Load() < 40 {
		t.Errorf("%d completed and %d refused of 300", completed.Load(), refused.Load())
	}
	if peak > 40 {
		t.Errorf("%d agents ran at once, over max_sessions 40", peak)
	}
	t.Logf("%d completed, %d refused, at most %d agents at once", completed.Load(), refused.Load(), peak)
}

func TestASessionAcceptsItsNextTurnTheMomentTheTerminalArrives(t *testing.T) {
	s := serve(t, "--config", writeConfig(t, hostileConfig))
	client, _ := s.client(t)
	ctx := context.Background()
	sess, err := client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: "test"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		stream, err := client.Prompt(ctx, &acpgatev1.PromptRequest{SessionId: sess.GetId(), Text: "chunk hi"})
		if err != nil {
			t.Fatal(err)
		}
		var terminal *acpgatev1.PromptEvent
		for {
			e, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("turn %d: %v", i, err)
			}
			if e.GetOutcome() != nil || e.GetError() != nil {
				terminal = e
				break // the next Prompt goes out before the stream's status arrives
			}
		}
		if terminal.GetOutcome() == nil {
			t.Fatalf("turn %d ended with %v", i, terminal)
		}
	}
}

func TestAnAgentThatNeverAnswersItsHandshakeIsStoppedAtTheHandshakeTimeout(t *testing.T) {
	s := serve(t, "--config", writeConfig(t, hostileConfig))
	client, _ := s.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, tc := range []struct{ agent, step string }{{"mute", "initialize"}, {"mute-new", "session/new"}} {
		t.Run(tc.agent, func(t *testing.T) {
			// One-shot: the expiry is the turn's in-band terminal.
			stream, err := client.Prompt(ctx, &acpgatev1.PromptRequest{Agent: tc.agent, Text: "chunk hi"})
			if err != nil {
				t.Fatal(err)
			}
			var last *acpgatev1.PromptEvent
			for {
				e, err := stream.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				last = e
			}
			tr := last.GetError().GetTransport()
			if tr.GetReason() != acpgatev1.TransportReason_TRANSPORT_REASON_HANDSHAKE_TIMEOUT || !strings.Contains(last.GetError().GetMessage(), tc.step) {
				t.Errorf("terminal %v, want a HANDSHAKE_TIMEOUT naming %s", last, tc.step)
			}
			// CreateSession: the expiry is the call's status, with the
			// HarnessError attached.
			_, err = client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: tc.agent})
			st := status.Convert(err)
			if st.Code() != codes.DeadlineExceeded || !strings.Contains(st.Message(), tc.step) || len(st.Details()) != 1 {
				t.Errorf("CreateSession: %v (details %v), want DEADLINE_EXCEEDED naming %s with the HarnessError", err, st.Details(), tc.step)
			}
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if n := len(childrenRunning(s.cmd.Process.Pid, agentBin)); n == 0 {
					break
				} else if time.Now().After(deadline) {
					t.Fatalf("%d agent processes still run after their handshake timed out", n)
				}
			}
		})
	}
}

// rawCodec sends and receives bytes as they are, to put on the wire what
// no generated client would.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error)      { return v.([]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error { *(v.(*[]byte)) = data; return nil }
func (rawCodec) Name() string                       { return "proto" }

// rawPrompt sends msg as a PromptRequest and returns the stream's status.
func rawPrompt(t *testing.T, addr string, msg []byte) error {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/acpgate.v1.AgentGateway/Prompt", grpc.ForceCodec(rawCodec{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.SendMsg(msg); err != nil {
		t.Fatal(err)
	}
	_ = stream.CloseSend()
	var out []byte
	for {
		if err := stream.RecvMsg(&out); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// promptFields encodes a PromptRequest's agent and text fields by hand, so
// text may hold any bytes.
func promptFields(agent string, text []byte) []byte {
	var b []byte
	b = protowire.AppendTag(b, agentField, protowire.BytesType)
	b = protowire.AppendString(b, agent)
	b = protowire.AppendTag(b, textField, protowire.BytesType)
	return protowire.AppendBytes(b, text)
}

var (
	agentField = protowire.Number((&acpgatev1.PromptRequest{}).ProtoReflect().Descriptor().Fields().ByName("agent").Number())
	textField  = protowire.Number((&acpgatev1.PromptRequest{}).ProtoReflect().Descriptor().Fields().ByName("text").Number())
)

func TestBadRequestsAreInvalidArgumentNotResourceExhaustedOrInternal(t *testing.T) {
	s := serve(t, "--config", writeConfig(t, "limits: {max_prompt_bytes: 65536, max_frame_bytes: 65536}\n"+hostileConfig))
	for _, tc := range []struct {
		name string
		msg  []byte
		want string
	}{
		{"a prompt a little over the limit", promptFields("test", []byte(strings.Repeat("x", 70000))), "limits.max_prompt_bytes"},
		{"a prompt megabytes over the limit", promptFields("test", []byte(strings.Repeat("x", 3<<20))), "limits.max_prompt_bytes"},
		{"invalid UTF-8 in a string field", promptFields("test", []byte("chunk \xff\xfe")), "invalid UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := rawPrompt(t, s.addr, tc.msg)
			if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), tc.want) {
				t.Errorf("status %v, want INVALID_ARGUMENT naming %q", err, tc.want)
			}
		})
	}
	// A unary request with invalid UTF-8 is the client's error too.
	conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	bad := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "te\xffst")
	var out []byte
	err = conn.Invoke(context.Background(), "/acpgate.v1.AgentGateway/CreateSession", bad, &out, grpc.ForceCodec(rawCodec{}))
	if st := status.Convert(err); st.Code() != codes.InvalidArgument {
		t.Errorf("CreateSession with invalid UTF-8: %v, want INVALID_ARGUMENT", err)
	}
}

func TestOneConnectionRunsAtMostMaxStreamsPerConnectionCalls(t *testing.T) {
	s := serve(t, "--config", writeConfig(t, "limits: {max_streams_per_connection: 2}\n"+hostileConfig))
	client, _ := s.client(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var first context.CancelFunc
	for i := range 2 {
		callCtx, callCancel := context.WithCancel(ctx)
		defer callCancel()
		if i == 0 {
			first = callCancel
		}
		stream, err := client.Prompt(callCtx, &acpgatev1.PromptRequest{Agent: "test", Text: "hang"})
		if err != nil {
			t.Fatal(err)
		}
		if e, err := stream.Recv(); err != nil || e.GetStarted() == nil {
			t.Fatalf("call %d: %v, %v", i, e, err)
		}
	}
	// A third call waits for a free stream: within a second it has not
	// started.
	waitCtx, waitCancel := context.WithTimeout(ctx, time.Second)
	defer waitCancel()
	third, err := client.Prompt(waitCtx, &acpgatev1.PromptRequest{Agent: "test", Text: "chunk hi"})
	if err == nil {
		_, err = third.Recv()
	}
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("a third concurrent call on the connection: %v, want it to wait (DEADLINE_EXCEEDED)", err)
	}
	// Once one ends, the next call runs.
	first()
	stream, err := client.Prompt(ctx, &acpgatev1.PromptRequest{Agent: "test", Text: "chunk hi"})
	if err != nil {
		t.Fatal(err)
	}
	for {
		e, err := stream.Recv()
		if err != nil {
			t.Fatalf("after a stream ended, the next call: %v", err)
		}
		if e.GetOutcome() != nil {
			break
		}
	}
}

// sockets counts the sockets process pid has open.
func sockets(t *testing.T, pid int) int {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && strings.HasPrefix(target, "socket:") {
			n++
		}
	}
	return n
}

func TestTheGatewayHoldsAtMostMaxConnectionsAndAcceptsTheNextOnceOneCloses(t *testing.T) {
	s := serve(t, "--config", writeConfig(t, "limits: {max_connections: 3}\nmetrics: {listen: \"127.0.0.1:0\"}\n"+hostileConfig))
	metricsURL := s.metricsURL(t)
	pid := s.cmd.Process.Pid
	before := sockets(t, pid)
	check := func(ctx context.Context, conn *grpc.ClientConn) error {
		_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	dial := func() *grpc.ClientConn {
		conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}
	var clients []*grpc.ClientConn
	for i := range 3 {
		conn := dial()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := check(ctx, conn)
		cancel()
		if err != nil {
			t.Fatalf("client %d of 3: %v", i+1, err)
		}
		clients = append(clients, conn)
	}
	// A flood of connections that never send a byte: the kernel completes
	// them, the gateway does not take them.
	var flood []net.Conn
	for range 50 {
		c, err := net.DialTimeout("tcp", s.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		flood = append(flood, c)
	}
	// A fourth client is not accepted either: its call runs out of time.
	fourth := dial()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	err := check(ctx, fourth)
	cancel()
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("a fourth client's call with 3 connections open: %v, want DEADLINE_EXCEEDED (not accepted)", err)
	}
	if n := sockets(t, pid) - before; n > 3 {
		t.Fatalf("the gateway holds %d more sockets than before the clients came, want at most limits.max_connections (3)", n)
	}
	fams := scrape(t, metricsURL)
	if open, limit := values(fams, "acpgate_connections_open")[""], values(fams, "acpgate_connections_limit")[""]; open != 3 || limit != 3 {
		t.Fatalf("acpgate_connections_open %v, acpgate_connections_limit %v, want 3 and 3", open, limit)
	}
	if !strings.Contains(s.log(), "bound=limits.max_connections") {
		t.Fatalf("no warning that the listener is full in the gateway's log:\n%s", s.log())
	}
	// Once the flood and one client go away, the fourth is served.
	for _, c := range flood {
		_ = c.Close()
	}
	_ = clients[0].Close()
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := check(ctx, fourth); err != nil {
		t.Fatalf("the fourth client after a connection closed: %v", err)
	}
	// A listener waiting for a free slot does not hold up shutdown.
	for range 5 {
		c, err := net.DialTimeout("tcp", s.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	s.terminate(t, 3*time.Second)
}

func TestAMaxConnectionsOverHalfTheDescriptorLimitIsWarnedAtStart(t *testing.T) {
	bin, _ := binaries(t)
	const warning = "limits.max_connections would take more than half of the file descriptors"
	for _, c := range []struct {
		limits string
		warned bool
	}{
		{"", true}, // the default, 4096
		{"limits: {max_connections: 500}\n", false},
	} {
		cfg := writeConfig(t, c.limits+hostileConfig)
		s, err := startServeCmd(t, exec.Command("sh", "-c", `ulimit -n 1000 && exec "$0" serve --listen 127.0.0.1:0 --config "$1"`, bin, cfg))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(s.log(), warning); got != c.warned {
			t.Errorf("with %q under RLIMIT_NOFILE 1000: warned %v, want %v\n%s", c.limits, got, c.warned, s.log())
		}
		s.terminate(t, 3*time.Second)
	}
}

// rawHeaders opens an HTTP/2 connection to addr that ignores the server's
// advertised header list size, as a hostile client would, and sends one
// Health/Check call whose metadata carries pad bytes. It reports whether
// the call was answered (HEADERS on its stream) and, if not, how the
// gateway refused it: a reset of the stream, or the connection closed.
func rawHeaders(t *testing.T, addr string, pad int) (answered bool, refused string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	fr := http2.NewFramer(c, c)
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{
		{":method", "POST"}, {":scheme", "http"}, {":path", "/grpc.health.v1.Health/Check"}, {":authority", addr},
		{"content-type", "application/grpc"}, {"te", "trailers"}, {"x-pad", strings.Repeat("a", pad)},
	} {
		if err := enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
			t.Fatal(err)
		}
	}
	// The preface, then the block in frames of at most 16 KiB (HTTP/2's
	// default frame size), then an empty HealthCheckRequest ending the
	// request. A write that fails means the gateway closed the
	// connection.
	write := func() error {
		if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
			return err
		}
		if err := fr.WriteSettings(); err != nil {
			return err
		}
		rest, first := block.Bytes(), true
		for first || len(rest) > 0 {
			n := min(len(rest), 16<<10)
			frag, end := rest[:n], n == len(rest)
			rest = rest[n:]
			if first {
				err = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: frag, EndHeaders: end})
				first = false
			} else {
				err = fr.WriteContinuation(1, end, frag)
			}
			if err != nil {
				return err
			}
		}
		return fr.WriteData(1, true, []byte{0, 0, 0, 0, 0})
	}
	if err := write(); err != nil {
		return false, fmt.Sprintf("connection closed while the call was sent (%v)", err)
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return false, fmt.Sprintf("connection closed (%v)", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.HeadersFrame:
			if f.StreamID == 1 {
				return true, ""
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == 1 {
				return false, "stream reset: " + f.ErrCode.String()
			}
		case *http2.GoAwayFrame:
			return false, "connection closed: GOAWAY " + f.ErrCode.String()
		}
	}
}

func TestACallWithMoreMetadataThanMaxHeaderBytesIsRefusedBeforeAnyHandlerRuns(t *testing.T) {
	s := serve(t, "--config", writeConfig(t, "limits: {max_header_bytes: 8192}\n"+hostileConfig))
	if answered, refused := rawHeaders(t, s.addr, 4<<10); !answered {
		t.Fatalf("a call with 4 KiB of metadata under a limit of 8 KiB: %s, want it answered", refused)
	}
	if answered, refused := rawHeaders(t, s.addr, 64<<10); answered {
		t.Fatal("a call with 64 KiB of metadata under a limit of 8 KiB was answered")
	} else {
		t.Logf("64 KiB of metadata: %s", refused)
	}
	// A gRPC client is told the limit and refuses to send such a call.
	_, health := s.client(t)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-pad", strings.Repeat("a", 64<<10))
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := health.Check(ctx, &healthpb.HealthCheckRequest{})
	if err == nil || !strings.Contains(err.Error(), "8192") {
		t.Fatalf("a gRPC client's call with 64 KiB of metadata: %v, want an error naming the limit (8192 bytes)", err)
	}
	// The default, 64 KiB, refuses 1 MiB (gRPC's own would take 16 MiB).
	d := serve(t, "--config", writeConfig(t, hostileConfig))
	if answered, _ := rawHeaders(t, d.addr, 1<<20); answered {
		t.Fatal("a call with 1 MiB of metadata under the default limit was answered")
	}
	if answered, refused := rawHeaders(t, d.addr, 32<<10); !answered {
		t.Fatalf("a call with 32 KiB of metadata under the default limit: %s, want it answered", refused)
	}
}

func TestACallWhoseRequestNeverArrivesIsEndedAfterRequestReadTimeout(t *testing.T) {
	s := serve(t, "--config", writeConfig(t, "request_read_timeout: 1s\n"+hostileConfig))
	conn := dialTest(t, s.addr)
	// Each call's headers go out when its stream opens; its request
	// message never does.
	open := func(method string, reply proto.Message) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		desc := &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}
		stream, err := conn.NewStream(ctx, desc, method)
		if err != nil {
			return err
		}
		return stream.RecvMsg(reply)
	}
	// The gateway ends the call: gRPC answers it CANCELLED (the client's
	// own deadline would be DEADLINE_EXCEEDED).
	for _, c := range []struct {
		method string
		reply  proto.Message
	}{
		{"/acpgate.v1.AgentGateway/GetSession", &acpgatev1.Session{}}, // unary: gRPC reads the request before any interceptor
		{"/acpgate.v1.AgentGateway/Prompt", &acpgatev1.PromptEvent{}}, // streaming: the handler's first read
	} {
		if err := open(c.method, c.reply); status.Code(err) != codes.Canceled {
			t.Errorf("%s without its request: %v, want CANCELLED from the gateway within request_read_timeout", c.method, err)
		}
	}
	// A flood of such calls logs one line, not a line per call.
	const warning = "the call was ended (like warnings are logged at most once a minute)"
	if n := strings.Count(s.log(), warning); n != 1 {
		t.Errorf("two late requests logged %d warnings, want 1:\n%s", n, s.log())
	}
	// The bound ends at the request: a turn that runs longer than it is
	// not cut short.
	client := acpgatev1.NewAgentGatewayClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := client.Prompt(ctx, &acpgatev1.PromptRequest{Agent: "test", Text: "sleep 1500\nchunk done"})
	if err != nil {
		t.Fatal(err)
	}
	events := drain(t, stream)
	if terminal := events[len(events)-1]; terminal.GetOutcome().GetText() != "done" {
		t.Fatalf("a 1.5 s turn under a 1 s request_read_timeout ended with %v, want its outcome", terminal)
	}
}

func TestTheMetricsAndAdminListenersHoldAtMost64ConnectionsEach(t *testing.T) {
	const bound = 64 // server.sideMaxConnections
	// One gateway per listener: both on port 0 would be one address to
	// the configuration's check.
	metrics := serve(t, "--config", writeConfig(t, "metrics: {listen: \"127.0.0.1:0\"}\n"+hostileConfig))
	metricsURL := metrics.metricsURL(t)
	admin := serve(t, "--config", writeConfig(t, "admin: {listen: \"127.0.0.1:0\"}\n"+hostileConfig))
	adminAddr := admin.announced(t, "acpgate admin on ")
	scrapeWithin := func(d time.Duration) error {
		// A connection of its own each time, as a new scraper's.
		resp, err := (&http.Client{Timeout: d, Transport: &http.Transport{DisableKeepAlives: true}}).Get(metricsURL)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	channelzWithin := func(d time.Duration) error {
		conn, err := grpc.NewClient(adminAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		_, err = channelzpb.NewChannelzClient(conn).GetServers(ctx, &channelzpb.GetServersRequest{}, grpc.WaitForReady(true))
		return err
	}
	for _, l := range []struct {
		name, addr, warning string
		s                   *served
		call                func(time.Duration) error
	}{
		{"metrics", strings.TrimSuffix(strings.TrimPrefix(metricsURL, "http://"), "/metrics"), `bound="metrics.listen (fixed)"`, metrics, scrapeWithin},
		{"admin", adminAddr, `bound="admin.listen (fixed)"`, admin, channelzWithin},
	} {
		if err := l.call(5 * time.Second); err != nil {
			t.Fatalf("%s before the flood: %v", l.name, err)
		}
		// Connections that never send a byte take every slot.
		var flood []net.Conn
		for range bound {
			c, err := net.DialTimeout("tcp", l.addr, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			flood = append(flood, c)
		}
		if err := l.call(time.Second); err == nil {
			t.Errorf("%s: a call got through with %d idle connections open", l.name, bound)
		}
		// One closes: the next connection is accepted.
		_ = flood[0].Close()
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := l.call(2 * time.Second)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no call got through after one of the %d connections closed: %v", l.name, bound, err)
			}
		}
		for _, c := range flood[1:] {
			_ = c.Close()
		}
		if !strings.Contains(l.s.log(), l.warning) {
			t.Errorf("%s: no warning that the listener was full:\n%s", l.name, l.s.log())
		}
	}
}
