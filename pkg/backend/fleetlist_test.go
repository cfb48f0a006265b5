package backend

import (
	"encoding/binary"
	"net"
	"testing"
)

// cqlTextMap encodes a map<text, text> as Cassandra sends it.
func cqlTextMap(kv ...string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(kv)/2))
	for _, s := range kv {
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	return b
}

func clientRow(ip string, port int32, requests int64, opts ...string) row {
	return row{"address": net.ParseIP(ip).To4(), "port": cqlInt(port), "request_count": cqlBig(requests),
		"client_options": cqlTextMap(opts...)}
}

// The list counts proxy processes, not connections: two connections of one
// instance are one proxy, and drivers connected directly are not counted.
// A proxy that names no instance counts once per address.
func TestParseFleetCountsProxies(t *testing.T) {
	rows := []row{
		clientRow("10.0.0.1", 40001, 100, "DRIVER_NAME", "cqlgate", InstanceOption, "a"),
		clientRow("10.0.0.1", 40002, 50, "DRIVER_NAME", "cqlgate", InstanceOption, "a"),
		clientRow("10.0.0.1", 40003, 70, "DRIVER_NAME", "cqlgate", InstanceOption, "b"),
		clientRow("10.0.0.2", 40001, 9, "DRIVER_NAME", "cqlgate"),
		clientRow("10.0.0.2", 40002, 9, "DRIVER_NAME", "cqlgate"),
		clientRow("10.0.0.3", 40001, 1000, "DRIVER_NAME", "Apache Cassandra Python Driver"),
		{"address": net.ParseIP("10.0.0.4").To4(), "port": cqlInt(1), "request_count": cqlBig(3)}, // no options
	}
	fl, err := parseFleet(rows)
	if err != nil {
		t.Fatal(err)
	}
	if fl.Proxies != 3 || len(fl.Requests) != 5 || fl.Requests["10.0.0.1:40002"] != 50 {
		t.Errorf("got %d proxies, requests %v; want 3 (a, b and 10.0.0.2), the 5 proxy connections'", fl.Proxies, fl.Requests)
	}
}

// A malformed map is an error, never a list that reads as empty.
func TestParseFleetRejectsABadMap(t *testing.T) {
	for _, b := range [][]byte{{0, 0}, {0, 0, 0, 1, 0, 0, 0, 9, 'a'}, {0xff, 0xff, 0xff, 0xff}} {
		r := clientRow("10.0.0.1", 1, 1)
		r["client_options"] = b
		if _, err := parseFleet([]row{r}); err == nil {
			t.Errorf("client_options %x: no error", b)
		}
	}
}

// The proxies' share of what the node completed between two readings: the
// growth of each proxy connection's count, a new connection's whole count.
func TestProxyShare(t *testing.T) {
	prev := FleetList{Requests: map[string]int64{"a:1": 100, "b:1": 50, "gone:1": 10}}
	cur := FleetList{Requests: map[string]int64{"a:1": 400, "b:1": 150, "new:1": 100}}
	if s := ProxyShare(prev, cur, 1000); s != 0.5 {
		t.Errorf("share %.3f; want (300+100+100)/1000 = 0.5", s)
	}
	if s := ProxyShare(FleetList{}, cur, 1000); s != 0 {
		t.Errorf("share %.3f without a previous list; want 0 (unknown)", s)
	}
	if s := ProxyShare(prev, cur, 100); s != 1 {
		t.Errorf("share %.3f over more than the node counted; want 1", s)
	}
}
