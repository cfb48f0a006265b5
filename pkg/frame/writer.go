package frame

import (
	"encoding/binary"
	"fmt"
	"io"
)

// segOverhead is the most bytes a segment adds to its payload.
const segOverhead = segHeaderLenLZ4 + segCRC24Len + segCRC32Len

// Writer buffers frames for one connection and writes them on Flush. It is
// not safe for concurrent use.
//
// Everything buffered is kept in wire format in one contiguous pooled buffer,
// so Flush is a single Write. In segment mode frames are appended straight into
// an open segment whose header is filled in when the segment is sealed (when
// the next frame would not fit, or on Flush).
type Writer struct {
	w   io.Writer
	b   *Buf   // pooled backing array of buf, or nil
	buf []byte // wire bytes waiting for Flush; reserve ensures appends fit
	err error  // sticky: the first error writing to w

	comp Compression // v3/v4 body compression

	seg    bool
	segLZ4 bool
	segErr error // set when EnableSegments got an unsupported compression
	open   int   // offset in buf of the open segment's header, or -1
}

// NewWriter returns a Writer in plain mode without compression.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: w, open: -1}
}

// SetCompression compresses the bodies of subsequently written frames (v3/v4)
// and sets FlagCompression on them. Frames with opcode STARTUP or OPTIONS
// (requests) and any frame before SetCompression are never compressed.
// Frames with an empty body are left uncompressed too (the flag is per
// frame, so receivers accept that). Body compression does not apply in
// segment mode, where compression is per segment.
func (w *Writer) SetCompression(c Compression) { w.comp = c }

// EnableSegments wraps everything written from now on in v5 segments (c is
// CompressionNone or CompressionLZ4). Frames buffered but not yet flushed
// before the call are still written unframed. With any other c, later
// WriteFrame calls fail.
func (w *Writer) EnableSegments(c Compression) {
	w.sealSegment(true)
	w.seg = true
	w.segErr = nil
	switch c {
	case CompressionNone:
		w.segLZ4 = false
	case CompressionLZ4:
		w.segLZ4 = true
	case CompressionSnappy:
		w.segErr = errSnappySegments
	default:
		w.segErr = fmt.Errorf("frame: unknown %v for v5 segments", c)
	}
}

// WriteFrame appends the whole frame f (header+uncompressed body) to the
// buffer. f is not retained after the call returns. It fails without
// buffering anything when f is not a whole frame (its length field must
// match its body) or after a write error.
func (w *Writer) WriteFrame(f []byte) error {
	if w.err != nil {
		return w.err
	}
	if len(f) < HeaderLen {
		return fmt.Errorf("frame: WriteFrame given %d bytes, less than a frame header", len(f))
	}
	if n := int64(binary.BigEndian.Uint32(f[5:9])); n != int64(len(f)-HeaderLen) {
		return fmt.Errorf("frame: WriteFrame given a %s frame whose header announces %d body bytes but carries %d",
			OpcodeName(Opcode(f)), n, len(f)-HeaderLen)
	}
	if w.seg {
		if w.segErr != nil {
			return w.segErr
		}
		w.reserve(len(f) + segOverhead*(len(f)/MaxSegmentPayload+2))
		w.writeSegmented(f)
		return nil
	}
	if w.comp != CompressionNone && len(f) > HeaderLen && !isHandshakeRequest(f) {
		w.reserve(HeaderLen + compressedBound(w.comp, len(f)-HeaderLen))
		return w.writeCompressed(f)
	}
	w.reserve(len(f))
	start := len(w.buf)
	w.buf = append(w.buf, f...)
	w.buf[start+1] &^= FlagCompression
	return nil
}

// reserve makes room for n more bytes in buf, moving it to a larger pooled
// buffer if needed, so that the appends that follow never reallocate.
func (w *Writer) reserve(n int) {
	if cap(w.buf)-len(w.buf) >= n {
		return
	}
	nb := GetBuf(max(len(w.buf)+n, 2*cap(w.buf)))
	buf := append(nb.B[:0], w.buf...)
	w.b.Release()
	w.b, w.buf = nb, buf
}

// isHandshakeRequest reports whether f is a STARTUP or OPTIONS request, which
// the peer must be able to read before compression is agreed on.
func isHandshakeRequest(f []byte) bool {
	op := Opcode(f)
	return f[0]&ResponseBit == 0 && (op == OpStartup || op == OpOptions)
}

