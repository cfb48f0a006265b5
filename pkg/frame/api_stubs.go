package frame

// THIS FILE IS THE CONTRACT between pkg/frame and its users. The helper
// implementing pkg/frame replaces these stubs with real code in files named
// for what they do (reader.go, writer.go, segment.go, compress.go,
// messages.go, ...) and deletes this file. Signatures must stay as written.

import (
	"io"
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
func ParseCompression(name string) (Compression, error) { panic("stub") }

// Buf is a pooled buffer that holds exactly one frame in B (header + body,
// uncompressed, header length field == len(body)). It is owned by whoever
// holds it and must be given back with Release exactly once.
type Buf struct {
	B []byte
}

// GetBuf returns a pooled Buf with len(B)==n.
func GetBuf(n int) *Buf { panic("stub") }

// Release returns b to its pool; b must not be used afterwards.
func (b *Buf) Release() { panic("stub") }

// FrameTooLargeError is returned by Reader.ReadFrame when a header announces
// a body longer than the reader's limit. The body has been skipped, so the
// connection stays usable: the caller answers the stream with an error.
type FrameTooLargeError struct {
	Header Header
	Max    int
}

func (e *FrameTooLargeError) Error() string { panic("stub") }

// BadFrameError is returned when one frame is malformed but the byte stream is
// still in sync (e.g. its compressed body does not decompress, or it carries a
// protocol version different from the connection's). The caller answers the
// stream with PROTOCOL_ERROR and may continue.
type BadFrameError struct {
	Header Header
	Msg    string
}

func (e *BadFrameError) Error() string { panic("stub") }

// Reader reads whole frames from a connection. It is not safe for concurrent
// use. It starts in plain (v3/v4 style, also v5 before STARTUP) mode without
// compression.
type Reader struct{}

// NewReader returns a Reader that reads from r and refuses bodies longer than
// maxBody bytes with a *FrameTooLargeError.
func NewReader(r io.Reader, maxBody int) *Reader { panic("stub") }

// SetCompression sets the algorithm used to decompress bodies of frames that
// carry FlagCompression (v3/v4). The returned frame has the flag cleared and
// its length field set to the uncompressed body length.
func (r *Reader) SetCompression(c Compression) { panic("stub") }

// EnableSegments switches to v5 segment framing from the next byte on, with
// c either CompressionNone or CompressionLZ4.
func (r *Reader) EnableSegments(c Compression) { panic("stub") }

// ReadFrame reads the next frame into a pooled Buf. Errors: io.EOF at a
// clean frame boundary, io.ErrUnexpectedEOF mid-frame, *FrameTooLargeError,
// *BadFrameError (the stream is in sync, the caller may continue), ErrBadCRC
// or any other error (the connection must be closed). An unsupported protocol
// version in the header is reported as *BadFrameError only for the first
// frame (see UnsupportedVersionError); callers decide.
func (r *Reader) ReadFrame() (*Buf, error) { panic("stub") }

// UnsupportedVersionError is returned by ReadFrame when the version byte is
// outside [MinVersion, MaxVersion] or v5 with FlagBeta semantics we don't
// speak. Header holds what was read; the body was skipped when its length was
// plausible (<= max), otherwise the stream is out of sync.
type UnsupportedVersionError struct {
	Header Header
	InSync bool
}

func (e *UnsupportedVersionError) Error() string { panic("stub") }

// Writer buffers frames for one connection and writes them on Flush. It is
// not safe for concurrent use.
type Writer struct{}

// NewWriter returns a Writer in plain mode without compression.
func NewWriter(w io.Writer) *Writer { panic("stub") }

// SetCompression compresses the bodies of subsequently written frames (v3/v4)
// and sets FlagCompression on them. Frames with opcode STARTUP or OPTIONS
// (requests) and any frame before SetCompression are never compressed.
func (w *Writer) SetCompression(c Compression) { panic("stub") }

// EnableSegments wraps everything written from now on in v5 segments (c is
// CompressionNone or CompressionLZ4). Frames buffered but not yet flushed
// before the call are still written unframed.
func (w *Writer) EnableSegments(c Compression) { panic("stub") }

// WriteFrame appends the whole frame f (header+uncompressed body) to the
// buffer. f is not retained after the call returns.
func (w *Writer) WriteFrame(f []byte) error { panic("stub") }

// Buffered returns the number of bytes waiting for Flush.
func (w *Writer) Buffered() int { panic("stub") }

// Flush writes everything buffered to the underlying writer in as few write
// calls as possible.
func (w *Writer) Flush() error { panic("stub") }

// ---- encoders: each appends a whole frame (header included) to dst ----

// AppendFrame appends a frame with the given header fields and body.
func AppendFrame(dst []byte, version byte, response bool, flags byte, stream int16, opcode byte, body []byte) []byte {
	panic("stub")
}

// AppendError appends an ERROR response frame carrying code and msg. For
// codes that need more fields (UNAVAILABLE, timeouts, UNPREPARED, ...) use
// AppendErrorBody.
func AppendError(dst []byte, version byte, stream int16, code int32, msg string) []byte {
	panic("stub")
}

// AppendReady appends a READY response.
func AppendReady(dst []byte, version byte, stream int16) []byte { panic("stub") }

// AppendSupported appends a SUPPORTED response with the given string multimap.
func AppendSupported(dst []byte, version byte, stream int16, opts map[string][]string) []byte {
	panic("stub")
}

// AppendStartup appends a STARTUP request.
func AppendStartup(dst []byte, version byte, stream int16, opts map[string]string) []byte {
	panic("stub")
}

// AppendOptions appends an OPTIONS request.
func AppendOptions(dst []byte, version byte, stream int16) []byte { panic("stub") }

// AppendRegister appends a REGISTER request for the given event types.
func AppendRegister(dst []byte, version byte, stream int16, events []string) []byte {
	panic("stub")
}

// AppendQuery appends a QUERY request with no values and default flags
// (version-appropriate flags encoding) at the given consistency; pageSize<=0
// means no paging flag.
func AppendQuery(dst []byte, version byte, stream int16, query string, consistency uint16, pageSize int32) []byte {
	panic("stub")
}

// AppendPrepare appends a PREPARE request. keyspace is only sent on v5 (the
// PREPARE keyspace flag); on v3/v4 it must be empty or the caller must have
// issued USE on the connection.
func AppendPrepare(dst []byte, version byte, stream int16, query, keyspace string) []byte {
	panic("stub")
}

// ---- decoders: operate on a body (without header); returned slices alias body ----

// ReadStringMap decodes a [string map] at the start of body (STARTUP).
func ReadStringMap(body []byte) (map[string]string, error) { panic("stub") }

// ReadStringList decodes a [string list] at the start of body (REGISTER).
func ReadStringList(body []byte) ([]string, error) { panic("stub") }

// ReadStringMultimap decodes a [string multimap] at the start of body (SUPPORTED).
func ReadStringMultimap(body []byte) (map[string][]string, error) { panic("stub") }

// QueryString returns the [long string] query at the start of a QUERY or
// PREPARE body.
func QueryString(body []byte) ([]byte, error) { panic("stub") }

// PrepareKeyspace returns the keyspace of a v5 PREPARE body if its flags
// carry one, else "".
func PrepareKeyspace(version byte, body []byte) (string, error) { panic("stub") }

// ExecuteID returns the prepared id ([short bytes]) at the start of an
// EXECUTE body.
func ExecuteID(body []byte) ([]byte, error) { panic("stub") }

// ErrorCode returns the code and message of an ERROR body.
func ErrorCode(body []byte) (code int32, msg string, err error) { panic("stub") }

// UnpreparedID returns the statement id of an UNPREPARED (0x2500) ERROR body.
func UnpreparedID(body []byte) ([]byte, error) { panic("stub") }

// ResultKind returns the kind of a RESULT body.
func ResultKind(body []byte) (int32, error) { panic("stub") }

// PreparedID returns the statement id of a RESULT Prepared body.
func PreparedID(body []byte) ([]byte, error) { panic("stub") }

// SetKeyspaceName returns the keyspace of a RESULT Set_keyspace body.
func SetKeyspaceName(body []byte) (string, error) { panic("stub") }

// EventType returns the event type ("SCHEMA_CHANGE", ...) of an EVENT body.
func EventType(body []byte) (string, error) { panic("stub") }
