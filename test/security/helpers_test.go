package security

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	gocql2 "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/apache/cassandra-gocql-driver/v2/lz4"
	"github.com/gocql/gocql"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/cqlgate/cqlgate/internal/cassandratest"
	"github.com/cqlgate/cqlgate/internal/promtest"
	"github.com/cqlgate/cqlgate/internal/proxytest"
	"github.com/cqlgate/cqlgate/pkg/config"
	"github.com/cqlgate/cqlgate/pkg/frame"
	"github.com/cqlgate/cqlgate/pkg/proxy"
)

// startProxy runs a proxy in front of the node, logged in as the
// superuser, with mod applied on top (may be nil).
func startProxy(t testing.TB, mod func(*config.Config)) *proxytest.Proxy {
	t.Helper()
	n := cassandratest.Require(t, node)
	return proxytest.Start(t, n.Addrs, func(c *config.Config) {
		c.BackendUsername, c.BackendPassword = n.Username, n.Password
		if mod != nil {
			mod(c)
		}
	})
}

// proxyRunError runs a proxy configured by mod in front of the node and
// returns its log and the error Run fails with (the test fails if it serves
// instead).
func proxyRunError(t *testing.T, mod func(*config.Config)) (string, error) {
	t.Helper()
	n := cassandratest.Require(t, node)
	cfg := config.Default()
	cfg.Listen = []string{"127.0.0.1:0"}
	cfg.ContactPoints = n.Addrs
	mod(&cfg)
	logs := &proxytest.SyncBuffer{}
	log := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), logs, zap.DebugLevel))
	p, err := proxy.New(cfg, log, prometheus.NewRegistry())
	if err != nil {
		return logs.String(), err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("proxy.Run returned nil, want an error")
		}
		return logs.String(), err
	case <-p.Serving():
		cancel()
		<-done
		t.Fatalf("proxy serves, want it to fail\nlog:\n%s", logs)
	}
	return "", nil
}

// session4 opens a gocql v1.7.0 (protocol v4) session to addr; mod may
// change the configuration (nil: none).
func session4(addr string, mod func(*gocql.ClusterConfig)) (*gocql.Session, error) {
	cc := gocql.NewCluster(addr)
	cc.ProtoVersion = 4
	cc.Timeout = 10 * time.Second
	cc.ConnectTimeout = 10 * time.Second
	cc.NumConns = 1
	cc.DisableInitialHostLookup = true
	cc.Logger = nopLogger{}
	if mod != nil {
		mod(cc)
	}
	return cc.CreateSession()
}

// session5 opens a cassandra-gocql-driver/v2 session to addr, which
// negotiates protocol v5.
func session5(addr string, mod func(*gocql2.ClusterConfig)) (*gocql2.Session, error) {
	cc := gocql2.NewCluster(addr)
	cc.ProtoVersion = 5
	cc.Timeout = 10 * time.Second
	cc.ConnectTimeout = 10 * time.Second
	cc.NumConns = 1
	cc.DisableInitialHostLookup = true
	if mod != nil {
		mod(cc)
	}
	return cc.CreateSession()
}

type nopLogger struct{}

func (nopLogger) Print(...any)          {}
func (nopLogger) Printf(string, ...any) {}
func (nopLogger) Println(...any)        {}

// driver abstracts the two drivers for tests that run on v4 and v5.
type driver struct {
	name string
	// connect opens a session to addr with the given credentials (user ""
	// for none) and TLS configuration (nil for plain) and runs a query.
	connect func(addr, user, pass string, tc *tls.Config) error
}

var drivers = []driver{
	{"v4-gocql", connect4(nil)},
	{"v5-gocql2", connect5(nil)},
	// Compression applies from the frame after STARTUP on v4, and to the
	// segments after AUTHENTICATE on v5: the login is compressed too.
	{"v4-gocql-snappy", connect4(gocql.SnappyCompressor{})},
	{"v5-gocql2-lz4", connect5(lz4.LZ4Compressor{})},
}

func connect4(comp gocql.Compressor) func(addr, user, pass string, tc *tls.Config) error {
	return func(addr, user, pass string, tc *tls.Config) error {
		s, err := session4(addr, func(cc *gocql.ClusterConfig) {
			cc.Compressor = comp
			if user != "" {
				cc.Authenticator = gocql.PasswordAuthenticator{Username: user, Password: pass}
			}
			if tc != nil {
				cc.SslOpts = &gocql.SslOptions{Config: tc, EnableHostVerification: true}
			}
		})
		if err != nil {
			return err
		}
		defer s.Close()
		var v string
		return s.Query("SELECT release_version FROM system.local").Scan(&v)
	}
}

