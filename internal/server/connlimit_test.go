package server

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"
)

// accepted accepts from lis in the background; the connections arrive on
// the channel, and the error that ended accepting on errc.
func accepted(lis net.Listener) (<-chan net.Conn, <-chan error) {
	conns, errc := make(chan net.Conn, 16), make(chan error, 1)
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				errc <- err
				return
			}
			conns <- c
		}
	}()
	return conns, errc
}

func dialed(t *testing.T, lis net.Listener) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", lis.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// mustAccept waits for the next accepted connection.
func mustAccept(t *testing.T, conns <-chan net.Conn, what string) net.Conn {
	t.Helper()
	select {
	case c := <-conns:
		return c
	case <-time.After(5 * time.Second):
		t.Fatalf("%s was not accepted within 5 s", what)
		return nil
	}
}

// mustNotAccept fails if a connection is accepted within 200 ms.
func mustNotAccept(t *testing.T, conns <-chan net.Conn, why string) {
	t.Helper()
	select {
	case <-conns:
		t.Fatal(why)
	case <-time.After(200 * time.Millisecond):
	}
}

func TestALimitedListenerAcceptsTheNextConnectionOnlyOnceOneCloses(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis := limitConnections(inner, 2, "test", slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	defer lis.Close()
	conns, _ := accepted(lis)
	var open []net.Conn
	for range 2 {
		dialed(t, lis)
		open = append(open, mustAccept(t, conns, "a connection under the limit"))
	}
	dialed(t, lis)
	mustNotAccept(t, conns, "a third connection was accepted with a limit of 2")
	// Closing one twice frees one slot, not two.
	_ = open[0].Close()
	_ = open[0].Close()
	mustAccept(t, conns, "the third connection, once one closed,")
	dialed(t, lis)
	mustNotAccept(t, conns, "a fourth connection was accepted: a connection closed twice freed two slots")
}

func TestClosingALimitedListenerEndsAnAcceptWaitingForASlot(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis := limitConnections(inner, 1, "test", slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	conns, errc := accepted(lis)
	dialed(t, lis)
	<-conns
	dialed(t, lis) // the accept loop now waits for a slot
	time.Sleep(50 * time.Millisecond)
	_ = lis.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("accept ended with %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("accept still waits for a slot 5 s after the listener closed")
	}
}
