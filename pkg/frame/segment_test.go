package frame

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	dslz4 "github.com/datastax/go-cassandra-native-protocol/compression/lz4"
	"github.com/datastax/go-cassandra-native-protocol/message"
	"github.com/datastax/go-cassandra-native-protocol/primitive"
	"github.com/datastax/go-cassandra-native-protocol/segment"
)

func libSegmentCodec(c Compression) segment.Codec {
	if c == CompressionLZ4 {
		return segment.NewCodecWithCompression(dslz4.Compressor{})
	}
	return segment.NewCodec()
}

// libEnvelopes returns v5 envelopes encoded by the reference implementation:
// many small requests of different kinds and one large RESULT-like frame.
func libEnvelopes(t *testing.T, n int) [][]byte {
	t.Helper()
	codec := libCodec(nil)
	var envs [][]byte
	for i := range n {
		var msg message.Message
		switch i % 3 {
		case 0:
			msg = &message.Query{Query: fmt.Sprintf("SELECT * FROM ks.t WHERE k = %d", i), Options: &message.QueryOptions{Consistency: 1, PageSize: 100}}
		case 1:
			msg = &message.Prepare{Query: "SELECT v FROM ks.t WHERE k = ?", Keyspace: "ks"}
		case 2:
			msg = &message.Execute{QueryId: []byte{1, 2, byte(i)}, ResultMetadataId: []byte{3}, Options: &message.QueryOptions{Consistency: 6}}
		}
		envs = append(envs, libEncode(t, codec, primitive.ProtocolVersion5, int16(i), msg, false))
	}
	return envs
}

// TestSegmentsFromLibrary has the reference implementation pack envelopes
// into segments the way Cassandra does (small envelopes together in
// self-contained segments, a large one split over non-self-contained ones)
// and reads them back over TCP, after an unframed STARTUP as in a real
// handshake.
func TestSegmentsFromLibrary(t *testing.T) {
	for _, c := range []Compression{CompressionNone, CompressionLZ4} {
		for _, compressible := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/compressible=%v", compName(c), compressible), func(t *testing.T) {
				small := libEnvelopes(t, 60)
				large := rawFrame(V5, 500, 1<<20, compressible)
				tail := libEnvelopes(t, 3)

				var payloads [][]byte
				var selfContained []bool
				payloads = append(payloads, bytes.Join(small, nil)) // many envelopes, one segment
				selfContained = append(selfContained, true)
				for i := 0; i < len(large); i += MaxSegmentPayload {
					payloads = append(payloads, large[i:min(i+MaxSegmentPayload, len(large))])
					selfContained = append(selfContained, false)
				}
				for _, e := range tail { // one envelope per segment
					payloads = append(payloads, e)
					selfContained = append(selfContained, true)
				}
				startup := AppendStartup(nil, V5, 0, map[string]string{"CQL_VERSION": "3.0.0", "COMPRESSION": c.String()})
				data := append(bytes.Clone(startup), libSegments(t, libSegmentCodec(c), payloads, selfContained)...)

				r := NewReader(connOverTCP(t, data), 2<<20)
				if got := mustRead(t, r); !bytes.Equal(got, startup) {
					t.Fatalf("STARTUP read as % x", got)
				}
				r.EnableSegments(c)
				want := append(append(small, large), tail...)
				got := readAll(t, r)
				if len(got) != len(want) {
					t.Fatalf("read %d envelopes; want %d", len(got), len(want))
				}
				for i := range want {
					if !bytes.Equal(got[i], want[i]) {
						t.Fatalf("envelope %d (%d bytes) differs from the library's (%d bytes)", i, len(got[i]), len(want[i]))
					}
				}
			})
		}
	}
}

