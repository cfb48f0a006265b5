package systables

import (
	"crypto/sha256"
	"math/bits"
	"net"
	"strconv"
)

// Node is how one proxy endpoint presents itself to drivers in system.local
// and system.peers(_v2).
type Node struct {
	// HostID is the node's host_id (see HostID).
	HostID [16]byte
	// Address is written to every address column: rpc_address,
	// broadcast_address, listen_address (local), peer, rpc_address,
	// native_address, preferred_ip (peers). An IPv4 address is written as 4
	// bytes, anything else as 16; it must not be nil when such a column is
	// selected.
	Address net.IP
	// Port is the native protocol port, written to every port column:
	// rpc_port, broadcast_port, listen_port, native_port (local), peer_port,
	// native_port, preferred_port (peers_v2). It must be in 0..65535.
	Port int
	// DataCenter and Rack are written to data_center and rack. In system.local
	// an empty value keeps Cassandra's; in the peers tables it is written as
	// null, so callers should fill them (e.g. from ParseLocal).
	DataCenter, Rack string
	// Tokens are the Murmur3 tokens the node owns, as decimal strings (see
	// RingTokens).
	Tokens []string
}

// HostID derives a stable UUID from a seed string such as
// "clustername/127.0.0.1:9042": the first 16 bytes of the seed's SHA-256,
// with the version (4) and variant (RFC 4122) bits set so that drivers that
// validate UUIDs accept it. The same seed always yields the same id.
func HostID(seed string) [16]byte {
	sum := sha256.Sum256([]byte(seed))
	var id [16]byte
	copy(id[:], sum[:16])
	id[6] = id[6]&0x0f | 0x40
	id[8] = id[8]&0x3f | 0x80
	return id
}

// RingTokens splits the Murmur3 ring (-2^63 .. 2^63-1) evenly among n
// endpoints and returns one token per endpoint as decimal strings: endpoint i
// gets -2^63 + floor(i * 2^64 / n), so the first token is
// -9223372036854775808 and each endpoint owns the range up to the next
// endpoint's token (the last one wraps around). It returns nil for n <= 0.
func RingTokens(n int) []string {
	if n <= 0 {
		return nil
	}
	tokens := make([]string, n)
	for i := range tokens {
		// floor(i * 2^64 / n): the 128-bit dividend i<<64 has high word i < n.
		q, _ := bits.Div64(uint64(i), 0, uint64(n))
		tokens[i] = strconv.FormatInt(int64(q+1<<63), 10)
	}
	return tokens
}
