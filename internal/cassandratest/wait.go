package cassandratest

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/gocql/gocql"
)

// ClusterConfig returns a gocql (v1.7, native protocol v4) configuration for the given nodes
// (0-based; all nodes if none are given), with the superuser credentials on an Auth cluster.
// Only those nodes are used (host filter, no initial peer lookup) and gocql's logging is off.
func (c *Cluster) ClusterConfig(nodes ...int) *gocql.ClusterConfig {
	var hosts []string
	if len(nodes) == 0 {
		hosts = append(hosts, c.Addrs...)
	} else {
		for _, i := range nodes {
			hosts = append(hosts, c.Addrs[i])
		}
	}
	cfg := gocql.NewCluster(hosts...)
	cfg.ProtoVersion = 4
	cfg.Timeout = 10 * time.Second
	cfg.ConnectTimeout = 5 * time.Second
	cfg.NumConns = 1
	cfg.Consistency = gocql.One
	cfg.Logger = nopLogger{}
	if len(nodes) > 0 {
		cfg.DisableInitialHostLookup = true
		var ips []string
		for _, i := range nodes {
			ips = append(ips, c.Hosts[i])
		}
		cfg.HostFilter = gocql.WhiteListHostFilter(ips...)
	}
	if c.Auth {
		cfg.Authenticator = gocql.PasswordAuthenticator{Username: c.Username, Password: c.Password}
	}
	return cfg
}

type nopLogger struct{}

func (nopLogger) Print(...interface{})          {}
func (nopLogger) Printf(string, ...interface{}) {}
func (nopLogger) Println(...interface{})        {}

// waitCluster waits until every node answers a query (after the login on an Auth cluster) and
// sees all other nodes in system.peers, so clients discover the whole ring.
func (c *Cluster) waitCluster(ctx context.Context) error {
	for i := range c.Addrs {
		if err := c.waitNode(ctx, i, true); err != nil {
			return err
		}
	}
	return nil
}

// waitNode waits until node i answers SELECT on system.local (the superuser login can fail
// for a moment after the CQL port opens); with peers, also until its system.peers lists every
// other node of the cluster.
func (c *Cluster) waitNode(ctx context.Context, i int, peers bool) error {
	var last error
	start := time.Now()
	for {
		last = c.checkNode(ctx, i, peers)
		if last == nil {
			return nil
		}
		if time.Since(start) > 15*time.Second && int(time.Since(start).Seconds())%15 == 0 {
			fmt.Fprintf(os.Stderr, "cassandratest: still waiting for node %d (%s): %v\n", i, c.Addrs[i], last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cassandratest: node %d (%s) not ready: %v (%w)", i, c.Addrs[i], last, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (c *Cluster) checkNode(ctx context.Context, i int, peers bool) error {
	s, err := c.ClusterConfig(i).CreateSession()
	if err != nil {
		return err
	}
	defer s.Close()
	var version string
	if err := s.Query("SELECT release_version FROM system.local").WithContext(ctx).Scan(&version); err != nil {
		return err
	}
	if !peers || len(c.Hosts) == 1 {
		return nil
	}
	var got []string
	iter := s.Query("SELECT peer FROM system.peers").WithContext(ctx).Iter()
	var peer string
	for iter.Scan(&peer) {
		got = append(got, peer)
	}
	if err := iter.Close(); err != nil {
		return err
	}
	sort.Strings(got)
	var want []string
	for j, h := range c.Hosts {
		if j != i {
			want = append(want, h)
		}
	}
	sort.Strings(want)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		return fmt.Errorf("system.peers is [%s], want [%s]", strings.Join(got, ","), strings.Join(want, ","))
	}
	return nil
}
