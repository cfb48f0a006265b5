// Package frame implements the parts of the Cassandra native protocol (v3, v4
// and v5) that a proxy needs: reading and writing whole frames (v5 calls them
// envelopes), the v5 segment framing with its CRCs, lz4 and snappy compression,
// and decoding of just the few message fields that routing depends on. Bodies
// are otherwise forwarded as raw bytes: result rows are never decoded here.
//
// A frame is always handled as one contiguous byte slice: the 9-byte header
// followed by the uncompressed body. The header's length field always matches
// the body in such a slice; compression happens only on the wire.
package frame

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// HeaderLen is the size of a v3+ frame header.
const HeaderLen = 9

// MaxSegmentPayload is the largest payload of one v5 segment (2^17 - 1).
const MaxSegmentPayload = 1<<17 - 1

// Protocol versions spoken by this package.
const (
	V3 byte = 3
	V4 byte = 4
	V5 byte = 5

	MinVersion = V3
	MaxVersion = V5

	// ResponseBit is set in the version byte of frames sent by the server.
	ResponseBit byte = 0x80
)

// Header flags.
const (
	FlagCompression   byte = 0x01
	FlagTracing       byte = 0x02
	FlagCustomPayload byte = 0x04
	FlagWarning       byte = 0x08
	FlagBeta          byte = 0x10
)

// Opcodes.
const (
	OpError         byte = 0x00
	OpStartup       byte = 0x01
	OpReady         byte = 0x02
	OpAuthenticate  byte = 0x03
	OpOptions       byte = 0x05
	OpSupported     byte = 0x06
	OpQuery         byte = 0x07
	OpResult        byte = 0x08
	OpPrepare       byte = 0x09
	OpExecute       byte = 0x0A
	OpRegister      byte = 0x0B
	OpEvent         byte = 0x0C
	OpBatch         byte = 0x0D
	OpAuthChallenge byte = 0x0E
	OpAuthResponse  byte = 0x0F
	OpAuthSuccess   byte = 0x10
)

// Error codes (spec section 8).
const (
	ErrCodeServer          int32 = 0x0000
	ErrCodeProtocol        int32 = 0x000A
	ErrCodeBadCredentials  int32 = 0x0100
	ErrCodeUnavailable     int32 = 0x1000
	ErrCodeOverloaded      int32 = 0x1001
	ErrCodeIsBootstrapping int32 = 0x1002
	ErrCodeTruncate        int32 = 0x1003
	ErrCodeWriteTimeout    int32 = 0x1100
	ErrCodeReadTimeout     int32 = 0x1200
	ErrCodeReadFailure     int32 = 0x1300
	ErrCodeFunctionFailure int32 = 0x1400
	ErrCodeWriteFailure    int32 = 0x1500
	ErrCodeSyntax          int32 = 0x2000
	ErrCodeUnauthorized    int32 = 0x2100
	ErrCodeInvalid         int32 = 0x2200
	ErrCodeConfig          int32 = 0x2300
	ErrCodeAlreadyExists   int32 = 0x2400
	ErrCodeUnprepared      int32 = 0x2500
)

// RESULT kinds.
const (
	ResultVoid         int32 = 0x0001
	ResultRows         int32 = 0x0002
	ResultSetKeyspace  int32 = 0x0003
	ResultPrepared     int32 = 0x0004
	ResultSchemaChange int32 = 0x0005
)

// EventStream is the stream id the server uses for EVENT frames.
const EventStream int16 = -1

// Errors returned by the readers and decoders. Callers match them with
// errors.Is / errors.As.
var (
	// ErrShortBody means a body ended before a field it must contain.
	ErrShortBody = errors.New("frame: body too short")
	// ErrBadCRC means a v5 segment failed its header CRC24 or payload CRC32;
	// the byte stream can no longer be trusted and the connection must close.
	ErrBadCRC = errors.New("frame: segment CRC mismatch")
)

// Header is a decoded frame header.
type Header struct {
	Version  byte // without ResponseBit
	Response bool
	Flags    byte
	Stream   int16
	Opcode   byte
	Length   int32
}

// ParseHeader decodes the first HeaderLen bytes of b. It does not validate
// the version or the length.
func ParseHeader(b []byte) Header {
	_ = b[HeaderLen-1]
	return Header{
		Version:  b[0] &^ ResponseBit,
		Response: b[0]&ResponseBit != 0,
		Flags:    b[1],
		Stream:   int16(binary.BigEndian.Uint16(b[2:4])),
		Opcode:   b[4],
		Length:   int32(binary.BigEndian.Uint32(b[5:9])),
	}
}

// PutHeader encodes h into the first HeaderLen bytes of b.
func PutHeader(b []byte, h Header) {
	_ = b[HeaderLen-1]
	v := h.Version
	if h.Response {
		v |= ResponseBit
	}
	b[0] = v
	b[1] = h.Flags
	binary.BigEndian.PutUint16(b[2:4], uint16(h.Stream))
	b[4] = h.Opcode
	binary.BigEndian.PutUint32(b[5:9], uint32(h.Length))
}

// Stream returns the stream id of the frame f.
func Stream(f []byte) int16 { return int16(binary.BigEndian.Uint16(f[2:4])) }

// SetStream rewrites the stream id of the frame f in place; this is the only
// change the proxy makes to most frames.
func SetStream(f []byte, s int16) { binary.BigEndian.PutUint16(f[2:4], uint16(s)) }

// Opcode returns the opcode of the frame f.
func Opcode(f []byte) byte { return f[4] }

// Version returns the protocol version of frame f, without the response bit.
func Version(f []byte) byte { return f[0] &^ ResponseBit }

// Body returns the body of the frame f.
func Body(f []byte) []byte { return f[HeaderLen:] }

// OpcodeName returns a human name for an opcode, for logs and errors.
func OpcodeName(op byte) string {
	switch op {
	case OpError:
		return "ERROR"
	case OpStartup:
		return "STARTUP"
	case OpReady:
		return "READY"
	case OpAuthenticate:
		return "AUTHENTICATE"
	case OpOptions:
		return "OPTIONS"
	case OpSupported:
		return "SUPPORTED"
	case OpQuery:
		return "QUERY"
	case OpResult:
		return "RESULT"
	case OpPrepare:
		return "PREPARE"
	case OpExecute:
		return "EXECUTE"
	case OpRegister:
		return "REGISTER"
	case OpEvent:
		return "EVENT"
	case OpBatch:
		return "BATCH"
	case OpAuthChallenge:
		return "AUTH_CHALLENGE"
	case OpAuthResponse:
		return "AUTH_RESPONSE"
	case OpAuthSuccess:
		return "AUTH_SUCCESS"
	}
	return fmt.Sprintf("opcode(0x%02x)", op)
}
