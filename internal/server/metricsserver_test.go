package server

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/acpgate/acpgate/internal/metrics"
)

// closedWithin reports whether the server closes c within d, reading and
// discarding whatever it sends until then.
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	return err == nil // EOF: the server closed it; a timeout is an error
}

func TestTheMetricsListenerClosesSilentAndIdleConnections(t *testing.T) {
	addr := make(chan net.Addr, 1)
	limits := httpTimeouts{readHeader: 300 * time.Millisecond, write: time.Second, idle: 300 * time.Millisecond}
	s, err := serveMetrics("127.0.0.1:0", metrics.New(metrics.Limits{}), slog.New(slog.NewTextHandler(io.Discard, nil)), func(a net.Addr) { addr <- a }, limits)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.stop(context.Background()) })
	at := (<-addr).String()
	dial := func() net.Conn {
		c, err := net.DialTimeout("tcp", at, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}

	// A connection that never sends its request.
	if !closedWithin(dial(), 5*time.Second) {
		t.Error("a connection that sent nothing was still open after 5 s, with a read-header timeout of 300 ms")
	}

	// A scrape on a kept-alive connection, then silence.
	c := dial()
	if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the scrape: %s, %v", resp.Status, err)
	}
	_ = resp.Body.Close()
	if resp.Close {
		t.Fatal("the server did not keep the connection alive, so idleness is not what this tests")
	}
	if !closedWithin(c, 5*time.Second) {
		t.Error("a kept-alive connection was still open 5 s after its scrape, with an idle timeout of 300 ms")
	}
}
