package frame

import (
	"bytes"
	"io"
	"net"
	"testing"

	"github.com/datastax/go-cassandra-native-protocol/compression"
	dsframe "github.com/datastax/go-cassandra-native-protocol/frame"
	"github.com/datastax/go-cassandra-native-protocol/message"
	"github.com/datastax/go-cassandra-native-protocol/primitive"
	"github.com/datastax/go-cassandra-native-protocol/segment"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// socketPair returns both ends of a real loopback TCP connection, closed at
// the end of the test.
func socketPair(t testing.TB) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type accepted struct {
		c   net.Conn
		err error
	}
	ch := make(chan accepted, 1)
	go func() {
		c, err := ln.Accept()
		ch <- accepted{c, err}
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	a := <-ch
	if a.err != nil {
		client.Close()
		t.Fatal(a.err)
	}
	t.Cleanup(func() {
		client.Close()
		a.c.Close()
	})
	return client, a.c
}

// sendAndClose writes data to c from another goroutine (so that writes
// larger than the socket buffers cannot deadlock the reading test) and then
// half-closes c, so that the reader sees EOF after the data.
func sendAndClose(t testing.TB, c net.Conn, data []byte) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := c.Write(data)
		if err == nil {
			err = c.(*net.TCPConn).CloseWrite()
		}
		done <- err
	}()
	t.Cleanup(func() {
		if err := <-done; err != nil {
			t.Errorf("writing to the socket: %v", err)
		}
	})
}

// connOverTCP sends data over a loopback socket and returns the receiving
// end.
func connOverTCP(t testing.TB, data []byte) net.Conn {
	t.Helper()
	client, server := socketPair(t)
	sendAndClose(t, client, data)
	return server
}

// readerOverTCP returns a plain Reader for data sent over a loopback socket.
func readerOverTCP(t testing.TB, data []byte, maxBody int) *Reader {
	t.Helper()
	return NewReader(connOverTCP(t, data), maxBody)
}

// readAll reads frames until io.EOF, failing the test on any other error.
func readAll(t testing.TB, r *Reader) [][]byte {
	t.Helper()
	var frames [][]byte
	for {
		b, err := r.ReadFrame()
		if err == io.EOF {
			return frames
		}
		if err != nil {
			t.Fatalf("ReadFrame after %d frames: %v", len(frames), err)
		}
		frames = append(frames, bytes.Clone(b.B))
		b.Release()
	}
}

// mustRead reads one frame and returns a copy of it.
func mustRead(t testing.TB, r *Reader) []byte {
	t.Helper()
	b, err := r.ReadFrame()
	if err != nil {
		t.Fatalf("ReadFrame: %v", err)
	}
	defer b.Release()
	return bytes.Clone(b.B)
}

// queryFrame builds a QUERY frame with a body of exactly n bytes (n >= 7)
// whose query string is a recognisable pattern.
func queryFrame(version byte, stream int16, n int) []byte {
	q := make([]byte, n-7)
	for i := range q {
		q[i] = "SELECT * FROM ks.tbl WHERE k = ? "[i%33]
	}
	return AppendQuery(nil, version, stream, string(q), 1, 0)
}

// rawFrame builds a frame of the given body length with arbitrary content,
// which compresses well when compressible is true and not at all otherwise.
func rawFrame(version byte, stream int16, n int, compressible bool) []byte {
	body := make([]byte, n)
	x := uint32(stream) + 1
	for i := range body {
		if compressible {
			body[i] = byte(i % 7)
		} else {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			body[i] = byte(x)
		}
	}
	return AppendFrame(nil, version, true, 0, stream, OpResult, body)
}

// libCodec is the reference implementation's frame codec; c may be nil.
func libCodec(c compression.Compressor) dsframe.RawCodec {
	return dsframe.NewRawCodecWithCompression(c)
}

// libEncode encodes a message with the reference implementation.
func libEncode(t testing.TB, codec dsframe.Codec, version primitive.ProtocolVersion, stream int16, msg message.Message, compress bool) []byte {
	t.Helper()
	f := dsframe.NewFrame(version, stream, msg)
	f.SetCompress(compress)
	var buf bytes.Buffer
	if err := codec.EncodeFrame(f, &buf); err != nil {
		t.Fatalf("library EncodeFrame(%v): %v", msg, err)
	}
	return buf.Bytes()
}

