package frame

import (
	"encoding/binary"
	"slices"
)

// Encoders append a whole frame, header included, to a caller-owned buffer
// and return the extended buffer, like strconv.AppendInt. They never fail:
// strings longer than a [string] can hold are truncated (see appendString).
// The version argument is used without its ResponseBit; the bit is set for
// response opcodes.

// QUERY and PREPARE flags used by the encoders and decoders.
const (
	queryFlagPageSize   = 0x04
	prepareFlagKeyspace = 0x01
)

// beginFrame appends a header whose length is filled in by endFrame.
func beginFrame(dst []byte, version byte, response bool, stream int16, opcode byte) ([]byte, int) {
	start := len(dst)
	dst = slices.Grow(dst, HeaderLen)[:start+HeaderLen]
	PutHeader(dst[start:], Header{Version: version &^ ResponseBit, Response: response, Stream: stream, Opcode: opcode})
	return dst, start
}

// endFrame sets the length field of the frame that starts at start.
func endFrame(dst []byte, start int) []byte {
	binary.BigEndian.PutUint32(dst[start+5:start+9], uint32(len(dst)-start-HeaderLen))
	return dst
}

// AppendFrame appends a frame with the given header fields and body.
func AppendFrame(dst []byte, version byte, response bool, flags byte, stream int16, opcode byte, body []byte) []byte {
	start := len(dst)
	dst = slices.Grow(dst, HeaderLen+len(body))[:start+HeaderLen]
	PutHeader(dst[start:], Header{
		Version:  version &^ ResponseBit,
		Response: response,
		Flags:    flags,
		Stream:   stream,
		Opcode:   opcode,
		Length:   int32(len(body)),
	})
	return append(dst, body...)
}

// AppendError appends an ERROR response frame carrying code and msg. For
// codes that need more fields (UNAVAILABLE, timeouts, UNPREPARED, ...) use
// AppendErrorBody.
func AppendError(dst []byte, version byte, stream int16, code int32, msg string) []byte {
	return AppendErrorBody(dst, version, stream, code, msg, nil)
}

// AppendErrorBody appends an ERROR response frame carrying code and msg
// followed by extra, the code-specific fields already encoded (e.g. for
// UNPREPARED, the [short bytes] statement id; see AppendUnprepared).
func AppendErrorBody(dst []byte, version byte, stream int16, code int32, msg string, extra []byte) []byte {
	dst, start := beginFrame(dst, version, true, stream, OpError)
	dst = appendInt(dst, code)
	dst = appendString(dst, msg)
	dst = append(dst, extra...)
	return endFrame(dst, start)
}

// AppendUnprepared appends an UNPREPARED (0x2500) ERROR response frame for
// the statement id. An id longer than 65535 bytes cannot be encoded and is
// truncated.
func AppendUnprepared(dst []byte, version byte, stream int16, msg string, id []byte) []byte {
	dst, start := beginFrame(dst, version, true, stream, OpError)
	dst = appendInt(dst, ErrCodeUnprepared)
	dst = appendString(dst, msg)
	id = id[:min(len(id), maxShortLen)]
	dst = appendShort(dst, uint16(len(id)))
	dst = append(dst, id...)
	return endFrame(dst, start)
}

// AppendReady appends a READY response.
func AppendReady(dst []byte, version byte, stream int16) []byte {
	dst, start := beginFrame(dst, version, true, stream, OpReady)
	return endFrame(dst, start)
}

// AppendSupported appends a SUPPORTED response with the given string multimap.
func AppendSupported(dst []byte, version byte, stream int16, opts map[string][]string) []byte {
	dst, start := beginFrame(dst, version, true, stream, OpSupported)
	dst = appendStringMultimap(dst, opts)
	return endFrame(dst, start)
}

// AppendStartup appends a STARTUP request.
func AppendStartup(dst []byte, version byte, stream int16, opts map[string]string) []byte {
	dst, start := beginFrame(dst, version, false, stream, OpStartup)
	dst = appendStringMap(dst, opts)
	return endFrame(dst, start)
}

// AppendOptions appends an OPTIONS request.
func AppendOptions(dst []byte, version byte, stream int16) []byte {
	dst, start := beginFrame(dst, version, false, stream, OpOptions)
	return endFrame(dst, start)
}

// AppendRegister appends a REGISTER request for the given event types.
func AppendRegister(dst []byte, version byte, stream int16, events []string) []byte {
	dst, start := beginFrame(dst, version, false, stream, OpRegister)
	dst = appendStringList(dst, events)
	return endFrame(dst, start)
}

// AppendQuery appends a QUERY request with no values and default flags
// (version-appropriate flags encoding) at the given consistency; pageSize<=0
// means no paging flag.
func AppendQuery(dst []byte, version byte, stream int16, query string, consistency uint16, pageSize int32) []byte {
	dst, start := beginFrame(dst, version, false, stream, OpQuery)
	dst = appendLongString(dst, query)
	dst = appendShort(dst, consistency)
	var flags byte
	if pageSize > 0 {
		flags |= queryFlagPageSize
	}
	// The query flags are a [byte] up to v4 and an [int] from v5 on.
	if version&^ResponseBit >= V5 {
		dst = appendInt(dst, int32(flags))
	} else {
		dst = append(dst, flags)
	}
	if pageSize > 0 {
		dst = appendInt(dst, pageSize)
	}
	return endFrame(dst, start)
}

// AppendPrepare appends a PREPARE request. keyspace is only sent on v5 (the
// PREPARE keyspace flag); on v3/v4 it must be empty or the caller must have
// issued USE on the connection.
func AppendPrepare(dst []byte, version byte, stream int16, query, keyspace string) []byte {
	dst, start := beginFrame(dst, version, false, stream, OpPrepare)
	dst = appendLongString(dst, query)
	if version&^ResponseBit >= V5 {
		if keyspace == "" {
			dst = appendInt(dst, 0)
		} else {
			dst = appendInt(dst, prepareFlagKeyspace)
			dst = appendString(dst, keyspace)
		}
	}
	return endFrame(dst, start)
}
