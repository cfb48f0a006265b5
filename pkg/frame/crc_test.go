package frame

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"

	dscrc "github.com/datastax/go-cassandra-native-protocol/crc"
)

func TestCRC32SeedIsCassandrasInitialBytes(t *testing.T) {
	if got := crc32.ChecksumIEEE([]byte{0xFA, 0x2D, 0x55, 0xCA}); got != crc32Seed {
		t.Fatalf("crc32Seed = %#08x; want %#08x", crc32Seed, got)
	}
}

// The vectors are the reference library's, themselves taken from Cassandra
// and the Java driver.
func TestCRC24KnownValues(t *testing.T) {
	tests := []struct {
		data uint64
		n    int
		want uint32
	}{
		{0, 0, 8867936},
		{0, 1, 59277},
		{0, 3, 8251255},
		{0, 5, 11185162},
		{9223372036854775807, 1, 1294145},
		{9223372036854775807, 3, 8029951},
		{9223372036854775807, 5, 9326200},
		{131077, 3, 10131737},
		{17181442053, 5, 3672222},
		{34359607301, 5, 14445742},
	}
	for _, tt := range tests {
		if got := crc24(tt.data, tt.n); got != tt.want {
			t.Errorf("crc24(%#x, %d) = %d; want %d", tt.data, tt.n, got, tt.want)
		}
	}
}

func TestCRC24MatchesLibrary(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		v := rng.Uint64()
		for _, n := range []int{3, 5} {
			v := v & (1<<(8*n) - 1)
			if got, want := crc24(v, n), dscrc.ChecksumKoopman(v, n); got != want {
				t.Fatalf("crc24(%#x, %d) = %#06x; library says %#06x", v, n, got, want)
			}
		}
	}
}

func TestCRC32MatchesLibrary(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 7, 100, 4096, MaxSegmentPayload} {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		if got, want := crc32Payload(p), dscrc.ChecksumIEEE(p); got != want {
			t.Errorf("crc32Payload(%d bytes) = %#08x; library says %#08x", n, got, want)
		}
	}
	// A payload captured from the Java driver (the library's test vector).
	p := []byte{
		6, 16, 0, 0, 7, 0, 0, 0, 47, 0, 0, 0, 37, 83, 69, 76, 69, 67, 84, 32, 99, 108, 117, 115, 116, 101, 114,
		95, 110, 97, 109, 101, 32, 70, 82, 79, 77, 32, 115, 121, 115, 116, 101, 109, 46, 108, 111, 99, 97, 108,
		0, 1, 0, 0, 0, 0}
	if got := crc32Payload(p); got != 37932456 {
		t.Errorf("crc32Payload(driver QUERY) = %d; want 37932456", got)
	}
}