func connect5(comp gocql2.Compressor) func(addr, user, pass string, tc *tls.Config) error {
	return func(addr, user, pass string, tc *tls.Config) error {
		s, err := session5(addr, func(cc *gocql2.ClusterConfig) {
			cc.Compressor = comp
			if user != "" {
				cc.Authenticator = gocql2.PasswordAuthenticator{Username: user, Password: pass}
			}
			if tc != nil {
				cc.SslOpts = &gocql2.SslOptions{Config: tc, EnableHostVerification: true}
			}
		})
		if err != nil {
			return err
		}
		defer s.Close()
		var v string
		return s.Query("SELECT release_version FROM system.local").Scan(&v)
	}
}

// withoutAddrs replaces the given addresses (and their hosts) in an error
// message, so errors of a direct and a proxied connection compare equal.
func withoutAddrs(err error, addrs ...string) string {
	if err == nil {
		return "<nil>"
	}
	s := err.Error()
	for _, a := range addrs {
		s = strings.ReplaceAll(s, a, "ADDR")
		if h, _, err := net.SplitHostPort(a); err == nil {
			s = strings.ReplaceAll(s, h, "HOST")
		}
	}
	return s
}

// rawAnswer is what a hand-driven login got: the opcode of the answer to
// the AUTH_RESPONSE (or to the request sent instead) and, for an ERROR,
// its code and message.
type rawAnswer struct {
	Opcode  string
	Code    int32
	Message string
}

func (a rawAnswer) String() string {
	if a.Opcode == "ERROR" {
		return fmt.Sprintf("ERROR 0x%04x %q", a.Code, a.Message)
	}
	return a.Opcode
}

// rawLogin connects to addr over plain CQL with protocol version v, sends
// STARTUP, checks that the answer is AUTHENTICATE naming
// PasswordAuthenticator, then sends next (built for stream 1 by the
// caller: an AUTH_RESPONSE or anything else) and returns the answer. On
// v5 the frames after AUTHENTICATE travel in segments.
func rawLogin(t testing.TB, addr string, v byte, next []byte) rawAnswer {
	t.Helper()
	a, nc := rawLoginOpen(t, addr, v, next)
	nc.Close()
	return a
}

// rawLoginOpen is rawLogin leaving the connection open, for the caller
// to close.
func rawLoginOpen(t testing.TB, addr string, v byte, next []byte) (rawAnswer, net.Conn) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = nc.SetDeadline(time.Now().Add(15 * time.Second))
	r, w := frame.NewReader(nc, 1<<20), frame.NewWriter(nc)
	roundTrip := func(f []byte) []byte {
		t.Helper()
		if err := w.WriteFrame(f); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		b, err := r.ReadFrame()
		if err != nil {
			t.Fatalf("%s v%d: read: %v", addr, v, err)
		}
		defer b.Release()
		return append([]byte(nil), b.B...)
	}
	resp := roundTrip(frame.AppendStartup(nil, v, 0, map[string]string{"CQL_VERSION": "3.0.0"}))
	if op := frame.Opcode(resp); op != frame.OpAuthenticate {
		t.Fatalf("%s v%d: STARTUP answered with %s, want AUTHENTICATE", addr, v, frame.OpcodeName(op))
	}
	if got, want := string(frame.Body(resp)[2:]), "org.apache.cassandra.auth.PasswordAuthenticator"; got != want {
		t.Fatalf("%s v%d: AUTHENTICATE names %q, want %q", addr, v, got, want)
	}
	if v >= frame.V5 {
		r.EnableSegments(frame.CompressionNone)
		w.EnableSegments(frame.CompressionNone)
	}
	resp = roundTrip(next)
	a := rawAnswer{Opcode: frame.OpcodeName(frame.Opcode(resp))}
	if frame.Opcode(resp) == frame.OpError {
		a.Code, a.Message, _ = frame.ErrorCode(frame.Body(resp))
	}
	_ = nc.SetDeadline(time.Time{})
	return a, nc
}

// authResponse builds an AUTH_RESPONSE on stream 1 carrying token.
func authResponse(v byte, token string) []byte {
	body := []byte{byte(len(token) >> 24), byte(len(token) >> 16), byte(len(token) >> 8), byte(len(token))}
	return frame.AppendFrame(nil, v, false, 0, 1, frame.OpAuthResponse, append(body, token...))
}

// counter returns the value of the counter name with the given label
// value ("" for an unlabelled counter).
func counter(t testing.TB, reg prometheus.Gatherer, name, label string) float64 {
	t.Helper()
	return promtest.Get(t, reg, name, label)
}
