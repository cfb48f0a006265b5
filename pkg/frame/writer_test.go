package frame

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/datastax/go-cassandra-native-protocol/compression"
	dslz4 "github.com/datastax/go-cassandra-native-protocol/compression/lz4"
	dssnappy "github.com/datastax/go-cassandra-native-protocol/compression/snappy"
	"github.com/datastax/go-cassandra-native-protocol/message"
	"github.com/datastax/go-cassandra-native-protocol/primitive"
)

func libCompressor(c Compression) compression.Compressor {
	switch c {
	case CompressionLZ4:
		return dslz4.Compressor{}
	case CompressionSnappy:
		return dssnappy.Compressor{}
	}
	return nil
}

// TestBodyCompressionToLibrary writes a handshake and traffic with body
// compression on and has the reference implementation decode it.
func TestBodyCompressionToLibrary(t *testing.T) {
	for _, c := range []Compression{CompressionLZ4, CompressionSnappy} {
		for _, v := range []byte{V3, V4} {
			t.Run(fmt.Sprintf("%s/v%d", compName(c), v), func(t *testing.T) {
				frames := [][]byte{
					AppendOptions(nil, v, 0),
					AppendStartup(nil, v, 1, map[string]string{"CQL_VERSION": "3.0.0", "COMPRESSION": c.String()}),
					AppendReady(nil, v, 1),
					AppendQuery(nil, v, 2, "SELECT * FROM system.peers", 1, 5000),
					AppendPrepare(nil, v, 3, "SELECT * FROM ks.t WHERE k = ?", ""),
					AppendError(nil, v, 4, ErrCodeSyntax, "line 1:0 no viable alternative"),
					AppendSupported(nil, v, 5, map[string][]string{"COMPRESSION": {"lz4", "snappy"}}),
				}
				var buf bytes.Buffer
				w := NewWriter(&buf)
				w.SetCompression(c)
				for _, f := range frames {
					if err := w.WriteFrame(f); err != nil {
						t.Fatal(err)
					}
				}
				if err := w.Flush(); err != nil {
					t.Fatal(err)
				}
				data := buf.Bytes()

				decoded := libDecodeAll(t, libCodec(libCompressor(c)), data)
				if len(decoded) != len(frames) {
					t.Fatalf("library decoded %d frames; want %d", len(decoded), len(frames))
				}
				for i, f := range decoded {
					compressed := f.Header.Flags.Contains(primitive.HeaderFlagCompressed)
					wantCompressed := len(frames[i]) > HeaderLen && !isHandshakeRequest(frames[i])
					if compressed != wantCompressed {
						t.Errorf("%s frame: compressed %v; want %v", OpcodeName(Opcode(frames[i])), compressed, wantCompressed)
					}
				}
				if q := decoded[3].Body.Message.(*message.Query); q.Query != "SELECT * FROM system.peers" || q.Options.PageSize != 5000 {
					t.Errorf("QUERY decoded as %+v", q)
				}
				if e := decoded[5].Body.Message.(*message.SyntaxError); e.ErrorMessage != "line 1:0 no viable alternative" {
					t.Errorf("ERROR decoded as %+v", e)
				}

				r := NewReader(bytes.NewReader(data), 0)
				r.SetCompression(c)
				got := readAll(t, r)
				for i := range frames {
					if !bytes.Equal(got[i], frames[i]) {
						t.Errorf("frame %d read back as % x; want % x", i, got[i], frames[i])
					}
				}
			})
		}
	}
}

// TestFramesFromLibrary reads frames the reference implementation encoded,
// uncompressed in v3, v4 and v5 and compressed in v3 and v4, including a
// large one, and compares them with its uncompressed encoding of the same
// messages.
func TestFramesFromLibrary(t *testing.T) {
	big := make([]byte, 300_000)
	for i := range big {
		big[i] = byte(i * 7 / 5)
	}
	msgs := []message.Message{
		&message.Query{Query: "SELECT * FROM ks.t", Options: &message.QueryOptions{Consistency: 4, PageSize: 10}},
		&message.Execute{QueryId: []byte{1, 2, 3}, ResultMetadataId: []byte{4}, Options: &message.QueryOptions{Consistency: 1,
			PositionalValues: []*primitive.Value{primitive.NewValue(big)}}},
		&message.ServerError{ErrorMessage: "boom"},
		&message.Ready{},
		&message.AuthResponse{Token: []byte("\x00cassandra\x00cassandra")},
	}
	tests := []struct {
		c Compression
		v primitive.ProtocolVersion
	}{
		{CompressionNone, primitive.ProtocolVersion3},
		{CompressionNone, primitive.ProtocolVersion4},
		{CompressionNone, primitive.ProtocolVersion5},
		{CompressionLZ4, primitive.ProtocolVersion3},
		{CompressionLZ4, primitive.ProtocolVersion4},
		{CompressionSnappy, primitive.ProtocolVersion3},
		{CompressionSnappy, primitive.ProtocolVersion4},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/v%d", compName(tt.c), tt.v), func(t *testing.T) {
			var wire, want []byte
			for i, m := range msgs {
				wire = append(wire, libEncode(t, libCodec(libCompressor(tt.c)), tt.v, int16(i), m, tt.c != CompressionNone)...)
				want = append(want, libEncode(t, libCodec(nil), tt.v, int16(i), m, false)...)
			}
			r := NewReader(connOverTCP(t, wire), 0)
			r.SetCompression(tt.c)
			got := bytes.Join(readAll(t, r), nil)
			if !bytes.Equal(got, want) {
				t.Errorf("frames read differ from the library's uncompressed encoding")
			}
		})
	}
}

