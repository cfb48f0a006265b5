package frame

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/pierrec/lz4/v4"
)

// Segment header sizes (v5 spec section 2). Each header is followed by the
// CRC24 of its bytes, and each payload by its CRC32.
const (
	segHeaderLen    = 3 // 17-bit payload length, self-contained bit
	segHeaderLenLZ4 = 5 // 17-bit compressed length, 17-bit uncompressed length, self-contained bit
	segCRC24Len     = 3
	segCRC32Len     = 4

	// segLengthMask extracts one 17-bit length field.
	segLengthMask = MaxSegmentPayload
)

var errSnappySegments = errors.New("frame: snappy is not supported with v5 segments; only lz4 is")

// segmentReader turns the segments read from br back into the continuous
// stream of envelopes they carry, so that the Reader parses envelopes the same
// way with and without segments. A segment's payload is only handed out after
// its CRC32 has been checked, so a corrupt length inside it is never acted on.
//
// Payloads live in pooled buffers that are given back as soon as they have
// been consumed: an idle connection holds no segment memory.
//
// Errors are sticky: once a segment fails, no later byte can be trusted.
type segmentReader struct {
	br  *bufio.Reader
	lz4 bool

	buf *Buf   // holds cur; nil once cur is consumed
	cur []byte // the current segment's (uncompressed) payload
	off int    // bytes of cur already consumed

	// selfContained tells whether cur came from a self-contained segment.
	selfContained bool
	// atBoundary is set by the Reader before each envelope and cleared when
	// the first byte of it is consumed; a segment loaded while it is false
	// continues an envelope, which only non-self-contained segments may do.
	atBoundary bool

	hdr [segHeaderLenLZ4 + segCRC24Len]byte
	crc [segCRC32Len]byte
	err error
}

func newSegmentReader(br *bufio.Reader, c Compression) *segmentReader {
	s := &segmentReader{br: br, atBoundary: true}
	switch c {
	case CompressionNone:
	case CompressionLZ4:
		s.lz4 = true
	case CompressionSnappy:
		s.err = errSnappySegments
	default:
		s.err = fmt.Errorf("frame: unknown %v for v5 segments", c)
	}
	return s
}

// Read implements io.Reader over the concatenated segment payloads. It
// returns io.EOF only when the connection ends exactly between segments.
func (s *segmentReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for s.off == len(s.cur) {
		if err := s.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, s.cur[s.off:])
	s.advance(n)
	return n, nil
}

// Discard skips n bytes of the envelope stream, like bufio.Reader.Discard.
func (s *segmentReader) Discard(n int) (int, error) {
	done := 0
	for done < n {
		if s.off == len(s.cur) {
			if err := s.next(); err != nil {
				return done, err
			}
			continue
		}
		k := min(n-done, len(s.cur)-s.off)
		s.advance(k)
		done += k
	}
	return done, nil
}

// advance consumes n bytes of cur and gives its buffer back once all of it
// has been consumed.
func (s *segmentReader) advance(n int) {
	s.off += n
	s.atBoundary = false
	if s.off == len(s.cur) {
		s.release()
	}
}

func (s *segmentReader) release() {
	s.buf.Release()
	s.buf, s.cur, s.off = nil, nil, 0
}

// next loads the following segment, or returns the sticky error.
func (s *segmentReader) next() error {
	if s.err != nil {
		return s.err
	}
	s.release()
	if err := s.load(); err != nil {
		s.err = err
		return err
	}
	return nil
}

func (s *segmentReader) load() error {
	hl := segHeaderLen
	if s.lz4 {
		hl = segHeaderLenLZ4
	}
	hdr := s.hdr[:hl+segCRC24Len]
	if _, err := io.ReadFull(s.br, hdr); err != nil {
		return err // io.EOF only when no header byte arrived
	}
	var v uint64
	for i := hl - 1; i >= 0; i-- {
		v = v<<8 | uint64(hdr[i])
	}
	want := uint32(hdr[hl]) | uint32(hdr[hl+1])<<8 | uint32(hdr[hl+2])<<16
	if got := crc24(v, hl); got != want {
		return fmt.Errorf("%w: segment header %x has CRC24 %06x, computed %06x", ErrBadCRC, hdr[:hl], want, got)
	}

	// Lengths as in Cassandra's FrameDecoderLZ4: an uncompressed length of
	// 0 means the sender stored the payload uncompressed, and the other field
	// is its length.
	wireLen := int(v & segLengthMask)
	rawLen := 0
	selfContained := v>>17&1 == 1
	if s.lz4 {
		rawLen = int(v >> 17 & segLengthMask)
		selfContained = v>>34&1 == 1
	}

	if !s.atBoundary {
		if s.selfContained {
			return fmt.Errorf("%w: an envelope continues past the end of a self-contained segment", ErrMalformedStream)
		}
		if selfContained {
			return fmt.Errorf("%w: a self-contained segment starts in the middle of an envelope", ErrMalformedStream)
		}
	}

	// Both lengths are 17-bit fields, so these buffers are at most 128 KiB
	// whatever the peer sends.
	wire := GetBuf(wireLen)
	if _, err := io.ReadFull(s.br, wire.B); err != nil {
		wire.Release()
		return noEOF(err)
	}
	if _, err := io.ReadFull(s.br, s.crc[:]); err != nil {
		wire.Release()
		return noEOF(err)
	}
	want32 := binary.LittleEndian.Uint32(s.crc[:])
	if got := crc32Payload(wire.B); got != want32 {
		wire.Release()
		return fmt.Errorf("%w: segment payload of %d bytes has CRC32 %08x, computed %08x", ErrBadCRC, wireLen, want32, got)
	}
	if rawLen == 0 {
		s.buf = wire
	} else {
		raw := GetBuf(rawLen)
		n, err := lz4.UncompressBlock(wire.B, raw.B)
		wire.Release()
		if err != nil || n != rawLen {
			raw.Release()
			if err == nil {
				err = fmt.Errorf("%d bytes instead of %d", n, rawLen)
			}
			return fmt.Errorf("%w: lz4 segment payload does not decompress: %w", ErrMalformedStream, err)
		}
		s.buf = raw
	}
	s.cur, s.off = s.buf.B, 0
	s.selfContained = selfContained
	return nil
}

// appendSegmentHeader appends the header of a segment with the given lengths
// and its CRC24. For an uncompressed segment rawLen is ignored; for an lz4
// segment rawLen 0 marks a payload stored uncompressed.
func appendSegmentHeader(dst []byte, lz4 bool, wireLen, rawLen int, selfContained bool) []byte {
	v := uint64(wireLen)
	hl := segHeaderLen
	flag := uint(17)
	if lz4 {
		v |= uint64(rawLen) << 17
		hl = segHeaderLenLZ4
		flag = 34
	}
	if selfContained {
		v |= 1 << flag
	}
	crc := crc24(v, hl)
	for range hl {
		dst = append(dst, byte(v))
		v >>= 8
	}
	return append(dst, byte(crc), byte(crc>>8), byte(crc>>16))
}
