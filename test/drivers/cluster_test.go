package drivers

import (
	"context"

	"github.com/cqlgate/cqlgate/internal/cassandratest"
)

// startShared starts (or, through CQLGATE_TEST_CASSANDRA_<name>, reuses) the
// named cluster with internal/cassandratest and returns its node addresses.
func startShared(ctx context.Context, name string, nodes int) ([]string, func(), error) {
	c, cleanup, err := cassandratest.Shared(ctx, name, cassandratest.Options{Nodes: nodes})
	if err != nil {
		return nil, nil, err
	}
	return c.Addrs, cleanup, nil
}
