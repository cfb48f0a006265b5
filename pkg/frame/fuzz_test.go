package frame

import (
	"bytes"
	"errors"
	"io"
	"maps"
	"reflect"
	"runtime"
	"slices"
	"testing"
)

// fuzzModes are the reader configurations FuzzReader picks from with the
// first input byte. The "handshake" ones read one unframed frame and then
// switch to segments, as a connection does after STARTUP.
var fuzzModes = []struct {
	mode
	handshake bool
}{
	{modes[0], false},
	{modes[1], false},
	{modes[2], false},
	{modes[3], false},
	{modes[4], false},
	{modes[3], true},
	{modes[4], true},
}

// FuzzReader feeds arbitrary bytes to a Reader in every mode. It must never
// panic, return only the documented errors, return only well-formed frames
// within the limit, and never allocate for lengths it has not checked.
func FuzzReader(f *testing.F) {
	for i, fm := range fuzzModes {
		frames := [][]byte{
			AppendQuery(nil, fm.version, 1, "SELECT * FROM system.local", 1, 100),
			AppendReady(nil, fm.version, 2),
			rawFrame(fm.version, 3, 3000, true),
			AppendError(nil, fm.version, 4, ErrCodeServer, "boom"),
		}
		var data []byte
		if fm.handshake {
			data = AppendStartup(nil, fm.version, 0, map[string]string{"CQL_VERSION": "3.0.0"})
		}
		data = append(data, fm.encode(f, frames...)...)
		f.Add(append([]byte{byte(i), 4}, data...))
		f.Add(append([]byte{byte(i), 0}, data...)) // tiny limit
	}
	f.Add([]byte{0, 3, 0x02, 0, 1, OpOptions, 0, 0, 0, 0, 0x04, 0, 0, 1, OpOptions, 0, 0, 0, 0})
	f.Add([]byte{1, 3, 0x04, FlagCompression, 0, 1, OpQuery, 0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff, 0})
	f.Add([]byte{2, 3, 0x04, FlagCompression, 0, 1, OpQuery, 0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) < 2 {
			return
		}
		fm := fuzzModes[int(in[0])%len(fuzzModes)]
		maxBody := 256 << (in[1] % 12) // 256 B to 512 KiB
		data := in[2:]

		r := NewReader(bytes.NewReader(data), maxBody)
		if !fm.handshake {
			if fm.seg {
				r.EnableSegments(fm.segComp)
			} else {
				r.SetCompression(fm.body)
			}
		}
		maxWire := max(maxBody, compressedBound(fm.body, maxBody))

		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		calls := 0
		for ; calls < 10000; calls++ {
			b, err := r.ReadFrame()
			if err == nil {
				checkFrame(t, b.B, maxBody)
				b.Release()
				if fm.handshake && calls == 0 {
					r.EnableSegments(fm.segComp)
				}
				continue
			}
			if !continuable(t, err) {
				break
			}
		}
		runtime.ReadMemStats(&after)
		// Per call: at most the compressed body and the frame, each rounded
		// up to a size class; plus the fixed per-reader buffers.
		limit := uint64(calls+1)*uint64(4*(maxWire+HeaderLen)) + 4<<20
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > limit {
			t.Fatalf("reading %d bytes allocated %d bytes over %d calls (limit %d)", len(data), alloc, calls+1, limit)
		}
	})
}

// checkFrame asserts the invariants of every frame ReadFrame returns.
func checkFrame(t *testing.T, f []byte, maxBody int) {
	t.Helper()
	if len(f) < HeaderLen {
		t.Fatalf("frame of %d bytes", len(f))
	}
	h := ParseHeader(f)
	if int(h.Length) != len(f)-HeaderLen || len(f)-HeaderLen > maxBody {
		t.Fatalf("frame with length field %d and %d body bytes (max %d)", h.Length, len(f)-HeaderLen, maxBody)
	}
	if h.Version < MinVersion || h.Version > MaxVersion {
		t.Fatalf("frame with version %d", h.Version)
	}
	if h.Flags&FlagCompression != 0 {
		t.Fatalf("frame still flagged compressed")
	}
}

