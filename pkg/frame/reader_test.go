package frame

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/datastax/go-cassandra-native-protocol/message"
	"github.com/datastax/go-cassandra-native-protocol/primitive"
)

// TestReaderSizeEdges sends bodies of 0, max-1, max and max+1 bytes over a
// loopback socket in every framing mode: the oversize one must be reported
// and skipped, and the frame after it must read fine.
func TestReaderSizeEdges(t *testing.T) {
	const maxBody = 300_000 // several segments and several bufio fills
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			frames := [][]byte{
				rawFrame(m.version, 1, 0, true),
				rawFrame(m.version, 2, maxBody-1, true),
				rawFrame(m.version, 3, maxBody, false),
				rawFrame(m.version, 4, maxBody+1, true),
				rawFrame(m.version, 5, 100, false),
			}
			r := m.reader(connOverTCP(t, m.encode(t, frames...)), maxBody)
			for _, want := range frames[:3] {
				if got := mustRead(t, r); !bytes.Equal(got, want) {
					t.Fatalf("stream %d: got %d bytes, want %d (equal prefix: %v)", Stream(want), len(got), len(want), bytes.HasPrefix(want, got[:min(len(got), 20)]))
				}
			}
			_, err := r.ReadFrame()
			var tooLarge *FrameTooLargeError
			if !errors.As(err, &tooLarge) {
				t.Fatalf("ReadFrame(max+1) error = %v; want *FrameTooLargeError", err)
			}
			if tooLarge.Header.Stream != 4 || tooLarge.Max != maxBody {
				t.Errorf("FrameTooLargeError = %+v", tooLarge)
			}
			// A compressed frame is checked on its uncompressed length once
			// the compressed one passes.
			if tooLarge.Header.Length != maxBody+1 {
				t.Errorf("FrameTooLargeError.Header.Length = %d; want %d", tooLarge.Header.Length, maxBody+1)
			}
			if want := "frame body of 300001 bytes exceeds the maximum of 300000"; err.Error() != want {
				t.Errorf("error text %q; want %q", err.Error(), want)
			}
			if got := mustRead(t, r); !bytes.Equal(got, frames[4]) {
				t.Fatalf("frame after the oversize one: got % x; want % x", got[:HeaderLen], frames[4][:HeaderLen])
			}
			if _, err := r.ReadFrame(); err != io.EOF {
				t.Fatalf("ReadFrame at the end = %v; want io.EOF", err)
			}
		})
	}
}

func TestReaderTruncatedFrames(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			data := m.encode(t, queryFrame(m.version, 1, 200))
			for _, cut := range []int{1, 3, 6, 8, 9, 10, 15, len(data) / 2, len(data) - 4, len(data) - 1} {
				r := m.reader(connOverTCP(t, data[:cut]), 0)
				if _, err := r.ReadFrame(); err != io.ErrUnexpectedEOF {
					t.Errorf("ReadFrame on the first %d of %d bytes: error %v; want io.ErrUnexpectedEOF", cut, len(data), err)
				}
			}
			r := m.reader(connOverTCP(t, nil), 0)
			if _, err := r.ReadFrame(); err != io.EOF {
				t.Errorf("ReadFrame on an empty stream: error %v; want io.EOF", err)
			}
		})
	}
}

// TestReaderOneByteAtATime feeds every mode through a reader that returns
// one byte per Read call.
func TestReaderOneByteAtATime(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			var frames [][]byte
			for i := range 40 {
				frames = append(frames, queryFrame(m.version, int16(i), 7+i*37))
			}
			frames = append(frames, rawFrame(m.version, 99, 200_000, true), AppendReady(nil, m.version, 100))
			r := m.reader(iotest.OneByteReader(bytes.NewReader(m.encode(t, frames...))), 0)
			got := readAll(t, r)
			if len(got) != len(frames) {
				t.Fatalf("read %d frames; want %d", len(got), len(frames))
			}
			for i := range frames {
				if !bytes.Equal(got[i], frames[i]) {
					t.Fatalf("frame %d differs", i)
				}
			}
		})
	}
}

