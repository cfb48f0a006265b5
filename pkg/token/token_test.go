package token

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math"
	"testing"
)

// cassandraTokens were computed by Cassandra 5.0.4 (SELECT token(k) on a
// blob partition key). They cover every tail length class, several blocks,
// and tail bytes >= 0x80, where Cassandra's sign extension matters.
var cassandraTokens = []struct {
	keyHex string
	token  int64
}{
	{"61", -8839064797231613815},
	{"68656c6c6f", -3758069500696749310},
	{"ff", -4442228696663692417},
	{"80", -5284281814142962636},
	{"7f", 5072634478945617755},
	{"00", 5048724184180415669},
	{"0102030405060708090a0b0c0d0e", -8466455262646939021},
	{"0102030405060708090a0b0c0d0e0f", 597835946752277653},
	{"000102030405060708090a0b0c0d0e0f", 4920504430128807728},
	{"f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff00", 2962097511150331042},
	{"ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff", -3550403632215323560},
	{"8081828384858687888990", 8400770652865777406},
}

func TestMurmur3MatchesCassandra(t *testing.T) {
	for _, c := range cassandraTokens {
		key, err := hex.DecodeString(c.keyHex)
		if err != nil {
			t.Fatal(err)
		}
		if got := Murmur3(key); got != c.token {
			t.Errorf("Murmur3(%s) = %d; want %d", c.keyHex, got, c.token)
		}
	}
}

func TestMurmur3EmptyKeyIsRingMinimum(t *testing.T) {
	if got := Murmur3(nil); got != math.MinInt64 {
		t.Errorf("Murmur3(empty) = %d; want %d", got, int64(math.MinInt64))
	}
}

func TestAppendRoutingKey(t *testing.T) {
	single := AppendRoutingKey([]byte("x"), [][]byte{{1, 2, 3}})
	if want := []byte{'x', 1, 2, 3}; !bytes.Equal(single, want) {
		t.Errorf("single component = %x; want %x", single, want)
	}
	comp := AppendRoutingKey(nil, [][]byte{{0, 0, 0, 7}, []byte("ab"), {}})
	want := []byte{0, 4, 0, 0, 0, 7, 0, 0, 2, 'a', 'b', 0, 0, 0, 0}
	if !bytes.Equal(comp, want) {
		t.Errorf("composite = %x; want %x", comp, want)
	}
	if got, want := PartitionToken([][]byte{{0, 0, 0, 7}, []byte("ab"), {}}), Murmur3(want); got != want {
		t.Errorf("PartitionToken(composite) = %d; want %d", got, want)
	}
	long := bytes.Repeat([]byte{0x9c}, 300) // past PartitionToken's stack buffer
	if got, want := PartitionToken([][]byte{long, long}), Murmur3(AppendRoutingKey(nil, [][]byte{long, long})); got != want {
		t.Errorf("PartitionToken(long composite) = %d; want %d", got, want)
	}
}

func TestPartitionTokenDoesNotAllocate(t *testing.T) {
	parts := [][]byte{{0, 0, 0, 42}, []byte("some text component")}
	if n := testing.AllocsPerRun(100, func() { PartitionToken(parts) }); n != 0 {
		t.Errorf("PartitionToken allocates %.0f times per call; want 0", n)
	}
}

func BenchmarkMurmur3(b *testing.B) {
	for _, n := range []int{4, 16, 36} {
		key := bytes.Repeat([]byte{0xa5}, n)
		b.Run(fmt.Sprintf("%dB", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(n))
			for b.Loop() {
				Murmur3(key)
			}
		})
	}
}

func BenchmarkPartitionTokenComposite(b *testing.B) {
	parts := [][]byte{{0, 0, 0, 42}, []byte("a text component")}
	b.ReportAllocs()
	for b.Loop() {
		PartitionToken(parts)
	}
}
