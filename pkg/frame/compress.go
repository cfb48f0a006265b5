package frame

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/golang/snappy"
	"github.com/pierrec/lz4/v4"
)

// Compression names a body/segment compression algorithm negotiated in STARTUP.
type Compression uint8

const (
	CompressionNone Compression = iota
	CompressionLZ4
	CompressionSnappy
)

// ParseCompression maps the STARTUP COMPRESSION option ("", "lz4", "snappy",
// case-insensitive) to a Compression; unknown names return an error.
func ParseCompression(name string) (Compression, error) {
	switch {
	case name == "":
		return CompressionNone, nil
	case strings.EqualFold(name, "lz4"):
		return CompressionLZ4, nil
	case strings.EqualFold(name, "snappy"):
		return CompressionSnappy, nil
	}
	return CompressionNone, fmt.Errorf("unsupported compression %q; supported are lz4 and snappy", name)
}

// String returns the STARTUP COMPRESSION option value for c ("" for none).
func (c Compression) String() string {
	switch c {
	case CompressionNone:
		return ""
	case CompressionLZ4:
		return "lz4"
	case CompressionSnappy:
		return "snappy"
	}
	return fmt.Sprintf("compression(%d)", uint8(c))
}

// lz4Compressors pools lz4 compressor state (a 136 KiB hash table): held
// only while compressing, so idle connections do not each pin one.
var lz4Compressors = sync.Pool{New: func() any { return new(lz4.Compressor) }}

// lz4Compress compresses src into dst as one lz4 block; see
// lz4.Compressor.CompressBlock for what a dst shorter than the bound does.
func lz4Compress(src, dst []byte) (int, error) {
	c := lz4Compressors.Get().(*lz4.Compressor)
	defer lz4Compressors.Put(c)
	return c.CompressBlock(src, dst)
}

// lz4LenPrefix is the size of the big-endian uncompressed length that
// precedes the lz4 block in a v3/v4 compressed body.
const lz4LenPrefix = 4

var errNoCompression = errors.New("compression flag set but no compression was negotiated")

// compressedBound returns the largest v3/v4 compressed body c produces for
// n bytes of input.
func compressedBound(c Compression, n int) int {
	switch c {
	case CompressionLZ4:
		return lz4LenPrefix + lz4.CompressBlockBound(n)
	case CompressionSnappy:
		if b := snappy.MaxEncodedLen(n); b > 0 {
			return b
		}
	}
	return n
}

// decompressedLen returns the uncompressed length announced by the v3/v4
// compressed body z, without decompressing it, so that the caller can check
// it against its limit before allocating. It is an int64 because the lz4
// prefix is an unsigned 32-bit number.
func decompressedLen(c Compression, z []byte) (int64, error) {
	switch c {
	case CompressionLZ4:
		if len(z) < lz4LenPrefix {
			return 0, fmt.Errorf("lz4 body of %d bytes is shorter than its 4-byte length prefix", len(z))
		}
		return int64(binary.BigEndian.Uint32(z)), nil
	case CompressionSnappy:
		n, err := snappy.DecodedLen(z)
		if err != nil {
			return 0, fmt.Errorf("snappy body is corrupt: %w", err)
		}
		return int64(n), nil
	case CompressionNone:
		return 0, errNoCompression
	}
	return 0, fmt.Errorf("unknown %v", c)
}

// decompressBody decompresses the v3/v4 compressed body z into dst, whose
// length must be the one decompressedLen returned.
func decompressBody(c Compression, dst, z []byte) error {
	switch c {
	case CompressionLZ4:
		if len(dst) == 0 {
			// Cassandra encodes an empty body as the length 0 followed by
			// one byte, which carries nothing.
			return nil
		}
		n, err := lz4.UncompressBlock(z[lz4LenPrefix:], dst)
		if err != nil {
			return fmt.Errorf("lz4 body is corrupt: %w", err)
		}
		if n != len(dst) {
			return fmt.Errorf("lz4 body decompressed to %d bytes but announced %d", n, len(dst))
		}
		return nil
	case CompressionSnappy:
		out, err := snappy.Decode(dst, z)
		if err != nil {
			return fmt.Errorf("snappy body is corrupt: %w", err)
		}
		if len(out) != len(dst) || (len(out) > 0 && &out[0] != &dst[0]) {
			return fmt.Errorf("snappy body decompressed to %d bytes but announced %d", len(out), len(dst))
		}
		return nil
	case CompressionNone:
		return errNoCompression
	}
	return fmt.Errorf("unknown %v", c)
}

// appendCompressedBody appends body compressed with c in the v3/v4 body
// format to dst.
func appendCompressedBody(dst []byte, c Compression, body []byte) ([]byte, error) {
	switch c {
	case CompressionLZ4:
		bound := lz4.CompressBlockBound(len(body))
		dst = slices.Grow(dst, lz4LenPrefix+bound)
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(body)))
		n, err := lz4Compress(body, dst[len(dst):len(dst)+bound])
		if err != nil {
			return dst, fmt.Errorf("frame: lz4 compression failed: %w", err)
		}
		return dst[:len(dst)+n], nil
	case CompressionSnappy:
		bound := snappy.MaxEncodedLen(len(body))
		if bound < 0 {
			return dst, fmt.Errorf("frame: body of %d bytes is too large for snappy", len(body))
		}
		dst = slices.Grow(dst, bound)
		out := snappy.Encode(dst[len(dst):len(dst)+bound], body)
		return dst[:len(dst)+len(out)], nil
	}
	return dst, fmt.Errorf("frame: cannot compress bodies with %v", c)
}