func TestReaderUnsupportedVersions(t *testing.T) {
	v4Options := AppendOptions(nil, V4, 42)
	// Versions 1 and 2 have an 8-byte header; the library still speaks v2.
	v2Options := libEncode(t, libCodec(nil), primitive.ProtocolVersion2, 3, &message.Options{}, false)
	v2Startup := libEncode(t, libCodec(nil), primitive.ProtocolVersion2, 4, &message.Startup{Options: map[string]string{"CQL_VERSION": "3.0.0"}}, false)
	v1Options := []byte{0x01, 0, 5, OpOptions, 0, 0, 0, 0}
	tests := []struct {
		name     string
		data     []byte
		want     Header
		inSync   bool
		wantNext bool
	}{
		{"v1", v1Options, Header{Version: 1, Stream: 5, Opcode: OpOptions}, true, true},
		{"v2 OPTIONS", v2Options, Header{Version: 2, Stream: 3, Opcode: OpOptions}, true, true},
		{"v2 STARTUP", v2Startup, Header{Version: 2, Stream: 4, Opcode: OpStartup, Length: int32(len(v2Startup) - 8)}, true, true},
		{"v6", AppendFrame(nil, 6, false, 0, 7, OpQuery, []byte("0123456789")), Header{Version: 6, Stream: 7, Opcode: OpQuery, Length: 10}, true, true},
		{"v6 response", AppendFrame(nil, 6, true, FlagBeta, 7, OpResult, nil), Header{Version: 6, Response: true, Flags: FlagBeta, Stream: 7, Opcode: OpResult}, true, true},
		{"0x45", AppendFrame(nil, 0x45, false, 0, 1, OpQuery, []byte("xyz")), Header{Version: 0x45, Stream: 1, Opcode: OpQuery, Length: 3}, true, true},
		// An HTTP request: the "length" is implausible, so nothing is skipped.
		{"HTTP", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), ParseHeader([]byte("GET / HTTP/1.1")), false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := readerOverTCP(t, append(bytes.Clone(tt.data), v4Options...), 1<<20)
			_, err := r.ReadFrame()
			var uv *UnsupportedVersionError
			if !errors.As(err, &uv) {
				t.Fatalf("ReadFrame error = %v; want *UnsupportedVersionError", err)
			}
			if uv.Header != tt.want || uv.InSync != tt.inSync {
				t.Errorf("got %+v InSync %v; want %+v InSync %v", uv.Header, uv.InSync, tt.want, tt.inSync)
			}
			if !strings.HasPrefix(err.Error(), "Invalid or unsupported protocol version (") {
				t.Errorf("error text %q lacks Cassandra's wording that drivers look for", err)
			}
			if tt.wantNext {
				if got := mustRead(t, r); !bytes.Equal(got, v4Options) {
					t.Errorf("next frame = % x; want % x", got, v4Options)
				}
			}
		})
	}
}

func TestReaderAcceptsBothDirectionsAndAllVersions(t *testing.T) {
	var frames [][]byte
	for _, v := range versions {
		frames = append(frames, AppendQuery(nil, v, 1, "SELECT 1", 1, 0), AppendReady(nil, v, 1),
			AppendFrame(nil, v, false, FlagBeta|FlagTracing, 2, OpOptions, nil))
	}
	r := readerOverTCP(t, bytes.Join(frames, nil), 0)
	got := readAll(t, r)
	if len(got) != len(frames) {
		t.Fatalf("read %d frames; want %d", len(got), len(frames))
	}
	for i := range frames {
		if !bytes.Equal(got[i], frames[i]) {
			t.Errorf("frame %d = % x; want % x", i, got[i], frames[i])
		}
	}
}

func TestReaderNegativeLengthIsFatal(t *testing.T) {
	f := AppendQuery(nil, V4, 1, "SELECT 1", 1, 0)
	binary.BigEndian.PutUint32(f[5:9], 0xffffff00)
	r := readerOverTCP(t, f, 0)
	if _, err := r.ReadFrame(); !errors.Is(err, ErrMalformedStream) {
		t.Fatalf("ReadFrame error = %v; want ErrMalformedStream", err)
	}
}

