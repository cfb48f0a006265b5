package backend

// Schema agreement: waiting until every reachable node reports the same
// schema version after a DDL.

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// WaitSchemaAgreement polls every reachable node for the schema_version
// in its own system.local until they all report the same one, which it
// returns, or ctx ends.
// The proxy looks like a single node to drivers, so their own agreement
// check is trivially true; this is the check that counts. Each node is asked
// directly, over its pool connection: the control node's gossip view of its
// peers can still show the old schema everywhere right after a DDL ran on
// another node, and a node that is down is left out instead of waited for.
func (cl *Cluster) WaitSchemaAgreement(ctx context.Context) ([16]byte, error) {
	const interval = 200 * time.Millisecond
	for {
		version, agreed, err := cl.schemaAgreed(ctx)
		if err == nil && agreed {
			return version, nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return version, fmt.Errorf("schema agreement: %w", err)
			}
			return version, fmt.Errorf("schema agreement: %w", ctx.Err())
		case <-time.After(interval):
		}
	}
}

func (cl *Cluster) schemaAgreed(ctx context.Context) (version [16]byte, agreed bool, err error) {
	v := cl.Version()
	pool, err := cl.Pool(ctx, v, "")
	if err != nil {
		return version, false, err
	}
	var want string
	asked := 0
	for _, np := range *pool.nodes.Load() {
		c, _ := np.leastLoaded()
		if c == nil || !np.node.Up() {
			continue
		}
		rows, err := c.query(ctx, v, "SELECT schema_version FROM system.local WHERE key='local'")
		if err != nil {
			// The node may be going away; its reconnection will tell.
			continue
		}
		if len(rows) != 1 {
			return version, false, fmt.Errorf("system.local on %s: %d rows", np.node.Addr, len(rows))
		}
		sv := string(rows[0].bytes("schema_version"))
		if len(sv) != len(version) {
			return version, false, fmt.Errorf("system.local on %s: schema_version of %d bytes", np.node.Addr, len(sv))
		}
		if asked > 0 && sv != want {
			return version, false, nil
		}
		want = sv
		asked++
	}
	if asked == 0 {
		return version, false, errors.New("no node answered")
	}
	copy(version[:], want)
	return version, true, nil
}
