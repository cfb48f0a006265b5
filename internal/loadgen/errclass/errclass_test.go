package errclass

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/gocql/gocql"
)

// serverError stands in for gocql's unexported errorFrame, which is how
// gocql v1.7.0 returns server errors that have no dedicated type
// (OVERLOADED, SERVER_ERROR, INVALID, ...): a value satisfying
// gocql.RequestError.
type serverError struct {
	code int
	msg  string
}

func (e serverError) Code() int       { return e.code }
func (e serverError) Message() string { return e.msg }
func (e serverError) Error() string   { return e.msg }

var _ gocql.RequestError = serverError{}

func TestClassifyError(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	ioTimeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}

	tests := []struct {
		name string
		err  error
		want Kind
	}{
		{"client timeout", gocql.ErrTimeoutNoResponse, Timeout},
		{"wrapped client timeout", fmt.Errorf("query: %w", gocql.ErrTimeoutNoResponse), Timeout},
		{"context deadline", context.DeadlineExceeded, Timeout},
		{"server write timeout", &gocql.RequestErrWriteTimeout{Consistency: gocql.One, WriteType: "SIMPLE"}, Timeout},
		{"server read timeout", &gocql.RequestErrReadTimeout{Consistency: gocql.One}, Timeout},
		{"socket i/o timeout", ioTimeout, Timeout},
		{"timeout code as plain error", gocql.Error{Code: gocql.ErrCodeReadTimeout}, Timeout},
		{"overloaded frame", serverError{gocql.ErrCodeOverloaded, "Server is in overloaded state"}, Overloaded},
		{"wrapped overloaded frame", fmt.Errorf("via proxy: %w", serverError{gocql.ErrCodeOverloaded, "shed"}), Overloaded},
		{"overloaded as plain error", gocql.Error{Code: gocql.ErrCodeOverloaded, Message: "x"}, Overloaded},
		{"overloaded flattened to a string", errors.New("Request was rejected: Overloaded"), Overloaded},
		{"proxy request timeout (SERVER_ERROR)", serverError{gocql.ErrCodeServer, "cqlgate: no answer from Cassandra within the request timeout (15s)"}, Timeout},
		{"other SERVER_ERROR", serverError{gocql.ErrCodeServer, "java.lang.AssertionError"}, Other},
		{"unavailable", &gocql.RequestErrUnavailable{Consistency: gocql.Quorum, Required: 2, Alive: 1}, Unavailable},
		{"unavailable sentinel", gocql.ErrUnavailable, Unavailable},
		{"no streams", gocql.ErrNoStreams, NoStreams},
		{"no streams flattened", errors.New("gocql: no streams available on connection"), NoStreams},
		{"empty pool", gocql.ErrNoConnections, NoHosts},
		{"no hosts", gocql.ErrNoHosts, NoHosts},
		{"no connections at start", gocql.ErrNoConnectionsStarted, NoHosts},
		{"connection closed", gocql.ErrConnectionClosed, Connection},
		{"too many timeouts closes the connection", gocql.ErrTooManyTimeouts, Connection},
		{"session closed", gocql.ErrSessionClosed, Connection},
		{"refused", refused, Connection},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), Connection},
		{"eof", io.EOF, Connection},
		{"closed conn", net.ErrClosed, Connection},
		{"reset flattened", errors.New("read tcp 127.0.0.1:1->127.0.0.1:2: read: connection reset by peer"), Connection},
		{"invalid query", serverError{gocql.ErrCodeInvalid, "unconfigured table kv"}, Other},
		{"write failure", &gocql.RequestErrWriteFailure{}, Other},
		{"anything else", errors.New("boom"), Other},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify(tt.err); got != tt.want {
				t.Errorf("Classify(%T %q) = %s; want %s", tt.err, tt.err, got, tt.want)
			}
		})
	}
}

func TestErrorCountsJSONHasEveryKind(t *testing.T) {
	var c Counts
	c[Overloaded] = 2
	b, err := c.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"connection":0,"no_hosts":0,"no_streams":0,"other":0,"overloaded":2,"timeout":0,"unavailable":0}`
	if string(b) != want {
		t.Errorf("got %s; want %s", b, want)
	}
	if got, want := c.String(), "overloaded=2"; got != want {
		t.Errorf("String() = %q; want %q", got, want)
	}
}

func TestErrorCountsJSONRoundTrip(t *testing.T) {
	var c, back Counts
	c[Timeout], c[Other] = 3, 1
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back != c {
		t.Errorf("round trip: got %v; want %v", back, c)
	}
}