// libDecodeAll decodes every frame in data with the reference implementation.
func libDecodeAll(t testing.TB, codec dsframe.Codec, data []byte) []*dsframe.Frame {
	t.Helper()
	var frames []*dsframe.Frame
	r := bytes.NewReader(data)
	for r.Len() > 0 {
		f, err := codec.DecodeFrame(r)
		if err != nil {
			t.Fatalf("library DecodeFrame after %d frames: %v", len(frames), err)
		}
		frames = append(frames, f)
	}
	return frames
}

// libSegments wraps envelopes in segments with the reference segment codec:
// payload chunks are given explicitly so tests control the packing.
func libSegments(t testing.TB, codec segment.Codec, payloads [][]byte, selfContained []bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	for i, p := range payloads {
		s := &segment.Segment{
			Header:  &segment.Header{IsSelfContained: selfContained[i]},
			Payload: &segment.Payload{UncompressedData: p},
		}
		if err := codec.EncodeSegment(s, &buf); err != nil {
			t.Fatalf("library EncodeSegment: %v", err)
		}
	}
	return buf.Bytes()
}

// libDesegment decodes all segments in data with the reference codec and
// returns their payloads and self-contained flags.
func libDesegment(t testing.TB, codec segment.Codec, data []byte) (payloads [][]byte, selfContained []bool) {
	t.Helper()
	r := bytes.NewReader(data)
	for r.Len() > 0 {
		s, err := codec.DecodeSegment(r)
		if err != nil {
			t.Fatalf("library DecodeSegment after %d segments: %v", len(payloads), err)
		}
		payloads = append(payloads, s.Payload.UncompressedData)
		selfContained = append(selfContained, s.Header.IsSelfContained)
	}
	return payloads, selfContained
}

// libFrame is the reference library's frame, named for brevity in tests.
type libFrame struct{ *dsframe.Frame }

func newLibFrame(v primitive.ProtocolVersion, stream int16, msg message.Message) *libFrame {
	return &libFrame{dsframe.NewFrame(v, stream, msg)}
}

// mode is one way of framing a connection: v3/v4 frames with optional body
// compression, or v5 segments with optional lz4.
type mode struct {
	name    string
	version byte
	body    Compression // v3/v4 body compression
	seg     bool
	segComp Compression
}

var modes = []mode{
	{"plain", V4, CompressionNone, false, CompressionNone},
	{"lz4", V4, CompressionLZ4, false, CompressionNone},
	{"snappy", V3, CompressionSnappy, false, CompressionNone},
	{"segments", V5, CompressionNone, true, CompressionNone},
	{"segments+lz4", V5, CompressionNone, true, CompressionLZ4},
}

func (m mode) writer(w io.Writer) *Writer {
	fw := NewWriter(w)
	if m.seg {
		fw.EnableSegments(m.segComp)
	} else {
		fw.SetCompression(m.body)
	}
	return fw
}

func (m mode) reader(r io.Reader, maxBody int) *Reader {
	fr := NewReader(r, maxBody)
	if m.seg {
		fr.EnableSegments(m.segComp)
	} else {
		fr.SetCompression(m.body)
	}
	return fr
}

// encode frames the given frames for the wire with the package's Writer.
func (m mode) encode(t testing.TB, frames ...[]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := m.writer(&buf)
	for _, f := range frames {
		if err := w.WriteFrame(f); err != nil {
			t.Fatalf("WriteFrame: %v", err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	return buf.Bytes()
}

// libDecodeAllRaw splits data into envelopes with the reference
// implementation without decoding their messages.
func libDecodeAllRaw(t testing.TB, data []byte) []*dsframe.RawFrame {
	t.Helper()
	var frames []*dsframe.RawFrame
	r := bytes.NewReader(data)
	for r.Len() > 0 {
		f, err := libCodec(nil).DecodeRawFrame(r)
		if err != nil {
			t.Fatalf("library DecodeRawFrame after %d frames: %v", len(frames), err)
		}
		frames = append(frames, f)
	}
	return frames
}

// compName names a compression in subtest names.
func compName(c Compression) string {
	if c == CompressionNone {
		return "none"
	}
	return c.String()
}