type countingWriter struct {
	writes int
	buf    bytes.Buffer
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.writes++
	return c.buf.Write(p)
}

func TestFlushIsOneWrite(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			var cw countingWriter
			w := m.writer(&cw)
			for i := range 500 {
				if err := w.WriteFrame(queryFrame(m.version, int16(i), 100+i)); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.WriteFrame(rawFrame(m.version, 1, 500_000, false)); err != nil {
				t.Fatal(err)
			}
			if w.Buffered() == 0 {
				t.Errorf("Buffered() = 0 with frames pending")
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			if cw.writes != 1 {
				t.Errorf("Flush made %d writes; want 1", cw.writes)
			}
			if w.Buffered() != 0 {
				t.Errorf("Buffered() = %d after Flush", w.Buffered())
			}
			if err := w.Flush(); err != nil || cw.writes != 1 {
				t.Errorf("empty Flush: %v, %d writes", err, cw.writes)
			}
		})
	}
}

func TestWriterRejectsMalformedFrames(t *testing.T) {
	w := NewWriter(io.Discard)
	if err := w.WriteFrame([]byte{4, 0, 0}); err == nil {
		t.Errorf("WriteFrame(3 bytes) succeeded")
	}
	f := AppendQuery(nil, V4, 1, "SELECT 1", 1, 0)
	if err := w.WriteFrame(f[:len(f)-1]); err == nil {
		t.Errorf("WriteFrame with a length field that does not match succeeded")
	}
	if w.Buffered() != 0 {
		t.Errorf("rejected frames were buffered: %d bytes", w.Buffered())
	}
}

func TestWriterClearsStrayCompressionFlag(t *testing.T) {
	// A frame in memory is uncompressed by definition; a stray flag must not
	// reach a peer that would try to decompress it.
	for _, m := range []mode{modes[0], modes[3]} {
		f := queryFrame(m.version, 1, 40)
		f[1] |= FlagCompression
		r := m.reader(bytes.NewReader(m.encode(t, f)), 0)
		if got := mustRead(t, r); got[1]&FlagCompression != 0 {
			t.Errorf("%s: flag still set", m.name)
		}
	}
}

var errBrokenPipe = errors.New("broken pipe")

type failingWriter struct{ n int }

func (f *failingWriter) Write(p []byte) (int, error) {
	f.n++
	return len(p) / 2, errBrokenPipe
}

func TestWriterErrorsAreSticky(t *testing.T) {
	fw := &failingWriter{}
	w := NewWriter(fw)
	f := AppendReady(nil, V4, 0)
	if err := w.WriteFrame(f); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); !errors.Is(err, errBrokenPipe) {
		t.Fatalf("Flush error = %v; want %v", err, errBrokenPipe)
	}
	if err := w.WriteFrame(f); !errors.Is(err, errBrokenPipe) {
		t.Errorf("WriteFrame after a failed Flush: %v", err)
	}
	if err := w.Flush(); !errors.Is(err, errBrokenPipe) || fw.n != 1 {
		t.Errorf("second Flush: %v after %d writes", err, fw.n)
	}
}

func TestWriterDoesNotAllocateInSteadyState(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			f := queryFrame(m.version, 1, 100)
			w := m.writer(io.Discard)
			write := func() {
				for range 10 {
					if err := w.WriteFrame(f); err != nil {
						t.Fatal(err)
					}
				}
				if err := w.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			write()
			if allocs := testing.AllocsPerRun(1000, write); allocs != 0 {
				t.Errorf("10×WriteFrame+Flush: %v allocs/op; want 0", allocs)
			}
		})
	}
}
