package server

import (
	"log/slog"
	"net"
	"sync"
	"syscall"

	"github.com/acpgate/acpgate/internal/metrics"
	"github.com/acpgate/acpgate/internal/throttle"
)

// limitConnections bounds the client connections open at once on lis at
// max (limits.max_connections). At the bound the listener stops
// accepting: a further connection waits in the kernel's accept queue (and
// is refused by the kernel once that queue is full) until an open one
// closes. Without the bound every connection, even one that never sends
// a byte, holds a file descriptor and gRPC's buffers for as long as the
// client likes: a flood of them grew the gateway by about 20 KiB each and could
// take the descriptors that agents' pipes and the store's files need, so
// that the next session failed to spawn its agent.
//
// Not golang.org/x/net/netutil.LimitListener: it has the same semantics
// but says neither how many connections are open nor when it is full,
// which an operator needs to tell a full gateway from a hung one
// (acpgate_connections_open, and a warning in the log).
//
// setting names the bound in the warning: limits.max_connections for the
// gRPC listener; the side listeners (metrics, admin) have a fixed bound,
// sideMaxConnections, and count in no metric (m nil).
func limitConnections(lis net.Listener, max int, setting string, log *slog.Logger, m *metrics.Metrics) net.Listener {
	return &limitedListener{
		Listener: lis,
		setting:  setting,
		slots:    make(chan struct{}, max),
		done:     make(chan struct{}),
		log:      log,
		m:        m,
	}
}

// checkDescriptors warns when max connections would take more than half
// of the file descriptors the process may open (RLIMIT_NOFILE, as Go
// raised it at start): at the bound, the connections could then starve
// agents' pipes and the store's files, the failure the bound is there to
// prevent. A warning, not a refusal: the operator may know the agents'
// needs are small.
// sideMaxConnections bounds the connections of each side listener
// (metrics.listen, admin.listen): a few scrapers and operators' tools need
// far fewer, and without a bound a client of an internal port could take
// the descriptors the agents need, as on the gRPC listener.
const sideMaxConnections = 64

func checkDescriptors(max int, log *slog.Logger) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return
	}
	if uint64(max) > lim.Cur/2 {
		log.Warn("limits.max_connections would take more than half of the file descriptors the gateway may open; agents and the store may run out of them at the bound: lower it, or raise RLIMIT_NOFILE",
			"max_connections", max, "rlimit_nofile", lim.Cur)
	}
}

// limitedListener is a listener with at most cap(slots) connections open.
type limitedListener struct {
	net.Listener
	setting   string        // the bound's name, for the warning
	slots     chan struct{} // holds one token per open connection
	done      chan struct{} // closed by Close
	closeOnce sync.Once
	log       *slog.Logger
	m         *metrics.Metrics
	warnings  throttle.Throttle // of the listener being full
}

// Accept waits for a free slot, then for a connection. A Close ends the
// wait for a slot.
func (l *limitedListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	default:
		l.warnFull()
		select {
		case l.slots <- struct{}{}:
		case <-l.done:
			return nil, net.ErrClosed
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	l.m.ConnectionOpened()
	return &limitedConn{Conn: c, l: l}, nil
}

// Close stops accepting and ends a wait for a slot.
func (l *limitedListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

func (l *limitedListener) warnFull() {
	l.warnings.Warn(l.log, "a listener has all the connections its bound allows open; new connections wait to be accepted until one closes",
		"addr", l.Addr().String(), "bound", l.setting, "max_connections", cap(l.slots))
}

// limitedConn frees its slot when closed, once.
type limitedConn struct {
	net.Conn
	l    *limitedListener
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		<-c.l.slots
		c.l.m.ConnectionClosed()
	})
	return err
}

// SyscallConn gives the underlying socket, which gRPC's channelz reads its
// options from; a wrapper without it would hide them.
func (c *limitedConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, syscall.EINVAL
	}
	return sc.SyscallConn()
}
