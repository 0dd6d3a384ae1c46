package testutil

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
)

// FreePort is a TCP port on 127.0.0.1 that was free a moment ago: for a
// process whose configuration must name its port before it listens (a
// replica's advertised address, a database server's port).
//
// It is drawn from below the kernel's ephemeral range: a port the kernel
// picked for a listen on port 0 is handed out again to the next such
// listen or outgoing connection, often within a test run, and the process
// that was meant to listen on it then fails with "address already in
// use". Below that range only an explicit bind can take the port, so a
// collision needs another test to draw the same number. A caller that can
// retry still does.
func FreePort() (int, error) {
	low, high := 20000, ephemeralLow()
	for range 64 {
		if high <= low {
			break
		}
		port := low + rand.IntN(high-low)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		l.Close()
		return port, nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// default when it cannot be read).
func ephemeralLow() int {
	const linuxDefault = 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return linuxDefault
	}
	var low int
	if _, err := fmt.Sscan(string(b), &low); err != nil {
		return linuxDefault
	}
	return low
}
