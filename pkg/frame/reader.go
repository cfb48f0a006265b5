package frame

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// DefaultMaxBody is the body limit NewReader applies when given maxBody <= 0:
// the 256 MiB envelope limit of the protocol spec.
const DefaultMaxBody = 256 << 20

// readBufferSize is the size of the Reader's bufio buffer: large enough that
// a burst of small frames costs one read syscall.
const readBufferSize = 64 << 10

// source is where the Reader takes frame bytes from: the bufio.Reader in
// plain mode, the segmentReader once segments are enabled.
type source interface {
	io.Reader
	Discard(n int) (int, error)
}

// Reader reads whole frames from a connection. It is not safe for concurrent
// use. It starts in plain (v3/v4 style, also v5 before STARTUP) mode without
// compression.
type Reader struct {
	br      *bufio.Reader
	src     source
	seg     *segmentReader // nil until EnableSegments
	maxBody int
	maxWire int // largest compressed body that may hold maxBody bytes
	comp    Compression
	hdr     [HeaderLen]byte
}

// NewReader returns a Reader that reads from r and refuses bodies longer than
// maxBody bytes with a *FrameTooLargeError. maxBody <= 0 means
// DefaultMaxBody.
func NewReader(r io.Reader, maxBody int) *Reader {
	if maxBody <= 0 {
		maxBody = DefaultMaxBody
	}
	br := bufio.NewReaderSize(r, readBufferSize)
	return &Reader{br: br, src: br, maxBody: maxBody, maxWire: maxBody}
}

// SetCompression sets the algorithm used to decompress bodies of frames that
// carry FlagCompression (v3/v4). The returned frame has the flag cleared and
// its length field set to the uncompressed body length.
//
// A compressed body may be slightly larger than the body it holds, so the
// limit on compressed frames is the size maxBody incompressible bytes take;
// their uncompressed length is then checked against maxBody before any
// memory is allocated for it.
func (r *Reader) SetCompression(c Compression) {
	r.comp = c
	r.maxWire = max(r.maxBody, compressedBound(c, r.maxBody))
}

// EnableSegments switches to v5 segment framing from the next byte on, with
// c either CompressionNone or CompressionLZ4. Bytes already buffered from the
// connection are read as segments, so the peer may send its first segment
// right behind the last unframed frame. With any other c, ReadFrame fails.
// FlagCompression on envelopes inside segments is ignored, as the v5 spec
// says, and cleared in the returned frames.
func (r *Reader) EnableSegments(c Compression) {
	r.seg = newSegmentReader(r.br, c)
	r.src = r.seg
}

// ReadFrame reads the next frame into a pooled Buf. Errors: io.EOF at a
// clean frame boundary, io.ErrUnexpectedEOF mid-frame, *FrameTooLargeError,
// *BadFrameError (the stream is in sync, the caller may continue), ErrBadCRC
// or any other error (the connection must be closed). An unsupported protocol
// version in the header is reported as *UnsupportedVersionError; its InSync
// field tells whether the stream may be continued; callers decide.
func (r *Reader) ReadFrame() (*Buf, error) {
	if r.seg != nil {
		r.seg.atBoundary = true
	}
	h, err := r.readHeader()
	if err != nil {
		return nil, err
	}
	if h.Version < MinVersion || h.Version > MaxVersion {
		inSync := h.Length >= 0 && int64(h.Length) <= int64(r.maxBody)
		if inSync {
			if err := r.skip(int(h.Length)); err != nil {
				return nil, err
			}
		}
		return nil, &UnsupportedVersionError{Header: h, InSync: inSync}
	}
	if h.Length < 0 {
		return nil, fmt.Errorf("%w: %s frame on stream %d announces a negative body length (%d)",
			ErrMalformedStream, OpcodeName(h.Opcode), h.Stream, h.Length)
	}
	limit := r.maxBody
	if h.Flags&FlagCompression != 0 && r.seg == nil {
		limit = r.maxWire
	}
	if int64(h.Length) > int64(limit) {
		if err := r.skip(int(h.Length)); err != nil {
			return nil, err
		}
		return nil, &FrameTooLargeError{Header: h, Max: limit}
	}
	if h.Flags&FlagCompression != 0 && r.seg == nil {
		return r.readCompressed(h)
	}

	b := GetBuf(HeaderLen + int(h.Length))
	copy(b.B, r.hdr[:])
	if _, err := io.ReadFull(r.src, b.B[HeaderLen:]); err != nil {
		b.Release()
		return nil, noEOF(err)
	}
	// The flag can only still be set inside segments, where it is deprecated
	// and ignored (v5 spec 2.4); clear it so that nobody downstream tries to
	// decompress the body.
	b.B[1] &^= FlagCompression
	return b, nil
}