// continuable classifies a ReadFrame error: it fails the test for errors
// outside the documented set, and reports whether reading may go on.
func continuable(t *testing.T, err error) bool {
	t.Helper()
	var tooLarge *FrameTooLargeError
	var bad *BadFrameError
	var uv *UnsupportedVersionError
	switch {
	case errors.As(err, &tooLarge), errors.As(err, &bad):
		return true
	case errors.As(err, &uv):
		return uv.InSync
	case err == io.EOF, err == io.ErrUnexpectedEOF, errors.Is(err, ErrBadCRC), errors.Is(err, ErrMalformedStream):
		return false
	}
	t.Fatalf("undocumented error %T: %v", err, err)
	return false
}

// FuzzSegments writes frames derived from the input through a segmenting
// Writer, checks that a Reader gets them back unchanged, then flips one byte
// of the wire data and checks that the CRCs catch it.
func FuzzSegments(f *testing.F) {
	f.Add([]byte("\x00\x10hello world"), false, uint32(0), byte(1))
	f.Add(bytes.Repeat([]byte{0xff, 0x00, 0x07}, 1000), true, uint32(50), byte(0x80))
	f.Add(bytes.Repeat([]byte("abcdefgh"), 40000), true, uint32(131080), byte(1))
	f.Add(bytes.Repeat([]byte{1, 2}, 100), false, uint32(7), byte(0))
	f.Fuzz(func(t *testing.T, in []byte, useLZ4 bool, flipAt uint32, flip byte) {
		c := CompressionNone
		if useLZ4 {
			c = CompressionLZ4
		}
		// Split the input into frames: two bytes of each chunk give the body
		// length, repeated so that small inputs can make large frames.
		var frames [][]byte
		for len(in) >= 2 {
			n := int(in[0])<<8 | int(in[1])
			in = in[2:]
			body := make([]byte, n*((n>>14)+1)) // up to ~250 KiB
			for i := range body {
				if len(in) > 0 {
					body[i] = in[i%len(in)]
				}
			}
			in = in[min(len(in), n):]
			frames = append(frames, AppendFrame(nil, V5, len(frames)%2 == 1, 0, int16(len(frames)), OpResult, body))
		}
		var buf bytes.Buffer
		w := NewWriter(&buf)
		w.EnableSegments(c)
		for i, fr := range frames {
			if err := w.WriteFrame(fr); err != nil {
				t.Fatal(err)
			}
			if i%7 == 6 {
				if err := w.Flush(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		wire := buf.Bytes()

		r := NewReader(bytes.NewReader(wire), 1<<20)
		r.EnableSegments(c)
		for i, want := range frames {
			b, err := r.ReadFrame()
			if err != nil {
				t.Fatalf("frame %d: %v", i, err)
			}
			if !bytes.Equal(b.B, want) {
				t.Fatalf("frame %d read back differently", i)
			}
			b.Release()
		}
		if _, err := r.ReadFrame(); err != io.EOF {
			t.Fatalf("after the last frame: %v; want io.EOF", err)
		}

		if len(wire) == 0 || flip == 0 {
			return
		}
		// A single corrupted byte is a burst of at most 8 bits, which both
		// CRC24 and CRC32 always detect.
		bad := bytes.Clone(wire)
		bad[int(flipAt)%len(bad)] ^= flip
		r = NewReader(bytes.NewReader(bad), 1<<20)
		r.EnableSegments(c)
		for range len(frames) + 1 {
			b, err := r.ReadFrame()
			if err != nil {
				if !errors.Is(err, ErrBadCRC) {
					t.Fatalf("corrupted byte %d: error %v; want ErrBadCRC", int(flipAt)%len(bad), err)
				}
				return
			}
			b.Release()
		}
		t.Fatalf("corrupted byte %d went unnoticed", int(flipAt)%len(bad))
	})
}

// FuzzDecoders runs every decoder on arbitrary bodies: none may panic, and
// what decodes must survive re-encoding.
func FuzzDecoders(f *testing.F) {
	for _, v := range versions {
		for _, fr := range [][]byte{
			AppendStartup(nil, v, 0, map[string]string{"CQL_VERSION": "3.0.0", "COMPRESSION": "lz4"}),
			AppendRegister(nil, v, 0, []string{"SCHEMA_CHANGE"}),
			AppendSupported(nil, v, 0, map[string][]string{"COMPRESSION": {"lz4", "snappy"}}),
			AppendQuery(nil, v, 0, "SELECT 1", 1, 100),
			AppendPrepare(nil, v, 0, "SELECT 1", "ks"),
			AppendError(nil, v, 0, ErrCodeInvalid, "bad"),
			AppendUnprepared(nil, v, 0, "gone", []byte{1, 2, 3}),
			AppendFrame(nil, v, true, 0, 0, OpResult, []byte{0, 0, 0, 4, 0, 2, 9, 9, 0, 0, 0, 0}),
			AppendFrame(nil, v, true, 0, 0, OpResult, []byte{0, 0, 0, 3, 0, 2, 'k', 's'}),
		} {
			f.Add(v, byte(0), Body(fr))
			f.Add(v, FlagTracing|FlagWarning|FlagCustomPayload, Body(fr))
		}
	}
	f.Fuzz(func(t *testing.T, version, flags byte, body []byte) {
		if m, err := ReadStringMap(body); err == nil {
			back, err := ReadStringMap(Body(AppendStartup(nil, version, 0, m)))
			if err != nil || !maps.Equal(back, m) {
				t.Fatalf("string map %v re-decoded as %v, %v", m, back, err)
			}
		}
		if l, err := ReadStringList(body); err == nil {
			back, err := ReadStringList(Body(AppendRegister(nil, version, 0, l)))
			if err != nil || !slices.Equal(back, l) {
				t.Fatalf("string list %q re-decoded as %q, %v", l, back, err)
			}
		}
		if m, err := ReadStringMultimap(body); err == nil {
			back, err := ReadStringMultimap(Body(AppendSupported(nil, version, 0, m)))
			if err != nil || !equalMultimaps(back, m) {
				t.Fatalf("string multimap %v re-decoded as %v, %v", m, back, err)
			}
		}
		if q, err := QueryString(body); err == nil && len(q) > len(body)-4 {
			t.Fatalf("query of %d bytes from a %d-byte body", len(q), len(body))
		}
		if ks, err := PrepareKeyspace(version, body); err == nil && ks != "" {
			q, _ := QueryString(body)
			back, err := PrepareKeyspace(V5, Body(AppendPrepare(nil, V5, 0, string(q), ks)))
			if err != nil || back != ks {
				t.Fatalf("keyspace %q re-decoded as %q, %v", ks, back, err)
			}
		}
		if code, msg, err := ErrorCode(body); err == nil {
			c2, m2, err := ErrorCode(Body(AppendError(nil, version, 0, code, msg)))
			if err != nil || c2 != code || m2 != msg {
				t.Fatalf("error %#x %q re-decoded as %#x %q, %v", code, msg, c2, m2, err)
			}
		}
		if id, err := UnpreparedID(body); err == nil {
			_, msg, _ := ErrorCode(body)
			back, err := UnpreparedID(Body(AppendUnprepared(nil, version, 0, msg, id)))
			if err != nil || !bytes.Equal(back, id) {
				t.Fatalf("unprepared id %x re-decoded as %x, %v", id, back, err)
			}
		}
		for _, decode := range []func([]byte) error{
			func(b []byte) error { _, err := ExecuteID(b); return err },
			func(b []byte) error { _, err := ResultKind(b); return err },
			func(b []byte) error { _, err := PreparedID(b); return err },
			func(b []byte) error { _, err := SetKeyspaceName(b); return err },
			func(b []byte) error { _, err := EventType(b); return err },
		} {
			if err := decode(body); err != nil && !errors.Is(err, ErrShortBody) && !errors.Is(err, ErrWrongKind) {
				t.Fatalf("undocumented decoder error: %v", err)
			}
		}
		fr := AppendFrame(nil, version, true, flags, 0, OpResult, body)
		if mb, err := MessageBody(fr); err == nil && !bytes.HasSuffix(body, mb) {
			t.Fatalf("MessageBody returned bytes that do not end the body")
		}
	})
}

func equalMultimaps(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || len(v) != len(w) || (len(v) > 0 && !reflect.DeepEqual(v, w)) {
			return false
		}
	}
	return true
}
