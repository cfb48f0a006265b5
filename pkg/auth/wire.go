package auth

import (
	"bytes"
	"encoding/binary"
	"errors"

	"github.com/cqlgate/cqlgate/pkg/frame"
)

// ParsePlain decodes a SASL PLAIN token, [authzid] NUL username NUL
// password, the way Cassandra's PasswordAuthenticator does: from the end, so
// an authorization identity is ignored. A token it would refuse yields the
// message Cassandra gives (as an AUTHENTICATION_ERROR) instead.
func ParsePlain(token []byte) (user, pass, msg string) {
	if bytes.Count(token, []byte{0}) > 2 {
		return "", "", "Credential format error: username or password is empty or contains NUL(\\0) character"
	}
	i := bytes.LastIndexByte(token, 0)
	if i < 0 || i == len(token)-1 {
		return "", "", "Password must not be null"
	}
	j := bytes.LastIndexByte(token[:i], 0)
	if j < 0 || j == i-1 {
		return "", "", "Authentication ID must not be null"
	}
	return string(token[j+1 : i]), string(token[i+1:]), ""
}

// ErrShortToken is returned by ParseAuthResponse for a body shorter than
// its [bytes] length says.
var ErrShortToken = errors.New("auth: AUTH_RESPONSE body shorter than its token")

// ParseAuthResponse returns the [bytes] token of an AUTH_RESPONSE body; a
// null token is returned as nil.
func ParseAuthResponse(body []byte) ([]byte, error) {
	if len(body) < 4 {
		return nil, ErrShortToken
	}
	n := int32(binary.BigEndian.Uint32(body))
	if n < 0 {
		return nil, nil
	}
	if int64(len(body)-4) < int64(n) {
		return nil, ErrShortToken
	}
	return body[4 : 4+n], nil
}

// AppendAuthenticate appends an AUTHENTICATE response naming class.
func AppendAuthenticate(dst []byte, version byte, stream int16, class string) []byte {
	body := binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(class)), uint16(len(class)))
	return frame.AppendFrame(dst, version, true, 0, stream, frame.OpAuthenticate, append(body, class...))
}

// AppendAuthSuccess appends an AUTH_SUCCESS response with a null token, as
// PasswordAuthenticator sends.
func AppendAuthSuccess(dst []byte, version byte, stream int16) []byte {
	return frame.AppendFrame(dst, version, true, 0, stream, frame.OpAuthSuccess, []byte{0xff, 0xff, 0xff, 0xff})
}