// readHeader reads a frame header into r.hdr and parses it. Versions 1 and 2
// have an 8-byte header with a one-byte stream id, so the version byte is read
// first to know how much more to wait for.
func (r *Reader) readHeader() (Header, error) {
	if _, err := io.ReadFull(r.src, r.hdr[:1]); err != nil {
		return Header{}, err
	}
	v := r.hdr[0] &^ ResponseBit
	if v == 1 || v == 2 {
		b := r.hdr[:HeaderLen-1]
		if _, err := io.ReadFull(r.src, b[1:]); err != nil {
			return Header{}, noEOF(err)
		}
		return Header{
			Version:  v,
			Response: b[0]&ResponseBit != 0,
			Flags:    b[1],
			Stream:   int16(int8(b[2])),
			Opcode:   b[3],
			Length:   int32(binary.BigEndian.Uint32(b[4:8])),
		}, nil
	}
	if _, err := io.ReadFull(r.src, r.hdr[1:]); err != nil {
		return Header{}, noEOF(err)
	}
	return ParseHeader(r.hdr[:]), nil
}

// readCompressed reads a v3/v4 body carrying FlagCompression and returns the
// frame with its body decompressed. Once the compressed bytes are read the
// stream is in sync, so every problem after that is a *BadFrameError or a
// *FrameTooLargeError for this frame only.
func (r *Reader) readCompressed(h Header) (*Buf, error) {
	if r.comp == CompressionNone {
		if err := r.skip(int(h.Length)); err != nil {
			return nil, err
		}
		return nil, &BadFrameError{Header: h, Msg: errNoCompression.Error()}
	}
	z := GetBuf(int(h.Length))
	defer z.Release()
	if _, err := io.ReadFull(r.src, z.B); err != nil {
		return nil, noEOF(err)
	}
	n, err := decompressedLen(r.comp, z.B)
	if err != nil {
		return nil, &BadFrameError{Header: h, Msg: err.Error()}
	}
	if n > int64(r.maxBody) {
		h.Length = int32(min(n, 1<<31-1))
		return nil, &FrameTooLargeError{Header: h, Max: r.maxBody}
	}
	b := GetBuf(HeaderLen + int(n))
	if err := decompressBody(r.comp, b.B[HeaderLen:], z.B); err != nil {
		b.Release()
		return nil, &BadFrameError{Header: h, Msg: err.Error()}
	}
	h.Flags &^= FlagCompression
	h.Length = int32(n)
	PutHeader(b.B, h)
	return b, nil
}

// skip discards n body bytes to keep the stream in sync.
func (r *Reader) skip(n int) error {
	_, err := r.src.Discard(n)
	return noEOF(err)
}

// noEOF turns io.EOF into io.ErrUnexpectedEOF, for reads that start after
// the first byte of a frame.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Buffered returns the number of bytes already read from the connection
// and not yet returned as frames. When it is zero the next ReadFrame will
// block on the socket, which is when a proxy should flush what it queued
// for the frames read so far.
func (r *Reader) Buffered() int {
	n := r.br.Buffered()
	if r.seg != nil {
		n += len(r.seg.cur) - r.seg.off
	}
	return n
}
