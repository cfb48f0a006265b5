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
// Errors are sticky: once a segment fails, no later byte can be trusted.
type segmentReader struct {
	br  *bufio.Reader
	lz4 bool

	payload []byte // backing array of MaxSegmentPayload bytes
	cur     []byte // the current segment's (uncompressed) payload, aliases payload
	off     int    // bytes of cur already consumed
	zbuf    []byte // compressed payload, lz4 only

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
		s.zbuf = make([]byte, MaxSegmentPayload)
	case CompressionSnappy:
		s.err = errSnappySegments
		return s
	default:
		s.err = fmt.Errorf("frame: unknown %v for v5 segments", c)
		return s
	}
	s.payload = make([]byte, MaxSegmentPayload)
	s.cur = s.payload[:0]
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
	s.off += n
	s.atBoundary = false
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
		s.off += k
		done += k
		s.atBoundary = false
	}
	return done, nil
}

// next loads the following segment, or returns the sticky error.
func (s *segmentReader) next() error {
	if s.err != nil {
		return s.err
	}
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
	var wireLen, rawLen int
	var selfContained bool
	if s.lz4 {
		wireLen = int(v & segLengthMask)
		rawLen = int(v >> 17 & segLengthMask)
		selfContained = v>>34&1 == 1
	} else {
		wireLen = int(v & segLengthMask)
		selfContained = v>>17&1 == 1
	}
	stored := rawLen == 0

	if !s.atBoundary {
		if s.selfContained {
			return fmt.Errorf("%w: an envelope continues past the end of a self-contained segment", ErrMalformedStream)
		}
		if selfContained {
			return fmt.Errorf("%w: a self-contained segment starts in the middle of an envelope", ErrMalformedStream)
		}
	}

	wire := s.payload[:wireLen]
	if !stored {
		wire = s.zbuf[:wireLen]
	}
	if _, err := io.ReadFull(s.br, wire); err != nil {
		return noEOF(err)
	}
	if _, err := io.ReadFull(s.br, s.crc[:]); err != nil {
		return noEOF(err)
	}
	want32 := binary.LittleEndian.Uint32(s.crc[:])
	if got := crc32Payload(wire); got != want32 {
		return fmt.Errorf("%w: segment payload of %d bytes has CRC32 %08x, computed %08x", ErrBadCRC, wireLen, want32, got)
	}
	if stored {
		s.cur = wire
	} else {
		n, err := lz4.UncompressBlock(wire, s.payload[:rawLen])
		if err != nil {
			return fmt.Errorf("%w: lz4 segment payload is corrupt: %w", ErrMalformedStream, err)
		}
		if n != rawLen {
			return fmt.Errorf("%w: lz4 segment payload decompressed to %d bytes but announced %d", ErrMalformedStream, n, rawLen)
		}
		s.cur = s.payload[:rawLen]
	}
	s.off = 0
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