// TestSegmentsToLibrary writes READY unframed, switches to segments and
// writes many small envelopes and a 1 MiB one; the reference implementation
// must decode it all, and the packing must be as the spec asks.
func TestSegmentsToLibrary(t *testing.T) {
	for _, c := range []Compression{CompressionNone, CompressionLZ4} {
		for _, compressible := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/compressible=%v", compName(c), compressible), func(t *testing.T) {
				var buf bytes.Buffer
				w := NewWriter(&buf)
				ready := AppendReady(nil, V5, 0)
				if err := w.WriteFrame(ready); err != nil {
					t.Fatal(err)
				}
				w.EnableSegments(c)
				small := make([][]byte, 100)
				for i := range small {
					small[i] = queryFrame(V5, int16(i), 50+i)
				}
				large := rawFrame(V5, 1000, 1<<20, compressible)
				all := append(append([][]byte{}, small...), large, small[0], small[1])
				for _, f := range all {
					if err := w.WriteFrame(f); err != nil {
						t.Fatal(err)
					}
				}
				if err := w.Flush(); err != nil {
					t.Fatal(err)
				}
				data := buf.Bytes()
				if !bytes.HasPrefix(data, ready) {
					t.Fatalf("READY was not written unframed before the segments: % x", data[:20])
				}
				payloads, selfContained := libDesegment(t, libSegmentCodec(c), data[len(ready):])

				// 100 small frames fit in the first segment; the large one
				// is alone in ceil(len/max) non-self-contained segments; the
				// last two share a self-contained one.
				nLarge := (len(large) + MaxSegmentPayload - 1) / MaxSegmentPayload
				if len(payloads) != 1+nLarge+1 {
					t.Fatalf("got %d segments; want %d", len(payloads), 2+nLarge)
				}
				if !selfContained[0] || !bytes.Equal(payloads[0], bytes.Join(small, nil)) {
					t.Errorf("first segment: self-contained %v, %d bytes; want all %d small frames", selfContained[0], len(payloads[0]), len(small))
				}
				for i := 1; i <= nLarge; i++ {
					if selfContained[i] {
						t.Errorf("segment %d of the large frame is self-contained", i)
					}
					if i < nLarge && len(payloads[i]) != MaxSegmentPayload {
						t.Errorf("segment %d of the large frame has %d bytes; want %d", i, len(payloads[i]), MaxSegmentPayload)
					}
				}
				if !bytes.Equal(bytes.Join(payloads[1:1+nLarge], nil), large) {
					t.Errorf("the large frame's segments do not concatenate to it")
				}
				if !selfContained[len(payloads)-1] {
					t.Errorf("last segment is not self-contained")
				}

				raw := libDecodeAllRaw(t, bytes.Join(payloads, nil))
				if len(raw) != len(all) {
					t.Fatalf("library decoded %d envelopes; want %d", len(raw), len(all))
				}
				for i, f := range raw {
					if f.Header.StreamId != Stream(all[i]) || !bytes.Equal(f.Body, Body(all[i])) {
						t.Errorf("envelope %d: library read stream %d and a %d-byte body; want stream %d, %d bytes",
							i, f.Header.StreamId, len(f.Body), Stream(all[i]), len(Body(all[i])))
					}
				}
				// The small frames are real QUERY messages: decode them fully.
				libDecodeAll(t, libCodec(nil), payloads[0])
				// And the package's own reader agrees.
				r := NewReader(bytes.NewReader(data), 2<<20)
				if got := mustRead(t, r); !bytes.Equal(got, ready) {
					t.Fatalf("READY read as % x", got)
				}
				r.EnableSegments(c)
				got := readAll(t, r)
				for i := range all {
					if i >= len(got) || !bytes.Equal(got[i], all[i]) {
						t.Fatalf("envelope %d differs", i)
					}
				}
			})
		}
	}
}

func TestWriterCompressesSegmentsOnlyWhenItPays(t *testing.T) {
	for _, compressible := range []bool{true, false} {
		var buf bytes.Buffer
		w := NewWriter(&buf)
		w.EnableSegments(CompressionLZ4)
		f := rawFrame(V5, 1, 10_000, compressible)
		if err := w.WriteFrame(f); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		data := buf.Bytes()
		v := uint64(data[0]) | uint64(data[1])<<8 | uint64(data[2])<<16 | uint64(data[3])<<24 | uint64(data[4])<<32
		wireLen, rawLen := int(v&segLengthMask), int(v>>17&segLengthMask)
		if compressible && (rawLen != len(f) || wireLen >= len(f)) {
			t.Errorf("compressible segment: lengths %d/%d; want compressed below %d", wireLen, rawLen, len(f))
		}
		if !compressible && (rawLen != 0 || wireLen != len(f)) {
			t.Errorf("incompressible segment: lengths %d/%d; want stored (%d/0)", wireLen, rawLen, len(f))
		}
	}
}

