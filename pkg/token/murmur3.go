package token

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// Murmur3 returns the token of the routing key key under Cassandra's
// Murmur3Partitioner: the first 64 bits of MurmurHash3_x64_128 with seed 0,
// as Cassandra computes it, with -2^63 (the ring's minimum, which no key may
// have) mapped to 2^63-1.
//
// Cassandra's MurmurHash differs from the reference MurmurHash3 in the tail
// (the last len(key)%16 bytes): Java bytes are signed, so each tail byte is
// sign-extended to 64 bits before it is shifted and XORed in. Keys whose
// tail has a byte >= 0x80 therefore hash differently from standard
// murmur3 libraries, which is why this is not one of them.
//
// An empty key has the ring's minimum token, -2^63, as in Cassandra (which
// refuses empty partition keys anyway).
func Murmur3(key []byte) int64 {
	if len(key) == 0 {
		return math.MinInt64
	}
	const (
		c1 = 0x87c37b91114253d5
		c2 = 0x4cf5ad432745937f
	)
	var h1, h2 uint64
	n := len(key)
	b := key
	for len(b) >= 16 {
		// Blocks are read as little-endian longs (Cassandra's getBlock
		// masks each byte, so no sign extension here).
		k1 := binary.LittleEndian.Uint64(b)
		k2 := binary.LittleEndian.Uint64(b[8:])
		b = b[16:]

		k1 *= c1
		k1 = bits.RotateLeft64(k1, 31)
		k1 *= c2
		h1 ^= k1
		h1 = bits.RotateLeft64(h1, 27)
		h1 += h2
		h1 = h1*5 + 0x52dce729

		k2 *= c2
		k2 = bits.RotateLeft64(k2, 33)
		k2 *= c1
		h2 ^= k2
		h2 = bits.RotateLeft64(h2, 31)
		h2 += h1
		h2 = h2*5 + 0x38495ab5
	}

	var k1, k2 uint64
	// se sign-extends a tail byte, as Java's (long) of a byte does.
	se := func(x byte) uint64 { return uint64(int64(int8(x))) }
	switch len(b) {
	case 15:
		k2 ^= se(b[14]) << 48
		fallthrough
	case 14:
		k2 ^= se(b[13]) << 40
		fallthrough
	case 13:
		k2 ^= se(b[12]) << 32
		fallthrough
	case 12:
		k2 ^= se(b[11]) << 24
		fallthrough
	case 11:
		k2 ^= se(b[10]) << 16
		fallthrough
	case 10:
		k2 ^= se(b[9]) << 8
		fallthrough
	case 9:
		k2 ^= se(b[8])
		k2 *= c2
		k2 = bits.RotateLeft64(k2, 33)
		k2 *= c1
		h2 ^= k2
		fallthrough
	case 8:
		k1 ^= se(b[7]) << 56
		fallthrough
	case 7:
		k1 ^= se(b[6]) << 48
		fallthrough
	case 6:
		k1 ^= se(b[5]) << 40
		fallthrough
	case 5:
		k1 ^= se(b[4]) << 32
		fallthrough
	case 4:
		k1 ^= se(b[3]) << 24
		fallthrough
	case 3:
		k1 ^= se(b[2]) << 16
		fallthrough
	case 2:
		k1 ^= se(b[1]) << 8
		fallthrough
	case 1:
		k1 ^= se(b[0])
		k1 *= c1
		k1 = bits.RotateLeft64(k1, 31)
		k1 *= c2
		h1 ^= k1
	}

	h1 ^= uint64(n)
	h2 ^= uint64(n)
	h1 += h2
	h2 += h1
	h1 = fmix(h1)
	h2 = fmix(h2)
	h1 += h2

	if t := int64(h1); t != math.MinInt64 {
		return t
	}
	return math.MaxInt64
}

func fmix(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}
