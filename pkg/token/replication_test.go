package token

import (
	"encoding/binary"
	"errors"
	"maps"
	"testing"
)

func TestParseReplication(t *testing.T) {
	for _, c := range []struct {
		opts map[string]string
		want Replication
	}{
		{map[string]string{"class": "org.apache.cassandra.locator.SimpleStrategy", "replication_factor": "3"},
			Replication{Strategy: SimpleStrategy, Factor: 3}},
		{map[string]string{"class": "SimpleStrategy", "replication_factor": "3/1"},
			Replication{Strategy: SimpleStrategy, Factor: 3}},
		{map[string]string{"class": "org.apache.cassandra.locator.NetworkTopologyStrategy", "dc1": "3", "dc2": "2/1"},
			Replication{Strategy: NetworkTopologyStrategy, DCFactors: map[string]int{"dc1": 3, "dc2": 2}}},
		{map[string]string{"class": "NetworkTopologyStrategy", "replication_factor": "2", "dc1": "1"},
			Replication{Strategy: NetworkTopologyStrategy, Factor: 2, DCFactors: map[string]int{"dc1": 1}}},
		{map[string]string{"class": "org.apache.cassandra.locator.LocalStrategy"},
			Replication{Strategy: LocalStrategy}},
		{map[string]string{"class": "com.datastax.bdp.cassandra.locator.EverywhereStrategy"},
			Replication{Strategy: EverywhereStrategy}},
	} {
		got, err := ParseReplication(c.opts)
		if err != nil {
			t.Errorf("ParseReplication(%v): %v", c.opts, err)
			continue
		}
		if got.Strategy != c.want.Strategy || got.Factor != c.want.Factor || !maps.Equal(got.DCFactors, c.want.DCFactors) {
			t.Errorf("ParseReplication(%v) = %+v; want %+v", c.opts, got, c.want)
		}
	}
}

func TestParseReplicationErrors(t *testing.T) {
	for _, c := range []struct {
		opts map[string]string
		want error
	}{
		{map[string]string{"class": "org.example.MyStrategy"}, ErrUnknownStrategy},
		{map[string]string{}, ErrUnknownStrategy},
		{map[string]string{"class": "SimpleStrategy"}, ErrBadReplication},
		{map[string]string{"class": "SimpleStrategy", "replication_factor": "three"}, ErrBadReplication},
		{map[string]string{"class": "SimpleStrategy", "replication_factor": "-1"}, ErrBadReplication},
		{map[string]string{"class": "SimpleStrategy", "replication_factor": "2/3"}, ErrBadReplication},
		{map[string]string{"class": "NetworkTopologyStrategy", "dc1": "x"}, ErrBadReplication},
	} {
		if _, err := ParseReplication(c.opts); !errors.Is(err, c.want) {
			t.Errorf("ParseReplication(%v) error = %v; want %v", c.opts, err, c.want)
		}
	}
}

func TestParseFactor(t *testing.T) {
	for s, want := range map[string]int{"0": 0, "1": 1, "3": 3, " 5 ": 5, "3/1": 3, "4/0": 4} {
		if got, err := ParseFactor(s); err != nil || got != want {
			t.Errorf("ParseFactor(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "/", "3/", "/1", "a", "1.5", "-2", "3/-1"} {
		if _, err := ParseFactor(s); !errors.Is(err, ErrBadReplication) {
			t.Errorf("ParseFactor(%q) error = %v; want ErrBadReplication", s, err)
		}
	}
}

// encodeTextMap encodes m as a CQL map<text, text> value (v3+).
func encodeTextMap(kv ...string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(kv)/2))
	for _, s := range kv {
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	return b
}

func TestDecodeReplication(t *testing.T) {
	raw := encodeTextMap("class", "org.apache.cassandra.locator.NetworkTopologyStrategy", "datacenter1", "3")
	got, err := DecodeReplication(raw)
	if err != nil {
		t.Fatal(err)
	}
	if got.Strategy != NetworkTopologyStrategy || got.DCFactors["datacenter1"] != 3 {
		t.Errorf("DecodeReplication = %+v", got)
	}
	for i := range len(raw) {
		if _, err := DecodeReplication(raw[:i]); !errors.Is(err, ErrBadReplication) {
			t.Errorf("DecodeReplication of %d of %d bytes: error %v; want ErrBadReplication", i, len(raw), err)
		}
	}
	if _, err := DecodeReplication([]byte{0x7f, 0xff, 0xff, 0xff}); !errors.Is(err, ErrBadReplication) {
		t.Errorf("huge count: error %v; want ErrBadReplication", err)
	}
}

func FuzzDecodeReplication(f *testing.F) {
	f.Add(encodeTextMap("class", "SimpleStrategy", "replication_factor", "3"))
	f.Add(encodeTextMap("class", "NetworkTopologyStrategy", "dc1", "3/1", "dc2", "2"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := DecodeReplication(raw)
		if err != nil {
			return
		}
		nodes := []Node{{ID: 1, DC: "dc1", Rack: "a", Tokens: tokens(1, 100)}, {ID: 2, DC: "dc2", Rack: "b", Tokens: tokens(50)}}
		ring, _ := NewRing(nodes)
		if p := ring.Placement(r); p != nil && len(p.Replicas(60)) > 2 {
			t.Fatalf("more replicas than nodes: %v", p.Replicas(60))
		}
	})
}