// corruptions of a one-segment stream, by byte offset from the start and
// from the end of the data.
func TestSegmentCorruptionIsFatal(t *testing.T) {
	for _, c := range []Compression{CompressionNone, CompressionLZ4} {
		hl := segHeaderLen
		if c == CompressionLZ4 {
			hl = segHeaderLenLZ4
		}
		m := mode{version: V5, seg: true, segComp: c}
		data := m.encode(t, queryFrame(V5, 1, 300), queryFrame(V5, 2, 300))
		tests := []struct {
			name string
			off  int
		}{
			{"header length bits", 0},
			{"last header byte", hl - 1},
			{"CRC24", hl + 1},
			{"payload", hl + 3 + 20},
			{"CRC32", len(data) - 2},
		}
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s/%s", compName(c), tt.name), func(t *testing.T) {
				bad := bytes.Clone(data)
				bad[tt.off] ^= 0x04
				r := m.reader(connOverTCP(t, bad), 0)
				_, err := r.ReadFrame()
				if !errors.Is(err, ErrBadCRC) {
					t.Fatalf("ReadFrame error = %v; want ErrBadCRC", err)
				}
				if _, err2 := r.ReadFrame(); !errors.Is(err2, ErrBadCRC) {
					t.Errorf("second ReadFrame error = %v; want the same ErrBadCRC", err2)
				}
			})
		}
	}
}

func TestSegmentBoundaryViolations(t *testing.T) {
	a := queryFrame(V5, 1, 100)
	b := queryFrame(V5, 2, 100)
	tests := []struct {
		name          string
		payloads      [][]byte
		selfContained []bool
	}{
		{"envelope continues past a self-contained segment",
			[][]byte{append(bytes.Clone(a), b[:50]...), b[50:]}, []bool{true, true}},
		{"self-contained segment continues an envelope",
			[][]byte{a[:50], a[50:]}, []bool{false, true}},
		{"envelope starts in a self-contained segment and continues in another",
			[][]byte{a[:50], a[50:]}, []bool{true, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := libSegments(t, segment.NewCodec(), tt.payloads, tt.selfContained)
			r := NewReader(bytes.NewReader(data), 0)
			r.EnableSegments(CompressionNone)
			var err error
			for range 3 {
				var b *Buf
				if b, err = r.ReadFrame(); err != nil {
					break
				}
				b.Release()
			}
			if !errors.Is(err, ErrMalformedStream) {
				t.Fatalf("error = %v; want ErrMalformedStream", err)
			}
		})
	}
}

func TestSegmentLZ4PayloadThatDoesNotDecompress(t *testing.T) {
	// A segment whose CRCs are right but whose lz4 data is garbage: the
	// sender is broken, and the stream cannot be trusted further.
	payload := bytes.Repeat([]byte{0xff}, 20)
	data := appendSegmentHeader(nil, true, len(payload), 100, true)
	data = append(data, payload...)
	data = append(data, byte(crc32Payload(payload)), byte(crc32Payload(payload)>>8), byte(crc32Payload(payload)>>16), byte(crc32Payload(payload)>>24))
	r := NewReader(bytes.NewReader(data), 0)
	r.EnableSegments(CompressionLZ4)
	if _, err := r.ReadFrame(); !errors.Is(err, ErrMalformedStream) {
		t.Fatalf("error = %v; want ErrMalformedStream", err)
	}
}

func TestSegmentsRejectSnappy(t *testing.T) {
	r := NewReader(bytes.NewReader(make([]byte, 100)), 0)
	r.EnableSegments(CompressionSnappy)
	if _, err := r.ReadFrame(); err == nil || err == io.EOF {
		t.Errorf("ReadFrame with snappy segments: error %v; want a failure", err)
	}
	w := NewWriter(io.Discard)
	w.EnableSegments(CompressionSnappy)
	if err := w.WriteFrame(AppendReady(nil, V5, 0)); err == nil {
		t.Errorf("WriteFrame with snappy segments succeeded")
	}
}

// TestSegmentFlagCompressionIsIgnored checks the v5 rule that the envelope
// compression flag means nothing inside segments.
func TestSegmentFlagCompressionIsIgnored(t *testing.T) {
	f := queryFrame(V5, 1, 50)
	f[1] |= FlagCompression
	data := libSegments(t, segment.NewCodec(), [][]byte{f}, []bool{true})
	r := NewReader(bytes.NewReader(data), 0)
	r.EnableSegments(CompressionNone)
	got := mustRead(t, r)
	f[1] &^= FlagCompression
	if !bytes.Equal(got, f) {
		t.Errorf("got % x; want % x", got[:HeaderLen], f[:HeaderLen])
	}
}
