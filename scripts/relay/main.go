// Command relay is the least a TCP proxy written in Go can do: two
// goroutines per connection, each copying one direction with io.Copy. It is
// no product: `scripts/bench.sh --relays` runs it beside cqlgate and a relay
// in C (scripts/crelay/crelay.c) to show what any Go proxy, and any proxy at all, adds to a
// request's latency on the machine at hand.
package main

import (
	"flag"
	"io"
	"log"
	"net"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:9043", "address to listen on")
	up := flag.String("up", "127.0.0.1:9042", "address to relay to")
	flag.Parse()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			log.Fatal(err)
		}
		go relay(c, *up)
	}
}

func relay(c net.Conn, up string) {
	defer c.Close()
	u, err := net.Dial("tcp", up)
	if err != nil {
		log.Printf("dial %s: %v", up, err)
		return
	}
	defer u.Close()
	go func() {
		_, _ = io.Copy(u, c)
		_ = u.(*net.TCPConn).CloseWrite()
	}()
	_, _ = io.Copy(c, u)
}
