// Package errclass sorts the errors a gocql request returns into the few
// kinds a benchmark reader needs (timeout, OVERLOADED, unavailable, no
// streams, no hosts, connection, other) and counts them per kind.
//
// It owns the classification rules and the JSON shape of the counts, which
// is part of loadgen's report contract. It must not retry, log or decide
// what a kind means for a run (whether to pause, warn or fail): callers do.
package errclass

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

// Kind groups failed requests by what a reader of a benchmark needs to
// know: was the server (or proxy) shedding load, timing out, or was the
// client unable to reach it at all.
type Kind int

const (
	Timeout     Kind = iota // client- or server-side timeout
	Overloaded              // OVERLOADED (0x1001): load shedding
	Unavailable             // UNAVAILABLE (0x1000): too few replicas
	NoStreams               // every stream id of a connection in use
	NoHosts                 // gocql had no usable host in its pool
	Connection              // connection refused, reset or closed
	Other                   // anything else: invalid queries, write failures, ...
	NumKinds                // the number of kinds: arrays indexed by Kind have this length
)

var kindNames = [NumKinds]string{
	Timeout:     "timeout",
	Overloaded:  "overloaded",
	Unavailable: "unavailable",
	NoStreams:   "no_streams",
	NoHosts:     "no_hosts",
	Connection:  "connection",
	Other:       "other",
}

func (k Kind) String() string {
	if k < 0 || k >= NumKinds {
		return "invalid"
	}
	return kindNames[k]
}

// Classify maps an error returned by gocql to its kind. Typed checks
// come first; the message matches at the end catch errors that reached us
// flattened into strings (gocql wraps some with fmt.Errorf("%v")).
func Classify(err error) Kind {
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
		return Timeout
	case errors.As(err, &unavailable), errors.Is(err, gocql.ErrUnavailable):
		return Unavailable
	case errors.Is(err, gocql.ErrNoStreams):
		return NoStreams
	case errors.Is(err, gocql.ErrNoConnections),
		errors.Is(err, gocql.ErrNoHosts),
		errors.Is(err, gocql.ErrNoConnectionsStarted):
		return NoHosts
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
		return Connection
	}
	// Server errors without a dedicated gocql type (OVERLOADED among them)
	// arrive as an unexported errorFrame that satisfies RequestError.
	// A code without a kind of its own (SERVER_ERROR above all) may still
	// say what happened: cqlgate answers a request that Cassandra did not
	// answer within --request-timeout with SERVER_ERROR "... within the
	// request timeout".
	if errors.As(err, &reqErr) {
		if k := kindOfCode(reqErr.Code()); k != Other {
			return k
		}
		return kindOfMessage(reqErr.Message())
	}
	if errors.As(err, &plainErr) {
		if k := kindOfCode(plainErr.Code); k != Other {
			return k
		}
		return kindOfMessage(plainErr.Message)
	}
	if errors.As(err, &netErr) {
		if netErr.Timeout() {
			return Timeout
		}
		return Connection
	}
	return kindOfMessage(err.Error())
}

func kindOfCode(code int) Kind {
	switch code {
	case gocql.ErrCodeOverloaded:
		return Overloaded
	case gocql.ErrCodeUnavailable:
		return Unavailable
	case gocql.ErrCodeReadTimeout, gocql.ErrCodeWriteTimeout:
		return Timeout
	}
	return Other
}

func kindOfMessage(msg string) Kind {
	msg = strings.ToLower(msg)
	for _, m := range messageKinds {
		if strings.Contains(msg, m.substr) {
			return m.kind
		}
	}
	return Other
}

// messageKinds are checked in order; the first match wins.
var messageKinds = [...]struct {
	substr string
	kind   Kind
}{
	{"no response received from cassandra within timeout", Timeout},
	{"timeout", Timeout},
	{"overloaded", Overloaded},
	{"no streams available", NoStreams},
	{"no hosts available", NoHosts},
	{"connection refused", Connection},
	{"connection reset", Connection},
	{"broken pipe", Connection},
	{"use of closed network connection", Connection},
	{"connection closed", Connection},
}

// Counts counts failed requests per kind.
type Counts [NumKinds]int64

func (c *Counts) Total() int64 {
	var n int64
	for _, v := range c {
		n += v
	}
	return n
}

func (c *Counts) Add(o *Counts) {
	for i, v := range o {
		c[i] += v
	}
}

// MarshalJSON writes every kind, zero or not, so the JSON shape is the same
// for every run.
func (c Counts) MarshalJSON() ([]byte, error) {
	m := make(map[string]int64, NumKinds)
	for k, v := range c {
		m[Kind(k).String()] = v
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads what MarshalJSON writes; unknown kinds are ignored
// so that readers keep working when a kind is added.
func (c *Counts) UnmarshalJSON(b []byte) error {
	var m map[string]int64
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("error counts: %w", err)
	}
	*c = Counts{}
	for k := range NumKinds {
		c[k] = m[k.String()]
	}
	return nil
}

// String lists the non-zero kinds, e.g. "timeout=3 other=1", or "0".
func (c *Counts) String() string {
	var b strings.Builder
	for k, v := range c {
		if v == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(Kind(k).String())
		b.WriteByte('=')
		b.WriteString(strconv.FormatInt(v, 10))
	}
	if b.Len() == 0 {
		return "0"
	}
	return b.String()
}
