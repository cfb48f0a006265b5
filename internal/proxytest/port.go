package proxytest

import (
	"net"
	"testing"
)

// FreePortOn returns a port that was free on every one of hosts just now,
// for a proxy listening on several addresses with one port, as drivers
// expect of the nodes of a cluster.
func FreePortOn(tb testing.TB, hosts ...string) string {
	tb.Helper()
	for range 20 {
		ln, err := net.Listen("tcp", hosts[0]+":0")
		if err != nil {
			tb.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		free := true
		var held []net.Listener
		for _, h := range hosts[1:] {
			l, err := net.Listen("tcp", net.JoinHostPort(h, port))
			if err != nil {
				free = false
				break
			}
			held = append(held, l)
		}
		ln.Close()
		for _, l := range held {
			l.Close()
		}
		if free {
			return port
		}
	}
	tb.Fatalf("no port free on all of %v", hosts)
	return ""
}
