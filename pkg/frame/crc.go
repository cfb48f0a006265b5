package frame

import "hash/crc32"

// CRC24 parameters of Cassandra's org.apache.cassandra.net.Crc (a Koopman
// polynomial), which guards v5 segment headers.
const (
	crc24Init uint32 = 0x875060
	crc24Poly uint32 = 0x1974F0B
)

// crc24 computes Cassandra's CRC24 of the n low-order bytes of v, taken
// least significant byte first, i.e. of the header bytes as they appear on the
// wire. Headers are 3 or 5 bytes, so the bitwise loop is cheap enough that a
// lookup table would not pay for itself.
func crc24(v uint64, n int) uint32 {
	crc := crc24Init
	for range n {
		crc ^= uint32(v&0xff) << 16
		v >>= 8
		for range 8 {
			crc <<= 1
			if crc&0x1000000 != 0 {
				crc ^= crc24Poly
			}
		}
	}
	return crc & 0xffffff
}

// crc32Seed is the IEEE CRC32 of the bytes FA 2D 55 CA, which Cassandra feeds
// into every segment payload checksum before the payload itself
// (crc32.ChecksumIEEE([]byte{0xFA, 0x2D, 0x55, 0xCA}); checked in a test).
const crc32Seed uint32 = 0x44777ed3

// crc32Payload computes the CRC32 trailer of a v5 segment payload (the
// compressed bytes when the payload is compressed).
func crc32Payload(p []byte) uint32 {
	return crc32.Update(crc32Seed, crc32.IEEETable, p)
}
