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
// holds every keyspace (and role) not listed, and each listed keyspace or
// role has its own class.
type KeyspaceWeights struct {
	// Weights[i] is class i's weight; Weights[0] is the "*" class.
	Weights []int
	// Class maps a keyspace name (as Cassandra stores it: lower case unless
	// created quoted) to its class.
	Class map[string]int
	// RoleClass maps a login role to its class; a listed role's class wins
	// over its keyspace's (--role-weights).
	RoleClass map[string]int
}

// ParseKeyspaceWeights parses --keyspace-weights pairs KEYSPACE=WEIGHT, with
// * naming every other keyspace. No pairs means one class.
func ParseKeyspaceWeights(pairs []string) (KeyspaceWeights, error) {
	return ParseWeights(pairs, nil)
}

// ParseWeights parses --keyspace-weights and --role-weights together: they
// share the classes (at most 63 besides *) and the * weight, which either
// may give, but not both.
func ParseWeights(keyspaces, roles []string) (KeyspaceWeights, error) {
	kw := KeyspaceWeights{Weights: []int{1}}
	star := false
	var err error
	if kw.Class, err = parseClasses(&kw, &star, keyspaces, "KEYSPACE", "keyspace", "orders=8"); err != nil {
		return KeyspaceWeights{}, err
	}
	if kw.RoleClass, err = parseClasses(&kw, &star, roles, "ROLE", "role", "checkout=8"); err != nil {
		return KeyspaceWeights{}, err
	}
	return kw, nil
}

// parseClasses adds a class per NAME=WEIGHT pair to kw and returns the
// names' classes (nil for no pairs).
func parseClasses(kw *KeyspaceWeights, star *bool, pairs []string, what, noun, example string) (map[string]int, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	class := make(map[string]int, len(pairs))
	for _, pair := range pairs {
		name, w, ok := strings.Cut(pair, "=")
		name, w = strings.TrimSpace(name), strings.TrimSpace(w)
		weight, err := strconv.Atoi(w)
		if !ok || name == "" || err != nil {
			return nil, fmt.Errorf("%q: want %s=WEIGHT, e.g. %s", pair, what, example)
		}
		if weight < 1 || weight > 1000 {
			return nil, fmt.Errorf("%q: the weight must be between 1 and 1000", pair)
		}
		if name == "*" {
			if *star {
				return nil, fmt.Errorf("* is given twice")
			}
			*star = true
			kw.Weights[0] = weight
			continue
		}
		if _, dup := class[name]; dup {
			return nil, fmt.Errorf("%s %q is given twice", noun, name)
		}
		if len(kw.Weights) == 64 {
			return nil, fmt.Errorf("at most 63 keyspaces and roles besides * may have a weight")
		}
		class[name] = len(kw.Weights)
		kw.Weights = append(kw.Weights, weight)
	}
	return class, nil
}
