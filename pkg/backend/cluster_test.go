package backend

import (
	"bytes"
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/datastax/go-cassandra-native-protocol/datatype"
	"github.com/datastax/go-cassandra-native-protocol/message"
	"github.com/datastax/go-cassandra-native-protocol/primitive"

	"github.com/cqlgate/cqlgate/pkg/frame"
)

// rowsBody encodes a RESULT Rows body of text columns.
func rowsBody(t testing.TB, table string, cols []string, rows ...[]string) []byte {
	t.Helper()
	md := &message.RowsMetadata{ColumnCount: int32(len(cols))}
	for i, c := range cols {
		md.Columns = append(md.Columns, &message.ColumnMetadata{Keyspace: "system", Table: table, Name: c, Index: int32(i), Type: datatype.Varchar})
	}
	res := &message.RowsResult{Metadata: md}
	for _, r := range rows {
		var row message.Row
		for _, v := range r {
			row = append(row, []byte(v))
		}
		res.Data = append(res.Data, row)
	}
	var b bytes.Buffer
	if err := resultCodec.Encode(res, &b, primitive.ProtocolVersion4); err != nil {
		t.Fatalf("encode rows: %v", err)
	}
	return b.Bytes()
}

// systemTables answers the control connection's topology queries for a
// one-node cluster, and reports whether it did.
func systemTables(t testing.TB, r *fakeReq) bool {
	q := r.Query()
	switch {
	case strings.HasPrefix(q, "SELECT * FROM system.local"):
		r.Answer(frame.OpResult, rowsBody(t, "local", []string{"key"}, []string{"local"}))
	case strings.HasPrefix(q, "SELECT * FROM system.peers"):
		r.Answer(frame.OpResult, rowsBody(t, "peers_v2", []string{"peer"}))
	default:
		return false
	}
	return true
}

// A topology refresh can take seconds (a slow control node); request
// expiry on the pools must keep its one-second cadence meanwhile.
func TestSlowRefreshDoesNotDelayExpiry(t *testing.T) {
	var blockLocal atomic.Bool
	heldLocal := make(chan *fakeReq, 1)
	held := make(chan *fakeReq, 1)
	n := newFakeNode(t, func(r *fakeReq) fakeAction {
		q := r.Query()
		switch {
		case strings.HasPrefix(q, "SELECT * FROM system.local") && blockLocal.Load():
			heldLocal <- r
			return fakeHold
		case systemTables(t, r):
			return fakeHold // answered already
		case q == "SELECT slow":
			held <- r
			return fakeHold
		}
		return fakeVoid
	})
	// RequestTimeout enables expiry; the request below brings its own
	// deadline.
	cl := connectCluster(t, Config{ContactPoints: []string{n.Addr()}, RequestTimeout: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	pool, err := cl.Pool(ctx, frame.V4, "")
	if err != nil {
		t.Fatal(err)
	}

	blockLocal.Store(true)
	cl.requestRefresh()
	waitFor(t, heldLocal, "system.local query of the refresh")

	conn, _ := pool.Pick(nil)
	if conn == nil {
		t.Fatal("no pool connection")
	}
	rec := newRecorder(2)
	if err := conn.QueueBy(queryFrame("SELECT slow"), rec, time.Now().UnixNano()); err != nil {
		t.Fatal(err)
	}
	conn.Flush()
	waitFor(t, held, "the request at the node")
	waitFor(t, rec.timeouts, "OnTimeout while a topology refresh is blocked")
}

// connectCluster connects a Cluster with cfg (v4, no heartbeats, generous
// dial timeouts unless cfg says otherwise), closed when the test ends.
func connectCluster(t *testing.T, cfg Config) *Cluster {
	t.Helper()
	if cfg.MaxVersion == 0 {
		cfg.MaxVersion = frame.V4
	}
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = -1
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 30 * time.Second
	}
	cl, err := NewCluster(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if err := cl.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
