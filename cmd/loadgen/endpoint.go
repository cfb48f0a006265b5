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
	Keyspace    string             // empty for setup's schema session
	Proto       int                // 0 negotiates
	Timeout     time.Duration      // 0 keeps gocql's default (11s)
	Consistency *gocql.Consistency // nil keeps gocql's default (QUORUM)
	NumConns    int                // 0 keeps gocql's default (2 per host)
	Username    string             // "" for no login
	Password    string
	Log         io.Writer // gocql's own log lines (reconnects and such)
}

// sessionOptionsFrom maps the flags; cfg was validated, so its consistency
// parses.
func sessionOptionsFrom(cfg *Config, keyspace string, log io.Writer) sessionOptions {
	cl, _ := cfg.consistency()
	return sessionOptions{
		Keyspace:    keyspace,
		Proto:       cfg.Proto,
		Timeout:     cfg.Timeout,
		Consistency: cl,
		NumConns:    cfg.NumConns,
		Username:    cfg.Username,
		Password:    cfg.Password,
		Log:         log,
	}
}

// Session connects to the endpoint. The caller closes the session.
func (e Endpoint) Session(opts sessionOptions) (*gocql.Session, error) {
	cluster := gocql.NewCluster(e.Hosts...)
	cluster.Keyspace = opts.Keyspace
	cluster.ProtoVersion = opts.Proto
	if opts.Timeout > 0 {
		cluster.Timeout = opts.Timeout
	}
	if opts.Consistency != nil {
		cluster.Consistency = *opts.Consistency
	}
	if opts.NumConns > 0 {
		cluster.NumConns = opts.NumConns
	}
	if opts.Username != "" {
		cluster.Authenticator = gocql.PasswordAuthenticator{Username: opts.Username, Password: opts.Password}
	}
	// A per-cluster logger instead of the package-level gocql.Logger keeps
	// two sessions (compare) from sharing mutable global state.
	cluster.Logger = log.New(opts.Log, "gocql["+e.Name+"]: ", log.LstdFlags)

	s, err := cluster.CreateSession()
	if err != nil {
		return nil, fmt.Errorf("connect to %s (%s): %w", strings.Join(e.Hosts, ","), e.Name, err)
	}
	return s, nil
}