// writeCompressed appends f with its body compressed and the header's flag
// and length fixed.
func (w *Writer) writeCompressed(f []byte) error {
	start := len(w.buf)
	w.buf = append(w.buf, f[:HeaderLen]...)
	var err error
	w.buf, err = appendCompressedBody(w.buf, w.comp, f[HeaderLen:])
	if err != nil {
		w.buf = w.buf[:start]
		return err
	}
	hdr := w.buf[start : start+HeaderLen]
	hdr[1] |= FlagCompression
	binary.BigEndian.PutUint32(hdr[5:9], uint32(len(w.buf)-start-HeaderLen))
	return nil
}

func (w *Writer) segHeaderLen() int {
	if w.segLZ4 {
		return segHeaderLenLZ4 + segCRC24Len
	}
	return segHeaderLen + segCRC24Len
}

// writeSegmented packs f into the open self-contained segment, sealing it
// first when f would not fit. A frame larger than a segment is sent alone,
// split across non-self-contained segments as the spec requires.
func (w *Writer) writeSegmented(f []byte) {
	if w.open >= 0 && len(w.buf)-w.open-w.segHeaderLen()+len(f) > MaxSegmentPayload {
		w.sealSegment(true)
	}
	if len(f) > MaxSegmentPayload {
		for i := 0; i < len(f); i += MaxSegmentPayload {
			w.openSegment()
			start := len(w.buf)
			w.buf = append(w.buf, f[i:min(i+MaxSegmentPayload, len(f))]...)
			if i == 0 {
				w.buf[start+1] &^= FlagCompression
			}
			w.sealSegment(false)
		}
		return
	}
	if w.open < 0 {
		w.openSegment()
	}
	start := len(w.buf)
	w.buf = append(w.buf, f...)
	w.buf[start+1] &^= FlagCompression
}

// openSegment reserves room for a segment header, filled in by sealSegment.
func (w *Writer) openSegment() {
	w.open = len(w.buf)
	w.buf = append(w.buf, make([]byte, w.segHeaderLen())...)
}

// sealSegment completes the open segment, if any: compresses its payload in
// place when lz4 shrinks it, writes the header and appends the CRC32.
func (w *Writer) sealSegment(selfContained bool) {
	if w.open < 0 {
		return
	}
	hl := w.segHeaderLen()
	start := w.open
	w.open = -1
	payload := w.buf[start+hl:]
	wireLen, rawLen := len(payload), 0
	if w.segLZ4 && len(payload) > 1 {
		// A destination one byte shorter than the payload makes the
		// compressor give up as soon as compression cannot pay off; the
		// payload is then stored uncompressed, marked by rawLen 0.
		z := GetBuf(len(payload) - 1)
		if n, err := lz4Compress(payload, z.B); err == nil && n > 0 && n < len(payload) {
			copy(payload, z.B[:n])
			w.buf = w.buf[:start+hl+n]
			wireLen, rawLen = n, len(payload)
		}
		z.Release()
	}
	// Appending to the zero-length slice at start overwrites the header room
	// reserved by openSegment, which is exactly hl bytes.
	appendSegmentHeader(w.buf[start:start], w.segLZ4, wireLen, rawLen, selfContained)
	w.reserve(segCRC32Len) // normally reserved by WriteFrame already
	w.buf = binary.LittleEndian.AppendUint32(w.buf, crc32Payload(w.buf[start+hl:]))
}

// Buffered returns the number of bytes waiting for Flush. While a segment is
// open this counts its payload uncompressed, and its CRC32 trailer.
func (w *Writer) Buffered() int {
	if w.open >= 0 {
		return len(w.buf) + segCRC32Len
	}
	return len(w.buf)
}

// Flush writes everything buffered to the underlying writer in as few write
// calls as possible: one. After a write error the Writer is unusable and
// returns that error from every call.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	w.sealSegment(true)
	if len(w.buf) == 0 {
		return nil
	}
	_, err := w.w.Write(w.buf)
	// Give the buffer back after every flush: an idle connection then holds
	// no write buffer at all, and the next frame takes one from the pool.
	w.b.Release()
	w.b, w.buf = nil, nil
	if err != nil {
		w.err = fmt.Errorf("frame: write: %w", err)
		return w.err
	}
	return nil
}
