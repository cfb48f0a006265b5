package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"

	"github.com/gocql/gocql"
)

// ErrorKind groups failed requests by what a reader of a benchmark needs to
// know: was the server (or proxy) shedding load, timing out, or was the
// client unable to reach it at all.
type ErrorKind int

const (
	ErrKindTimeout     ErrorKind = iota // client- or server-side timeout
	ErrKindOverloaded                   // OVERLOADED (0x1001): load shedding
	ErrKindUnavailable                  // UNAVAILABLE (0x1000): too few replicas
	ErrKindNoStreams                    // every stream id of a connection in use
	ErrKindNoHosts                      // gocql had no usable host in its pool
	ErrKindConnection                   // connection refused, reset or closed
	ErrKindOther
	numErrorKinds
)

var errorKindNames = [numErrorKinds]string{
	ErrKindTimeout:     "timeout",
	ErrKindOverloaded:  "overloaded",
	ErrKindUnavailable: "unavailable",
	ErrKindNoStreams:   "no_streams",
	ErrKindNoHosts:     "no_hosts",
	ErrKindConnection:  "connection",
	ErrKindOther:       "other",
}

func (k ErrorKind) String() string {
	if k < 0 || k >= numErrorKinds {
		return "invalid"
	}
	return errorKindNames[k]
}

// classifyError maps an error returned by gocql to its kind. Typed checks
// come first; the message matches at the end catch errors that reached us
// flattened into strings (gocql wraps some with fmt.Errorf("%v")).
func classifyError(err error) ErrorKind {
	var (
		writeTimeout *gocql.RequestErrWriteTimeout
		readTimeout  *gocql.RequestErrReadTimeout
		unavailable  *gocql.RequestErrUnavailable
		reqErr       gocql.RequestError
		plainErr     gocql.Error
		netErr       net.Error
	)
	switch {
	case errors.Is(err, gocql.ErrTimeoutNoResponse),
		errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &writeTimeout),
		errors.As(err, &readTimeout):
		return ErrKindTimeout
	case errors.As(err, &unavailable), errors.Is(err, gocql.ErrUnavailable):
		return ErrKindUnavailable
	case errors.Is(err, gocql.ErrNoStreams):
		return ErrKindNoStreams
	case errors.Is(err, gocql.ErrNoConnections),
		errors.Is(err, gocql.ErrNoHosts),
		errors.Is(err, gocql.ErrNoConnectionsStarted):
		return ErrKindNoHosts
	case errors.Is(err, gocql.ErrConnectionClosed),
		// The connection is closed after too many timeouts; the requests
		// still on it fail because the connection went away.
		errors.Is(err, gocql.ErrTooManyTimeouts),
		errors.Is(err, gocql.ErrSessionClosed),
		errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, net.ErrClosed),
		errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE):
		return ErrKindConnection
	}
	// Server errors without a dedicated gocql type (OVERLOADED among them)
	// arrive as an unexported errorFrame that satisfies RequestError.
	// A code without a kind of its own (SERVER_ERROR above all) may still
	// say what happened: cqlgate answers a request that Cassandra did not
	// answer within --request-timeout with SERVER_ERROR "... within the
	// request timeout".
	if errors.As(err, &reqErr) {
		if k := kindOfCode(reqErr.Code()); k != ErrKindOther {
			return k
		}
		return kindOfMessage(reqErr.Message())
	}
	if errors.As(err, &plainErr) {
		if k := kindOfCode(plainErr.Code); k != ErrKindOther {
			return k
		}
		return kindOfMessage(plainErr.Message)
	}
	if errors.As(err, &netErr) {
		if netErr.Timeout() {
			return ErrKindTimeout
		}
		return ErrKindConnection
	}
	return kindOfMessage(err.Error())
}

func kindOfCode(code int) ErrorKind {
	switch code {
	case gocql.ErrCodeOverloaded:
		return ErrKindOverloaded
	case gocql.ErrCodeUnavailable:
		return ErrKindUnavailable
	case gocql.ErrCodeReadTimeout, gocql.ErrCodeWriteTimeout:
		return ErrKindTimeout
	}
	return ErrKindOther
}

func kindOfMessage(msg string) ErrorKind {
	msg = strings.ToLower(msg)
	for _, m := range messageKinds {
		if strings.Contains(msg, m.substr) {
			return m.kind
		}
	}
	return ErrKindOther
}

// messageKinds are checked in order; the first match wins.
var messageKinds = [...]struct {
	substr string
	kind   ErrorKind
}{
	{"no response received from cassandra within timeout", ErrKindTimeout},
	{"timeout", ErrKindTimeout},
	{"overloaded", ErrKindOverloaded},
	{"no streams available", ErrKindNoStreams},
	{"no hosts available", ErrKindNoHosts},
	{"connection refused", ErrKindConnection},
	{"connection reset", ErrKindConnection},
	{"broken pipe", ErrKindConnection},
	{"use of closed network connection", ErrKindConnection},
	{"connection closed", ErrKindConnection},
}

// ErrorCounts counts failed requests per kind.
type ErrorCounts [numErrorKinds]int64

func (c *ErrorCounts) Total() int64 {
	var n int64
	for _, v := range c {
		n += v
	}
	return n
}

func (c *ErrorCounts) Add(o *ErrorCounts) {
	for i, v := range o {
		c[i] += v
	}
}

// MarshalJSON writes every kind, zero or not, so the JSON shape is the same
// for every run.
func (c ErrorCounts) MarshalJSON() ([]byte, error) {
	m := make(map[string]int64, numErrorKinds)
	for k, v := range c {
		m[ErrorKind(k).String()] = v
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads what MarshalJSON writes; unknown kinds are ignored
// so that readers keep working when a kind is added.
func (c *ErrorCounts) UnmarshalJSON(b []byte) error {
	var m map[string]int64
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("error counts: %w", err)
	}
	*c = ErrorCounts{}
	for k := range numErrorKinds {
		c[k] = m[k.String()]
	}
	return nil
}

// String lists the non-zero kinds, e.g. "timeout=3 other=1", or "0".
func (c *ErrorCounts) String() string {
	var b strings.Builder
	for k, v := range c {
		if v == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(ErrorKind(k).String())
		b.WriteByte('=')
		b.WriteString(strconv.FormatInt(v, 10))
	}
	if b.Len() == 0 {
		return "0"
	}
	return b.String()
}
