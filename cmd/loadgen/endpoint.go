package main

import (
	"fmt"
	"io"
	"log"
	"strings"
	"time"

	"github.com/gocql/gocql"
)

// Endpoint is one place to send load: a Cassandra cluster reached directly
// or through the proxy, which gocql sees as a single node. Later versions
// may add TLS, credentials or compression here.
type Endpoint struct {
	Name  string   // label in reports, e.g. "direct" or "proxy"
	Hosts []string // contact points, "host" or "host:port"
}

// parseEndpoint reads NAME=HOST[:PORT][,HOST[:PORT]...].
func parseEndpoint(s string) (Endpoint, error) {
	name, hosts, ok := strings.Cut(s, "=")
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		return Endpoint{}, fmt.Errorf("target %q: want NAME=HOST[:PORT][,HOST...]", s)
	}
	list, err := splitHosts(hosts)
	if err != nil {
		return Endpoint{}, fmt.Errorf("target %q: %w", s, err)
	}
	return Endpoint{Name: name, Hosts: list}, nil
}

func (e Endpoint) String() string { return e.Name + "=" + strings.Join(e.Hosts, ",") }

// sessionOptions are the knobs that differ from gocql's defaults. Everything
// else stays at gocql's defaults on purpose: the benchmark should measure
// what an application with a stock driver configuration would see.
type sessionOptions struct {
	Keyspace    string // empty for setup's schema session
	Proto       int
	Timeout     time.Duration
	Consistency gocql.Consistency
	Log         io.Writer // gocql's own log lines (reconnects and such)
}

func sessionOptionsFrom(cfg *Config, keyspace string, log io.Writer) sessionOptions {
	return sessionOptions{
		Keyspace:    keyspace,
		Proto:       cfg.Proto,
		Timeout:     cfg.Timeout,
		Consistency: gocql.One,
		Log:         log,
	}
}

// Session connects to the endpoint. The caller closes the session.
func (e Endpoint) Session(opts sessionOptions) (*gocql.Session, error) {
	cluster := gocql.NewCluster(e.Hosts...)
	cluster.Keyspace = opts.Keyspace
	cluster.ProtoVersion = opts.Proto
	cluster.Timeout = opts.Timeout
	cluster.Consistency = opts.Consistency
	// A per-cluster logger instead of the package-level gocql.Logger keeps
	// two sessions (compare) from sharing mutable global state.
	cluster.Logger = log.New(opts.Log, "gocql["+e.Name+"]: ", log.LstdFlags)

	s, err := cluster.CreateSession()
	if err != nil {
		return nil, fmt.Errorf("connect to %s (%s): %w", strings.Join(e.Hosts, ","), e.Name, err)
	}
	return s, nil
}
