package token

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Strategy is a replication strategy class.
type Strategy uint8

// The strategies placement knows. Any other class is refused by
// ParseReplication with ErrUnknownStrategy: its keyspaces get no token
// awareness.
const (
	// SimpleStrategy: the Factor nodes that follow the token on the ring.
	SimpleStrategy Strategy = iota + 1
	// NetworkTopologyStrategy: per data center, DCFactors[dc] nodes of that
	// data center following the token, on distinct racks as far as racks go.
	NetworkTopologyStrategy
	// LocalStrategy: each node has its own data (the system keyspace); no
	// node is a better choice than another, so there are no replicas.
	LocalStrategy
	// EverywhereStrategy (DataStax): every node is a replica.
	EverywhereStrategy
)

func (s Strategy) String() string {
	switch s {
	case SimpleStrategy:
		return "SimpleStrategy"
	case NetworkTopologyStrategy:
		return "NetworkTopologyStrategy"
	case LocalStrategy:
		return "LocalStrategy"
	case EverywhereStrategy:
		return "EverywhereStrategy"
	}
	return fmt.Sprintf("Strategy(%d)", uint8(s))
}

// Errors of the replication parsers.
var (
	// ErrUnknownStrategy means the replication class is not one that
	// placement implements.
	ErrUnknownStrategy = errors.New("token: unknown replication strategy")
	// ErrBadReplication means the replication options are malformed.
	ErrBadReplication = errors.New("token: malformed replication options")
)

// Replication is a keyspace's replication, as system_schema.keyspaces holds
// it. Factors are full replica counts: with transient replication ("3/1")
// the transient replicas are counted, as they are replicas too.
type Replication struct {
	Strategy Strategy
	// Factor is SimpleStrategy's replication factor. For
	// NetworkTopologyStrategy it is the factor of data centers that
	// DCFactors does not list (the "replication_factor" option, which
	// Cassandra normally expands into per-DC options before storing them),
	// usually 0.
	Factor int
	// DCFactors are NetworkTopologyStrategy's factors per data center.
	DCFactors map[string]int
}

// key returns a canonical string for r, so that keyspaces with the same
// replication can share one placement.
func (r Replication) key() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d/%d", r.Strategy, r.Factor)
	for _, dc := range slices.Sorted(maps.Keys(r.DCFactors)) {
		fmt.Fprintf(&b, "/%q=%d", dc, r.DCFactors[dc])
	}
	return b.String()
}

// ParseReplication parses the replication options of a keyspace (the
// replication column of system_schema.keyspaces): "class" is the strategy,
// with or without its package (org.apache.cassandra.locator.SimpleStrategy),
// SimpleStrategy takes "replication_factor", NetworkTopologyStrategy one
// option per data center. A class placement does not implement gets an
// error wrapping ErrUnknownStrategy, malformed options one wrapping
// ErrBadReplication.
func ParseReplication(opts map[string]string) (Replication, error) {
	class := opts["class"]
	var r Replication
	switch class[strings.LastIndexByte(class, '.')+1:] {
	case "SimpleStrategy":
		r.Strategy = SimpleStrategy
		f, ok := opts["replication_factor"]
		if !ok {
			return Replication{}, fmt.Errorf("token: SimpleStrategy without replication_factor: %w", ErrBadReplication)
		}
		var err error
		if r.Factor, err = ParseFactor(f); err != nil {
			return Replication{}, err
		}
	case "NetworkTopologyStrategy":
		r.Strategy = NetworkTopologyStrategy
		r.DCFactors = make(map[string]int, len(opts))
		for k, v := range opts {
			if k == "class" {
				continue
			}
			f, err := ParseFactor(v)
			if err != nil {
				return Replication{}, fmt.Errorf("data center %q: %w", k, err)
			}
			if k == "replication_factor" {
				r.Factor = f
				continue
			}
			r.DCFactors[k] = f
		}
	case "LocalStrategy":
		r.Strategy = LocalStrategy
	case "EverywhereStrategy":
		r.Strategy = EverywhereStrategy
	default:
		return Replication{}, fmt.Errorf("token: replication class %q: %w", class, ErrUnknownStrategy)
	}
	return r, nil
}

// ParseFactor parses a replication factor as Cassandra stores it: "3", or
// with transient replication "3/1" (3 replicas of which 1 transient). It
// returns the full count, transient replicas included.
func ParseFactor(s string) (int, error) {
	all, transient, found := strings.Cut(strings.TrimSpace(s), "/")
	n, err := strconv.Atoi(all)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("token: replication factor %q: %w", s, ErrBadReplication)
	}
	if found {
		t, err := strconv.Atoi(transient)
		if err != nil || t < 0 || t > n {
			return 0, fmt.Errorf("token: replication factor %q: %w", s, ErrBadReplication)
		}
	}
	return n, nil
}

// DecodeReplication parses the raw value of the replication column of
// system_schema.keyspaces, a map<text, text> in the native protocol's v3+
// encoding ([int] count, then [int]-length-prefixed keys and values), as a
// RESULT Rows cell carries it.
func DecodeReplication(raw []byte) (Replication, error) {
	m, err := decodeTextMap(raw)
	if err != nil {
		return Replication{}, err
	}
	return ParseReplication(m)
}

func decodeTextMap(b []byte) (map[string]string, error) {
	bad := func(what string) error {
		return fmt.Errorf("token: replication map: %s: %w", what, ErrBadReplication)
	}
	if len(b) < 4 {
		return nil, bad("short count")
	}
	n := int32(binary.BigEndian.Uint32(b))
	b = b[4:]
	if n < 0 || int64(n) > int64(len(b)/8) {
		return nil, bad(fmt.Sprintf("count %d", n))
	}
	m := make(map[string]string, n)
	next := func() (string, bool) {
		if len(b) < 4 {
			return "", false
		}
		l := int32(binary.BigEndian.Uint32(b))
		b = b[4:]
		if l < 0 || int64(l) > int64(len(b)) {
			return "", false
		}
		s := string(b[:l])
		b = b[l:]
		return s, true
	}
	for range n {
		k, ok := next()
		if !ok {
			return nil, bad("key")
		}
		v, ok := next()
		if !ok {
			return nil, bad("value of " + strconv.Quote(k))
		}
		m[k] = v
	}
	return m, nil
}
