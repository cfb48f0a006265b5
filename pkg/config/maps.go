package config

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseAddressMap parses --address-map pairs FROM=TO. FROM is a host or
// host:port as Cassandra advertises it; TO is the host:port to dial (the
// port defaults to 9042). Keys are returned in the normalized HOST:PORT
// form when they carry a port, as a bare host otherwise, so a lookup can try
// the advertised host:port first and the host alone second.
func ParseAddressMap(pairs []string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(pairs))
	for _, pair := range pairs {
		from, to, ok := strings.Cut(pair, "=")
		from, to = strings.TrimSpace(from), strings.TrimSpace(to)
		if !ok || from == "" || to == "" {
			return nil, fmt.Errorf("%q: want FROM=TO, e.g. 10.0.0.5:9042=127.0.0.1:19042", pair)
		}
		key := from
		if strings.Contains(from, ":") && !isBareIPv6(from) {
			hp, err := normalizeHostPort(from, DefaultCQLPort)
			if err != nil {
				return nil, err
			}
			key = hp
		} else if ip, err := parseIP(from); err == nil {
			key = ip.String()
		}
		dst, err := normalizeHostPort(to, DefaultCQLPort)
		if err != nil {
			return nil, err
		}
		if _, dup := m[key]; dup {
			return nil, fmt.Errorf("%q is mapped twice", from)
		}
		m[key] = dst
	}
	return m, nil
}

func isBareIPv6(s string) bool {
	ip, err := parseIP(s)
	return err == nil && ip.Is6() && !strings.HasPrefix(s, "[")
}

// KeyspaceWeights are the admission queue's priority classes: class 0
// holds every keyspace not listed, and each listed keyspace has its own
// class.
type KeyspaceWeights struct {
	// Weights[i] is class i's weight; Weights[0] is the "*" class.
	Weights []int
	// Class maps a keyspace name (as Cassandra stores it: lower case unless
	// created quoted) to its class.
	Class map[string]int
}

// ParseKeyspaceWeights parses --keyspace-weights pairs KEYSPACE=WEIGHT, with
// * naming every other keyspace. No pairs means one class.
func ParseKeyspaceWeights(pairs []string) (KeyspaceWeights, error) {
	kw := KeyspaceWeights{Weights: []int{1}}
	if len(pairs) == 0 {
		return kw, nil
	}
	kw.Class = make(map[string]int, len(pairs))
	star := false
	for _, pair := range pairs {
		ks, w, ok := strings.Cut(pair, "=")
		ks, w = strings.TrimSpace(ks), strings.TrimSpace(w)
		weight, err := strconv.Atoi(w)
		if !ok || ks == "" || err != nil {
			return KeyspaceWeights{}, fmt.Errorf("%q: want KEYSPACE=WEIGHT, e.g. orders=8", pair)
		}
		if weight < 1 || weight > 1000 {
			return KeyspaceWeights{}, fmt.Errorf("%q: the weight must be between 1 and 1000", pair)
		}
		if ks == "*" {
			if star {
				return KeyspaceWeights{}, fmt.Errorf("* is given twice")
			}
			star = true
			kw.Weights[0] = weight
			continue
		}
		if _, dup := kw.Class[ks]; dup {
			return KeyspaceWeights{}, fmt.Errorf("keyspace %q is given twice", ks)
		}
		if len(kw.Weights) == 64 {
			return KeyspaceWeights{}, fmt.Errorf("at most 63 keyspaces besides * may have a weight")
		}
		kw.Class[ks] = len(kw.Weights)
		kw.Weights = append(kw.Weights, weight)
	}
	return kw, nil
}
