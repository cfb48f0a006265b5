package backend

// A node's list of clients, as the fleet limit reads it: how many proxies
// the node serves, and how many requests came through them (see
// pkg/limiter's fleetsize.go). Every connection the proxy opens names its
// process in STARTUP (InstanceOption); Cassandra 4.0 and later list each
// connection in system_views.clients with the options its client sent.

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
)

const (
	// driverName is the DRIVER_NAME the proxy's connections send.
	driverName = "cqlgate"
	// InstanceOption is the STARTUP option that names the proxy's process.
	InstanceOption = "CQLGATE_INSTANCE"
	// fleetQuery reads the list. A row per connection: a fleet of 1,000
	// proxies with a few connections each lists thousands.
	fleetQuery = "SELECT address, port, client_options, request_count FROM system_views.clients"
	// fleetPage is the most connections a reading lists: a longer list is
	// counted from its first page, and the fleet reads as smaller than it
	// is (16,000 connections: 4,000 proxies of four each).
	fleetPage = 16000
)

// newInstance draws a name for this process: its host's name, for the
// operator reading system_views.clients, and 8 random hex digits, for
// proxies that share a host.
func newInstance() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "cqlgate"
	}
	return host + "-" + hex.EncodeToString(b[:])
}

// FleetList is one reading of a node's list of clients.
type FleetList struct {
	// Proxies is the number of distinct proxy processes connected to the
	// node (this one included).
	Proxies int
	// Requests is each proxy connection's count of requests (address:port
	// to Cassandra's request_count).
	Requests map[string]int64
}

// Fleet reads node n's list of clients over a connection of the default
// pool. A node without the virtual table (before Cassandra 4.0) answers
// with a *ServerError.
func (cl *Cluster) Fleet(ctx context.Context, n *Node) (FleetList, error) {
	rows, err := cl.queryNode(ctx, n, fleetQuery, fleetPage)
	if err != nil {
		return FleetList{}, fmt.Errorf("clients of %s: %w", n.Addr, err)
	}
	fl, err := parseFleet(rows)
	if err != nil {
		return FleetList{}, fmt.Errorf("clients of %s: %w", n.Addr, err)
	}
	return fl, nil
}

// parseFleet counts the proxies among the rows of fleetQuery: connections
// whose DRIVER_NAME is the proxy's, by their InstanceOption (a proxy that
// sends none, an older version, counts as one per address).
func parseFleet(rows []row) (FleetList, error) {
	fl := FleetList{Requests: map[string]int64{}}
	seen := map[string]bool{}
	for _, r := range rows {
		opts, err := textMap(r.bytes("client_options"))
		if err != nil {
			return FleetList{}, fmt.Errorf("client_options: %w", err)
		}
		if opts["DRIVER_NAME"] != driverName {
			continue
		}
		ip := r.inet("address")
		port, ok := r.int("port")
		if ip == nil || !ok {
			return FleetList{}, errors.New("a proxy connection without its address or port")
		}
		addr := net.JoinHostPort(ip.String(), strconv.Itoa(int(port)))
		id := opts[InstanceOption]
		if id == "" {
			id = "address " + ip.String()
		}
		if !seen[id] {
			seen[id] = true
			fl.Proxies++
		}
		if b := r.bytes("request_count"); b != nil {
			n, err := integer(b)
			if err != nil {
				return FleetList{}, fmt.Errorf("request_count: %w", err)
			}
			fl.Requests[addr] = n
		}
	}
	return fl, nil
}

// ProxyShare is the share of the requests a node completed between two
// readings of its list, prev and cur, that came through proxies: the
// growth of each proxy connection's count over done, the node's count of
// completed requests between them (0 when unknown). A connection opened
// since prev counts whole; one closed since is missed.
func ProxyShare(prev, cur FleetList, done uint64) float64 {
	if prev.Requests == nil || done == 0 {
		return 0
	}
	var sum int64
	for addr, n := range cur.Requests {
		if p, ok := prev.Requests[addr]; ok && p <= n {
			n -= p
		}
		sum += n
	}
	return min(float64(sum)/float64(done), 1)
}

// textMap decodes a map<text, text> ([int n] then n pairs of [int
// len][bytes]); a null value decodes as an empty map.
func textMap(b []byte) (map[string]string, error) {
	if b == nil {
		return nil, nil
	}
	next := func() (string, error) {
		if len(b) < 4 {
			return "", errors.New("short map")
		}
		l := int(int32(binary.BigEndian.Uint32(b)))
		b = b[4:]
		if l < 0 || l > len(b) {
			return "", fmt.Errorf("map entry of %d bytes in %d", l, len(b))
		}
		s := string(b[:l])
		b = b[l:]
		return s, nil
	}
	if len(b) < 4 {
		return nil, errors.New("short map")
	}
	n := int(int32(binary.BigEndian.Uint32(b)))
	b = b[4:]
	if n < 0 || n > len(b)/8 {
		return nil, fmt.Errorf("map of %d entries in %d bytes", n, len(b))
	}
	m := make(map[string]string, n)
	for range n {
		k, err := next()
		if err != nil {
			return nil, err
		}
		v, err := next()
		if err != nil {
			return nil, err
		}
		m[k] = v
	}
	return m, nil
}
