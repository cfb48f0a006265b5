package integration

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/cqlgate/cqlgate/pkg/frame"
)

// awaitSchemaEvent reads from r until a SCHEMA_CHANGE EVENT about
// keyspace.name arrives, checking every frame on the way is an EVENT on
// stream -1 in r's protocol version.
func awaitSchemaEvent(t *testing.T, r *rawConn, change, target, keyspace, name string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		f, err := r.readFrame(time.Until(deadline))
		if err != nil {
			t.Fatalf("v%d client: no %s %s EVENT for %s.%s within %s: %v", r.version, change, target, keyspace, name, timeout, err)
		}
		if frame.Stream(f) != frame.EventStream || frame.Opcode(f) != frame.OpEvent {
			t.Fatalf("v%d client: got %s, want an EVENT on stream -1", r.version, describe(f))
		}
		if f[0] != r.version|frame.ResponseBit {
			t.Fatalf("v%d client: EVENT with version byte 0x%02x, want 0x%02x", r.version, f[0], r.version|frame.ResponseBit)
		}
		typ, ch, tg, ks, n, err := eventInfo(f)
		if err != nil {
			t.Fatalf("v%d client: undecodable EVENT: %v", r.version, err)
		}
		if typ != "SCHEMA_CHANGE" {
			t.Fatalf("v%d client: got a %s EVENT, want only SCHEMA_CHANGE", r.version, typ)
		}
		if ch == change && tg == target && ks == keyspace && n == name {
			return
		}
	}
}

// expectSilence checks that nothing arrives on r for d.
func expectSilence(t *testing.T, r *rawConn, d time.Duration, why string) {
	t.Helper()
	f, err := r.readFrame(d)
	if err == nil {
		t.Fatalf("%s: got %s, want nothing", why, describe(f))
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() && !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%s: connection failed (%v), want it open and silent", why, err)
	}
}

// TestSchemaChangeEvents registers raw v3, v4 and v5 clients, with and
// without compression, for SCHEMA_CHANGE and checks the EVENTs for a table
// created and altered from another session reach each, in its own protocol
// version and compression, and reach no client that did not register for
// them.
func TestSchemaChangeEvents(t *testing.T) {
	c := singleCluster.Get(t)
	p := startProxy(t, c.Addrs, nil)
	admin := proxySession(t, p, nil)
	recreateKeyspace(t, admin, "it_events", 1)

	var registered []*rawConn
	for _, cl := range []struct {
		v    byte
		comp string
	}{{3, ""}, {4, ""}, {5, ""}, {4, "lz4"}, {4, "snappy"}, {5, "lz4"}} {
		r := dialRaw(t, p.Addr, cl.v)
		r.startup(map[string]string{"COMPRESSION": cl.comp})
		resp := r.roundTrip(frame.AppendRegister(nil, cl.v, 3, []string{"SCHEMA_CHANGE", "TOPOLOGY_CHANGE", "STATUS_CHANGE"}))
		if frame.Opcode(resp) != frame.OpReady {
			t.Fatalf("v%d %s REGISTER: got %s, want READY", cl.v, cl.comp, describe(resp))
		}
		registered = append(registered, r)
	}
	silent := dialRaw(t, p.Addr, 4)
	silent.startup(nil)
	topoOnly := dialRaw(t, p.Addr, 4)
	topoOnly.startup(nil)
	if resp := topoOnly.roundTrip(frame.AppendRegister(nil, 4, 1, []string{"TOPOLOGY_CHANGE", "STATUS_CHANGE"})); frame.Opcode(resp) != frame.OpReady {
		t.Fatalf("REGISTER TOPOLOGY_CHANGE, STATUS_CHANGE: got %s, want READY", describe(resp))
	}

	mustExec(t, admin, "CREATE TABLE it_events.created (k int PRIMARY KEY)")
	for _, r := range registered {
		awaitSchemaEvent(t, r, "CREATED", "TABLE", "it_events", "created", 10*time.Second)
	}
	mustExec(t, admin, "ALTER TABLE it_events.created ADD v text")
	for _, r := range registered {
		awaitSchemaEvent(t, r, "UPDATED", "TABLE", "it_events", "created", 10*time.Second)
	}
	expectSilence(t, silent, time.Second, "client that did not REGISTER")
	expectSilence(t, topoOnly, 100*time.Millisecond, "client registered for TOPOLOGY_CHANGE and STATUS_CHANGE only")

	// The registered connections still answer requests.
	for _, r := range registered {
		if rs := r.mustRows("SELECT k FROM it_events.created"); len(rs.rows) != 0 {
			t.Errorf("v%d: SELECT from the new table: got %d rows, want 0", r.version, len(rs.rows))
		}
	}
}

// TestDriverMetadataSeesNewTable checks gocql's schema metadata follows
// changes made by another session. gocql caches keyspace metadata and only
// drops the cache when a SCHEMA_CHANGE event arrives on its control
// connection, so this fails unless the proxy forwards events to drivers.
func TestDriverMetadataSeesNewTable(t *testing.T) {
	c := singleCluster.Get(t)
	p := startProxy(t, c.Addrs, nil)
	admin := proxySession(t, p, nil)
	recreateKeyspace(t, admin, "it_meta", 1, "CREATE TABLE it_meta.old (k int PRIMARY KEY)")
	s := proxySession(t, p, nil)

	md, err := s.KeyspaceMetadata("it_meta")
	if err != nil {
		t.Fatalf("KeyspaceMetadata: %v", err)
	}
	if _, ok := md.Tables["old"]; !ok {
		t.Fatalf("metadata before the change: tables %v, want old", tableNames(md))
	}
	if _, ok := md.Tables["fresh"]; ok {
		t.Fatalf("metadata before the change already has table fresh")
	}

	mustExec(t, admin, "CREATE TABLE it_meta.fresh (k int, c text, v list<int>, PRIMARY KEY (k, c))")
	waitFor(t, 15*time.Second, "gocql metadata to show it_meta.fresh", func() (bool, string) {
		md, err := s.KeyspaceMetadata("it_meta")
		if err != nil {
			return false, err.Error()
		}
		tm, ok := md.Tables["fresh"]
		if !ok {
			return false, "tables " + tableNames(md)
		}
		if len(tm.PartitionKey) != 1 || tm.PartitionKey[0].Name != "k" || len(tm.ClusteringColumns) != 1 || tm.ClusteringColumns[0].Name != "c" {
			return false, "wrong primary key"
		}
		if col, ok := tm.Columns["v"]; !ok || col.Type.Type() != gocql.TypeList {
			return false, "column v missing or not a list"
		}
		return true, ""
	})

	mustExec(t, admin, "DROP TABLE it_meta.old")
	waitFor(t, 15*time.Second, "gocql metadata to drop it_meta.old", func() (bool, string) {
		md, err := s.KeyspaceMetadata("it_meta")
		if err != nil {
			return false, err.Error()
		}
		_, ok := md.Tables["old"]
		return !ok, "tables " + tableNames(md)
	})
}

func tableNames(md *gocql.KeyspaceMetadata) string {
	var names []string
	for n := range md.Tables {
		names = append(names, n)
	}
	return "[" + joinSorted(names) + "]"
}
