package token

import (
	"strconv"
)

// AppendRoutingKey appends to dst the routing key of a partition key whose
// components (the serialized values of the partition-key columns, in
// partition-key order) are parts: the value itself for a single component,
// and for a composite key, each component as a 2-byte big-endian length,
// the bytes and a 0x00 end-of-component byte (Cassandra's CompositeType).
//
// A component longer than 65535 bytes cannot be part of a composite key
// (Cassandra refuses such a write); its length is written modulo 2^16 and
// the key matches no partition.
func AppendRoutingKey(dst []byte, parts [][]byte) []byte {
	if len(parts) == 1 {
		return append(dst, parts[0]...)
	}
	for _, p := range parts {
		dst = append(dst, byte(len(p)>>8), byte(len(p)))
		dst = append(dst, p...)
		dst = append(dst, 0)
	}
	return dst
}

// PartitionToken returns the token of the partition key made of parts (see
// AppendRoutingKey). It does not allocate for composite keys of up to 256
// bytes.
func PartitionToken(parts [][]byte) int64 {
	if len(parts) == 1 {
		return Murmur3(parts[0])
	}
	var buf [256]byte
	return Murmur3(AppendRoutingKey(buf[:0], parts))
}

// Parse parses a Murmur3Partitioner token as the system tables and
// token() write it: a decimal int64.
func Parse(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) }
