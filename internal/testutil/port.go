package testutil

import "net"

// FreePort is a TCP port on 127.0.0.1 that was free a moment ago: for a
// process whose configuration must name its port before it listens (a
// replica's advertised address, a database server's port). Another
// process may take it in between, so a caller that can retry does.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
