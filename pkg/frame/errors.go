package frame

import (
	"errors"
	"fmt"
)

// More errors returned by the readers and decoders, next to ErrShortBody and
// ErrBadCRC in frame.go.
var (
	// ErrMalformedStream means the byte stream broke the framing rules in a
	// way that leaves no frame boundary to resume from (a negative body
	// length, an envelope straddling a self-contained segment, a segment
	// payload that does not decompress). The connection must be closed.
	ErrMalformedStream = errors.New("frame: malformed byte stream")
	// ErrWrongKind means a decoder was given a body of another kind than the
	// one it decodes, e.g. PreparedID on a RESULT Rows body.
	ErrWrongKind = errors.New("frame: body is not of the expected kind")
)

// FrameTooLargeError is returned by Reader.ReadFrame when a header announces
// a body longer than the reader's limit. The body has been skipped, so the
// connection stays usable: the caller answers the stream with an error.
//
// Header is the header as read, except that for a compressed frame whose
// uncompressed length is the one over the limit, Header.Length holds that
// uncompressed length. Max is the reader's limit, or for the compressed
// length of a compressed frame, the size of that many bytes compressed at
// worst (incompressible input grows a little).
type FrameTooLargeError struct {
	Header Header
	Max    int
}

// Error is worded to be sent to the client as the text of a PROTOCOL_ERROR.
func (e *FrameTooLargeError) Error() string {
	return fmt.Sprintf("frame body of %d bytes exceeds the maximum of %d", e.Header.Length, e.Max)
}

// BadFrameError is returned when one frame is malformed but the byte stream is
// still in sync (e.g. its compressed body does not decompress, or it carries a
// protocol version different from the connection's). The caller answers the
// stream with PROTOCOL_ERROR and may continue.
type BadFrameError struct {
	Header Header
	Msg    string
}

// Error is worded to be sent to the client as the text of a PROTOCOL_ERROR.
func (e *BadFrameError) Error() string {
	return fmt.Sprintf("invalid %s frame on stream %d: %s", OpcodeName(e.Header.Opcode), e.Header.Stream, e.Msg)
}

// UnsupportedVersionError is returned by ReadFrame when the version byte is
// outside [MinVersion, MaxVersion] or v5 with FlagBeta semantics we don't
// speak. Header holds what was read; the body was skipped when its length was
// plausible (<= max), otherwise the stream is out of sync.
//
// FlagBeta is accepted on every supported version: like Cassandra, the reader
// only insists on it for versions that are still in beta, and v5 is final.
// Versions 1 and 2 have an 8-byte header with a one-byte stream id; the reader
// parses it as such, so an old driver probing with an empty-bodied OPTIONS is
// answered instead of hanging, and InSync is accurate for those too.
type UnsupportedVersionError struct {
	Header Header
	InSync bool
}

// Error uses Cassandra's wording: drivers negotiate the protocol version by
// looking for "Invalid or unsupported protocol version" in the PROTOCOL_ERROR
// and retrying with a lower one.
func (e *UnsupportedVersionError) Error() string {
	return fmt.Sprintf("Invalid or unsupported protocol version (%d); supported versions are (3/v3, 4/v4, 5/v5)", e.Header.Version)
}