// TestReaderCorruptCompressedBodies sends compressed frames whose bodies do
// not decompress, each followed by a valid one that must still be read.
func TestReaderCorruptCompressedBodies(t *testing.T) {
	next := AppendQuery(nil, V4, 9, "SELECT now() FROM system.local", 1, 0)
	garbage := bytes.Repeat([]byte{0xff}, 40)
	lz4Prefix := func(n uint32, rest []byte) []byte { return append(binary.BigEndian.AppendUint32(nil, n), rest...) }
	validLZ4 := mode{version: V4, body: CompressionLZ4}.encode(t, queryFrame(V4, 1, 500))
	tests := []struct {
		name    string
		comp    Compression
		body    []byte
		wantBad bool // else *FrameTooLargeError
	}{
		{"lz4 garbage", CompressionLZ4, lz4Prefix(100, garbage), true},
		{"lz4 too short for its prefix", CompressionLZ4, []byte{0, 0}, true},
		{"lz4 empty", CompressionLZ4, nil, true},
		{"lz4 announces more than it holds", CompressionLZ4, lz4Prefix(10_000, validLZ4[HeaderLen+4:]), true},
		{"lz4 announces less than it holds", CompressionLZ4, lz4Prefix(10, validLZ4[HeaderLen+4:]), true},
		{"lz4 announces more than the limit", CompressionLZ4, lz4Prefix(0xffffffff, garbage), false},
		{"snappy garbage", CompressionSnappy, garbage, true},
		{"snappy empty", CompressionSnappy, nil, true},
		{"snappy announces more than the limit", CompressionSnappy, []byte{0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0}, false},
		{"flag without compression", CompressionNone, lz4Prefix(3, []byte{0x30, 'a', 'b', 'c'}), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad := AppendFrame(nil, V4, false, FlagCompression, 3, OpQuery, tt.body)
			r := readerOverTCP(t, append(bad, next...), 1<<20)
			r.SetCompression(tt.comp)
			_, err := r.ReadFrame()
			var badFrame *BadFrameError
			var tooLarge *FrameTooLargeError
			switch {
			case tt.wantBad && !errors.As(err, &badFrame):
				t.Fatalf("ReadFrame error = %v; want *BadFrameError", err)
			case !tt.wantBad && !errors.As(err, &tooLarge):
				t.Fatalf("ReadFrame error = %v; want *FrameTooLargeError", err)
			case tt.wantBad && (badFrame.Header.Stream != 3 || badFrame.Header.Opcode != OpQuery):
				t.Errorf("BadFrameError.Header = %+v", badFrame.Header)
			}
			if got := mustRead(t, r); !bytes.Equal(got, next) {
				t.Fatalf("next frame = % x; want % x", got, next)
			}
		})
	}
}

func TestReaderEmptyCompressedBodies(t *testing.T) {
	// Cassandra compresses an empty body with lz4 as a zero length followed
	// by one byte; snappy encodes it as a single zero byte.
	for _, tt := range []struct {
		comp Compression
		body []byte
	}{{CompressionLZ4, []byte{0, 0, 0, 0, 0}}, {CompressionSnappy, []byte{0}}} {
		f := AppendFrame(nil, V4, true, FlagCompression, 3, OpReady, tt.body)
		r := NewReader(bytes.NewReader(f), 0)
		r.SetCompression(tt.comp)
		got := mustRead(t, r)
		if want := AppendReady(nil, V4, 3); !bytes.Equal(got, want) {
			t.Errorf("%v: got % x; want % x", tt.comp, got, want)
		}
	}
}

// TestReaderChecksLengthBeforeAllocating makes sure that lengths announced
// by headers and compressed bodies are refused before any memory is taken
// for them.
func TestReaderChecksLengthBeforeAllocating(t *testing.T) {
	const maxBody = 1 << 20
	tests := []struct {
		name string
		comp Compression
		data []byte
	}{
		{"header", CompressionNone, AppendFrame(nil, V4, false, 0, 1, OpQuery, nil)},
		{"lz4 prefix", CompressionLZ4, AppendFrame(nil, V4, false, FlagCompression, 1, OpQuery, []byte{0x7f, 0xff, 0xff, 0xff, 0})},
		{"snappy varint", CompressionSnappy, AppendFrame(nil, V4, false, FlagCompression, 1, OpQuery, []byte{0xff, 0xff, 0xff, 0xff, 0x07})},
	}
	for _, tt := range tests {
		if tt.name == "header" {
			binary.BigEndian.PutUint32(tt.data[5:9], 1<<30) // then the stream just ends
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		r := NewReader(bytes.NewReader(tt.data), maxBody)
		r.SetCompression(tt.comp)
		_, err := r.ReadFrame()
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Errorf("%s: ReadFrame succeeded", tt.name)
		}
		// The bufio buffer (64 KiB) is the only sizeable allocation.
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 256<<10 {
			t.Errorf("%s: ReadFrame allocated %d bytes (error %v)", tt.name, alloc, err)
		}
	}
}

func TestReaderDoesNotAllocateInSteadyState(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under -race")
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			data := m.encode(t, repeatFrame(queryFrame(m.version, 1, 100), 1000)...)
			src := &loopReader{data: data}
			r := m.reader(src, 0)
			read := func() {
				b, err := r.ReadFrame()
				if err != nil {
					t.Fatal(err)
				}
				b.Release()
			}
			for range 2000 {
				read()
			}
			if allocs := testing.AllocsPerRun(5000, read); allocs != 0 {
				t.Errorf("ReadFrame: %v allocs/op; want 0", allocs)
			}
		})
	}
}

func repeatFrame(f []byte, n int) [][]byte {
	frames := make([][]byte, n)
	for i := range frames {
		frames[i] = f
	}
	return frames
}

// loopReader serves data over and over, like a connection carrying an
// endless stream of the same frames.
type loopReader struct {
	data []byte
	off  int
}

func (l *loopReader) Read(p []byte) (int, error) {
	n := copy(p, l.data[l.off:])
	l.off = (l.off + n) % len(l.data)
	return n, nil
}
