package systables

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"reflect"
	"testing"

	"github.com/datastax/go-cassandra-native-protocol/datatype"
	"github.com/datastax/go-cassandra-native-protocol/message"
	"github.com/datastax/go-cassandra-native-protocol/primitive"
)

var proxyLocal = Node{
	HostID:     HostID("test-cluster/127.0.0.1:9142"),
	Address:    net.ParseIP("127.0.0.1"), // 16-byte form on purpose: must be written as 4 bytes
	Port:       9142,
	DataCenter: "proxy-dc",
	Rack:       "proxy-rack",
	Tokens:     RingTokens(3)[:1],
}

var proxyPeers = []Node{
	{
		HostID: HostID("test-cluster/127.0.0.2:9142"), Address: net.ParseIP("127.0.0.2"), Port: 9142,
		DataCenter: "proxy-dc", Rack: "proxy-rack", Tokens: RingTokens(3)[1:2],
	},
	{
		HostID: HostID("test-cluster/[::1]:9143"), Address: net.ParseIP("::1"), Port: 9143,
		DataCenter: "", Rack: "", Tokens: RingTokens(3)[2:],
	},
}

// driverLocalQueries are the column lists drivers select from system.local.
var driverLocalQueries = []struct {
	name  string
	query string // for documentation
	cols  []string
}{
	{"select star (gocql, java, python)", "SELECT * FROM system.local WHERE key='local'", nil},
	{"schema agreement", "SELECT schema_version FROM system.local WHERE key='local'", []string{"schema_version"}},
	{"identity subset, reordered", "SELECT tokens, rpc_address, host_id, schema_version, data_center, rack, rpc_port FROM system.local",
		[]string{"tokens", "rpc_address", "host_id", "schema_version", "data_center", "rack", "rpc_port"}},
	{"gocql host info columns", "SELECT broadcast_address, cluster_name, data_center, rack, host_id, tokens, release_version, partitioner, rpc_address, listen_address, schema_version FROM system.local",
		[]string{"broadcast_address", "cluster_name", "data_center", "rack", "host_id", "tokens", "release_version", "partitioner", "rpc_address", "listen_address", "schema_version"}},
	{"ports only", "SELECT broadcast_port, listen_port, rpc_port FROM system.local", []string{"broadcast_port", "listen_port", "rpc_port"}},
}

// bodyVariants are the shapes a RESULT can take around the same columns.
var bodyVariants = []struct {
	name string
	opts rowsOpts
	v5   bool // only for protocol v5
}{
	{name: "global spec", opts: rowsOpts{nRows: 1}},
	{name: "per-column spec", opts: rowsOpts{nRows: 1, perColumn: true}},
	{name: "has more pages", opts: rowsOpts{nRows: 1, pagingState: []byte{0xde, 0xad, 0xbe, 0xef, 0x00}}},
	{name: "two rows", opts: rowsOpts{nRows: 2}},
	{name: "no rows", opts: rowsOpts{nRows: 0}},
	{name: "trailing bytes", opts: rowsOpts{nRows: 1, trailing: []byte{1, 2, 3}}},
	{name: "metadata changed", opts: rowsOpts{nRows: 1, metadataID: []byte{9, 8, 7, 6}}, v5: true},
	{name: "metadata changed, paging, per-column", opts: rowsOpts{nRows: 1, metadataID: []byte{9, 8, 7, 6}, pagingState: []byte{1}, perColumn: true}, v5: true},
}

func TestRewriteLocal(t *testing.T) {
	locals := []struct {
		name string
		node Node
	}{
		{"with dc and rack", proxyLocal},
		{"without dc and rack", func() Node { n := proxyLocal; n.DataCenter, n.Rack = "", ""; return n }()},
		{"ipv6", func() Node { n := proxyLocal; n.Address = net.ParseIP("fd00::1"); return n }()},
	}
	for _, version := range versions {
		for _, q := range driverLocalQueries {
			for _, bv := range bodyVariants {
				if bv.v5 && version < 5 {
					continue
				}
				for _, l := range locals {
					t.Run(fmt.Sprintf("v%d/%s/%s/%s", version, q.name, bv.name, l.name), func(t *testing.T) {
						cols := localCols
						if q.cols != nil {
							cols = pick(t, localCols, q.cols...)
						}
						opts := bv.opts
						opts.table = "local"
						in := buildRows(t, version, cols, opts)
						inCopy := bytes.Clone(in)
						rw := &Rewriter{Local: l.node, Peers: proxyPeers}
						out, err := rw.RewriteLocal(version, in)
						if err != nil {
							t.Fatalf("RewriteLocal: %v", err)
						}
						if !bytes.Equal(in, inCopy) {
							t.Fatal("RewriteLocal modified its input")
						}
						checkLocal(t, version, cols, opts, l.node, in, out)
					})
				}
			}
		}
	}
}

// checkLocal decodes a rewritten system.local body and checks every value.
func checkLocal(t *testing.T, version byte, cols []colDef, opts rowsOpts, node Node, in, out []byte) {
	t.Helper()
	if got, want := out[4:8], in[4:8]; !bytes.Equal(got, want) {
		t.Errorf("flags = %x, want %x", got, want)
	}
	if !bytes.HasSuffix(out, opts.trailing) {
		t.Errorf("trailing bytes %x lost: body ends with %x", opts.trailing, out[max(0, len(out)-8):])
	}
	want := decodeRows(t, version, in)
	got := decodeRows(t, version, out)
	if !reflect.DeepEqual(got.Metadata, want.Metadata) {
		t.Errorf("metadata = %+v, want %+v", got.Metadata, want.Metadata)
	}
	if len(got.Data) != opts.nRows {
		t.Fatalf("%d rows, want %d", len(got.Data), opts.nRows)
	}
	for r, row := range got.Data {
		if len(row) != len(cols) {
			t.Fatalf("row %d has %d cells, want %d", r, len(row), len(cols))
		}
		for i, c := range cols {
			cell := row[i]
			var wantV any
			switch c.name {
			case "rpc_address", "broadcast_address", "listen_address":
				wantV = node.Address
				if wantLen := len(node.Address.To4()); wantLen != 0 && len(cell) != 4 {
					t.Errorf("row %d %s: %d bytes, want 4", r, c.name, len(cell))
				}
			case "rpc_port", "broadcast_port", "listen_port":
				wantV = int32(node.Port)
			case "host_id":
				wantV = primitive.UUID(node.HostID)
			case "tokens":
				wantV = node.Tokens
			case "data_center":
				wantV = node.DataCenter
				if wantV == "" {
					wantV = c.value
				}
			case "rack":
				wantV = node.Rack
				if wantV == "" {
					wantV = c.value
				}
			default:
				if wantCell := want.Data[r][i]; !bytes.Equal(cell, wantCell) {
					t.Errorf("row %d %s = %x, want it unchanged: %x", r, c.name, cell, wantCell)
				}
				continue
			}
			gotV := decodeValue(t, c.typ, cell, version)
			if ip, ok := wantV.(net.IP); ok {
				if gotIP, _ := gotV.(net.IP); !gotIP.Equal(ip) {
					t.Errorf("row %d %s = %v, want %v", r, c.name, gotV, wantV)
				}
				continue
			}
			if !reflect.DeepEqual(gotV, wantV) {
				t.Errorf("row %d %s = %v, want %v", r, c.name, gotV, wantV)
			}
		}
	}
	// Nothing of the real node's identity may survive.
	for _, secret := range [][]byte{realHostID[:], []byte(realTokens[0])} {
		if bytes.Contains(out, secret) {
			t.Errorf("rewritten body still contains %x", secret)
		}
	}
}

// driverPeersQueries are the column lists drivers select from the peers
// tables.
var driverPeersQueries = []struct {
	name  string
	table string
	cols  []colDef
}{
	{"peers select star", "peers", peersCols},
	{"peers_v2 select star", "peers_v2", peersV2Cols},
	{"gocql peers", "peers", nil}, // filled in init: peer, data_center, rack, host_id, tokens, release_version, rpc_address, schema_version
	{"schema agreement", "peers", nil},
	{"peers_v2 schema agreement", "peers_v2", nil},
	{"unknown and aliased columns", "peers", append(append([]colDef{}, peersCols[:2]...),
		colDef{"foo", datatype.Varchar, "x"}, colDef{"system.tojson(peer)", datatype.Varchar, `"10.0.0.6"`},
		colDef{"writetime(rack)", datatype.Bigint, int64(1)}, colDef{"[json]", datatype.Varchar, "{}"})},
}

func init() {
	driverPeersQueries[2].cols = pickNoT(peersCols, "peer", "data_center", "rack", "host_id", "tokens", "release_version", "rpc_address", "schema_version")
	driverPeersQueries[3].cols = pickNoT(peersCols, "peer", "rpc_address", "schema_version")
	driverPeersQueries[4].cols = pickNoT(peersV2Cols, "peer", "peer_port", "native_address", "native_port", "schema_version")
}

func pickNoT(cols []colDef, names ...string) []colDef {
	var out []colDef
	for _, n := range names {
		for _, c := range cols {
			if c.name == n {
				out = append(out, c)
			}
		}
	}
	if len(out) != len(names) {
		panic("pickNoT: missing column")
	}
	return out
}

func TestRewritePeers(t *testing.T) {
	peerSets := []struct {
		name  string
		peers []Node
	}{
		{"single endpoint", nil},
		{"one peer", proxyPeers[:1]},
		{"two peers", proxyPeers},
	}
	schema := [16]byte{0x99, 1, 2, 3, 4, 5, 0x46, 7, 0x88, 9, 10, 11, 12, 13, 14, 15}
	for _, version := range versions {
		for _, q := range driverPeersQueries {
			for _, bv := range bodyVariants {
				if bv.v5 && version < 5 {
					continue
				}
				for _, ps := range peerSets {
					for _, release := range []string{"5.0.2", ""} {
						t.Run(fmt.Sprintf("v%d/%s/%s/%s/release=%q", version, q.name, bv.name, ps.name, release), func(t *testing.T) {
							opts := bv.opts
							opts.table = q.table
							in := buildRows(t, version, q.cols, opts)
							inCopy := bytes.Clone(in)
							rw := &Rewriter{Local: proxyLocal, Peers: ps.peers}
							out, err := rw.RewritePeers(version, in, schema, release)
							if err != nil {
								t.Fatalf("RewritePeers: %v", err)
							}
							if !bytes.Equal(in, inCopy) {
								t.Fatal("RewritePeers modified its input")
							}
							checkPeers(t, version, q.cols, opts, ps.peers, schema, release, in, out)
						})
					}
				}
			}
		}
	}
}

func checkPeers(t *testing.T, version byte, cols []colDef, opts rowsOpts, peers []Node, schema [16]byte, release string, in, out []byte) {
	t.Helper()
	inFlags := int32(binary.BigEndian.Uint32(in[4:]))
	if got, want := int32(binary.BigEndian.Uint32(out[4:])), inFlags&^0x02; got != want {
		t.Errorf("flags = %#x, want %#x", got, want)
	}
	if !bytes.HasSuffix(out, opts.trailing) {
		t.Errorf("trailing bytes %x lost", opts.trailing)
	}
	want := decodeRows(t, version, in)
	got := decodeRows(t, version, out)
	wantMD := *want.Metadata
	wantMD.PagingState = nil
	if !reflect.DeepEqual(got.Metadata, &wantMD) {
		t.Errorf("metadata = %+v, want %+v", got.Metadata, &wantMD)
	}
	if len(got.Data) != len(peers) {
		t.Fatalf("%d rows, want %d", len(got.Data), len(peers))
	}
	for r, row := range got.Data {
		p := peers[r]
		if len(row) != len(cols) {
			t.Fatalf("row %d has %d cells, want %d", r, len(row), len(cols))
		}
		for i, c := range cols {
			var wantV any
			switch c.name {
			case "peer", "rpc_address", "native_address", "preferred_ip":
				if gotIP, _ := decodeValue(t, c.typ, row[i], version).(net.IP); !gotIP.Equal(p.Address) {
					t.Errorf("row %d %s = %v, want %v", r, c.name, gotIP, p.Address)
				}
				wantLen := 16
				if p.Address.To4() != nil {
					wantLen = 4
				}
				if len(row[i]) != wantLen {
					t.Errorf("row %d %s: %d bytes, want %d", r, c.name, len(row[i]), wantLen)
				}
				continue
			case "peer_port", "native_port", "preferred_port":
				wantV = int32(p.Port)
			case "host_id":
				wantV = primitive.UUID(p.HostID)
			case "tokens":
				wantV = p.Tokens
			case "data_center":
				wantV = p.DataCenter
			case "rack":
				wantV = p.Rack
			case "schema_version":
				wantV = primitive.UUID(schema)
			case "release_version":
				wantV = release
			default:
				wantV = nil
			}
			if wantV == "" {
				wantV = nil // empty text is written as null
			}
			var gotV any
			if row[i] != nil {
				gotV = decodeValue(t, c.typ, row[i], version)
			}
			if !reflect.DeepEqual(gotV, wantV) {
				t.Errorf("row %d %s = %#v, want %#v", r, c.name, gotV, wantV)
			}
		}
	}
	if bytes.Contains(out, []byte{0x11, 0x12, 0x13}) || bytes.Contains(out, []byte("10.0.0.6")) {
		t.Error("rewritten body still contains a real peer's identity")
	}
}

func TestParseLocal(t *testing.T) {
	full := LocalInfo{
		SchemaVersion:  realSchema,
		ReleaseVersion: "5.0.2",
		DataCenter:     "dc-real",
		Rack:           "rack-real",
		Partitioner:    "org.apache.cassandra.dht.Murmur3Partitioner",
		ClusterName:    "Test Cluster",
	}
	nullRelease := pickNoT(localCols, "schema_version", "release_version")
	nullRelease[1].value = nil
	for _, version := range versions {
		for _, tc := range []struct {
			name string
			cols []colDef
			opts rowsOpts
			want LocalInfo
		}{
			{"select star", localCols, rowsOpts{nRows: 1}, full},
			{"per-column spec, paging, trailing", localCols, rowsOpts{nRows: 1, perColumn: true, pagingState: []byte{1}, trailing: []byte{0}}, full},
			{"schema only", pickNoT(localCols, "schema_version"), rowsOpts{nRows: 1}, LocalInfo{SchemaVersion: realSchema}},
			{"release and dc", pickNoT(localCols, "rack", "release_version", "data_center"), rowsOpts{nRows: 1},
				LocalInfo{ReleaseVersion: "5.0.2", DataCenter: "dc-real", Rack: "rack-real"}},
			{"null release", nullRelease, rowsOpts{nRows: 1}, LocalInfo{SchemaVersion: realSchema}},
			{"no rows", localCols, rowsOpts{}, LocalInfo{}},
			{"two rows", localCols, rowsOpts{nRows: 2}, full},
		} {
			t.Run(fmt.Sprintf("v%d/%s", version, tc.name), func(t *testing.T) {
				tc.opts.table = "local"
				got, err := ParseLocal(version, buildRows(t, version, tc.cols, tc.opts))
				if err != nil {
					t.Fatalf("ParseLocal: %v", err)
				}
				if got != tc.want {
					t.Errorf("ParseLocal = %+v, want %+v", got, tc.want)
				}
			})
		}
	}
}

// encodeResult encodes any RESULT message with the library.
func encodeResult(t testing.TB, version byte, msg message.Message) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := resultCodec.Encode(msg, &buf, primitive.ProtocolVersion(version)); err != nil {
		t.Fatalf("encoding %v: %v", msg, err)
	}
	return buf.Bytes()
}

func TestNotRowsAndNoMetadata(t *testing.T) {
	rw := &Rewriter{Local: proxyLocal, Peers: proxyPeers}
	for _, version := range versions {
		noMD := &message.RowsResult{
			Metadata: &message.RowsMetadata{ColumnCount: 2},
			Data:     message.RowSet{{realIP, realHostID[:]}},
		}
		for _, tc := range []struct {
			name       string
			body       []byte
			local      error // nil: returned unchanged
			peers      error
			parseLocal error
		}{
			{"void", encodeResult(t, version, &message.VoidResult{}), nil, nil, ErrNotRows},
			{"set keyspace", encodeResult(t, version, &message.SetKeyspaceResult{Keyspace: "system"}), nil, nil, ErrNotRows},
			{"no metadata", encodeResult(t, version, noMD), nil, ErrNoMetadata, ErrNoMetadata},
		} {
			t.Run(fmt.Sprintf("v%d/%s", version, tc.name), func(t *testing.T) {
				out, err := rw.RewriteLocal(version, tc.body)
				if err != nil || !bytes.Equal(out, tc.body) {
					t.Errorf("RewriteLocal = %x, %v; want the body unchanged", out, err)
				}
				out, err = rw.RewritePeers(version, tc.body, [16]byte{}, "")
				if tc.peers == nil && (err != nil || !bytes.Equal(out, tc.body)) {
					t.Errorf("RewritePeers = %x, %v; want the body unchanged", out, err)
				}
				if tc.peers != nil && !errors.Is(err, tc.peers) {
					t.Errorf("RewritePeers error = %v, want %v", err, tc.peers)
				}
				if _, err := ParseLocal(version, tc.body); !errors.Is(err, tc.parseLocal) {
					t.Errorf("ParseLocal error = %v, want %v", err, tc.parseLocal)
				}
			})
		}
	}
}

func TestRewriteErrors(t *testing.T) {
	withType := func(cols []colDef, name string, dt datatype.DataType, v any) []colDef {
		out := append([]colDef{}, cols...)
		for i := range out {
			if out[i].name == name {
				out[i].typ, out[i].value = dt, v
			}
		}
		return out
	}
	extra := func(cols []colDef, c colDef) []colDef { return append(append([]colDef{}, cols...), c) }
	noAddr := proxyLocal
	noAddr.Address = nil
	badPort := proxyLocal
	badPort.Port = 70000
	for _, version := range versions {
		for _, tc := range []struct {
			name  string
			cols  []colDef
			node  Node
			local error // expected from RewriteLocal
			peers error // expected from RewritePeers
		}{
			{"rpc_address as text", withType(localCols, "rpc_address", datatype.Varchar, "10.0.0.5"), proxyLocal, ErrUnexpectedType, ErrUnexpectedType},
			{"host_id as timeuuid", withType(localCols, "host_id", datatype.Timeuuid, realHostID), proxyLocal, ErrUnexpectedType, ErrUnexpectedType},
			{"tokens as list", withType(localCols, "tokens", datatype.NewList(datatype.Varchar), realTokens), proxyLocal, ErrUnexpectedType, ErrUnexpectedType},
			{"tokens as set<bigint>", withType(localCols, "tokens", datatype.NewSet(datatype.Bigint), []int64{1}), proxyLocal, ErrUnexpectedType, ErrUnexpectedType},
			{"rpc_port as bigint", withType(localCols, "rpc_port", datatype.Bigint, int64(9042)), proxyLocal, ErrUnexpectedType, nil},
			{"data_center as int", withType(localCols, "data_center", datatype.Int, int32(1)), proxyLocal, ErrUnexpectedType, ErrUnexpectedType},
			{"select json", []colDef{{"[json]", datatype.Varchar, `{"rpc_address": "10.0.0.5"}`}}, proxyLocal, ErrUnsupportedSelection, nil},
			{"toJson(rpc_address)", extra(localCols[:2], colDef{"system.tojson(rpc_address)", datatype.Varchar, `"10.0.0.5"`}), proxyLocal, ErrUnsupportedSelection, nil},
			{"cast(host_id as text)", extra(localCols[:2], colDef{"cast(host_id as text)", datatype.Varchar, "x"}), proxyLocal, ErrUnsupportedSelection, nil},
			{"harmless function", extra(localCols[:2], colDef{"writetime(cluster_name)", datatype.Bigint, int64(1)}), proxyLocal, nil, nil},
			{"nil address", localCols, noAddr, ErrBadNode, ErrBadNode},
			{"nil address, schema only", pickNoT(localCols, "schema_version"), noAddr, nil, nil},
			{"port out of range", localCols, badPort, ErrBadNode, nil},
			{"port out of range (peers_v2 columns)", peersV2Cols, badPort, ErrBadNode, ErrBadNode},
		} {
			t.Run(fmt.Sprintf("v%d/%s", version, tc.name), func(t *testing.T) {
				body := buildRows(t, version, tc.cols, rowsOpts{table: "local", nRows: 1})
				rw := &Rewriter{Local: tc.node, Peers: []Node{tc.node}}
				out, err := rw.RewriteLocal(version, body)
				if !errors.Is(err, tc.local) || (err != nil) != (tc.local != nil) {
					t.Errorf("RewriteLocal error = %v, want %v", err, tc.local)
				}
				if err != nil && out != nil {
					t.Errorf("RewriteLocal returned a body with error %v", err)
				}
				_, err = rw.RewritePeers(version, body, [16]byte{}, "5.0.2")
				if !errors.Is(err, tc.peers) || (err != nil) != (tc.peers != nil) {
					t.Errorf("RewritePeers error = %v, want %v", err, tc.peers)
				}
			})
		}
		t.Run(fmt.Sprintf("v%d/schema_version as text", version), func(t *testing.T) {
			body := buildRows(t, version, withType(localCols, "schema_version", datatype.Varchar, "x"), rowsOpts{table: "local", nRows: 1})
			if _, err := ParseLocal(version, body); !errors.Is(err, ErrUnexpectedType) {
				t.Errorf("ParseLocal error = %v, want %v", err, ErrUnexpectedType)
			}
		})
		t.Run(fmt.Sprintf("v%d/schema_version of 3 bytes", version), func(t *testing.T) {
			body := buildRows(t, version, pickNoT(localCols, "schema_version"), rowsOpts{table: "local", nRows: 1})
			// Patch the cell: length 16 -> 3 and drop 13 bytes.
			cut := len(body) - 16
			body = append(binary.BigEndian.AppendUint32(body[:cut-4:cut-4], 3), 1, 2, 3)
			if _, err := ParseLocal(version, body); !errors.Is(err, ErrMalformed) {
				t.Errorf("ParseLocal error = %v, want %v", err, ErrMalformed)
			}
		})
	}
}

func TestUnsupportedVersion(t *testing.T) {
	body := buildRows(t, 4, localCols, rowsOpts{table: "local", nRows: 1})
	rw := &Rewriter{Local: proxyLocal}
	for _, v := range []byte{0, 1, 2, 6, 0x84} {
		if _, err := rw.RewriteLocal(v, body); !errors.Is(err, ErrUnsupportedVersion) {
			t.Errorf("RewriteLocal(v%d) error = %v, want %v", v, err, ErrUnsupportedVersion)
		}
		if _, err := rw.RewritePeers(v, body, [16]byte{}, ""); !errors.Is(err, ErrUnsupportedVersion) {
			t.Errorf("RewritePeers(v%d) error = %v, want %v", v, err, ErrUnsupportedVersion)
		}
		if _, err := ParseLocal(v, body); !errors.Is(err, ErrUnsupportedVersion) {
			t.Errorf("ParseLocal(v%d) error = %v, want %v", v, err, ErrUnsupportedVersion)
		}
	}
}

// Every strict prefix of a valid body is malformed.
func TestTruncated(t *testing.T) {
	rw := &Rewriter{Local: proxyLocal, Peers: proxyPeers}
	for _, version := range versions {
		opts := rowsOpts{table: "local", nRows: 2, pagingState: []byte{1, 2}}
		if version == 5 {
			opts.metadataID = []byte{3, 4}
		}
		for _, per := range []bool{false, true} {
			opts.perColumn = per
			body := buildRows(t, version, localCols, opts)
			for n := 0; n < len(body); n++ {
				prefix := body[:n:n]
				if _, err := rw.RewriteLocal(version, prefix); !errors.Is(err, ErrMalformed) {
					t.Fatalf("v%d per-column=%v: RewriteLocal(%d of %d bytes) error = %v, want %v", version, per, n, len(body), err, ErrMalformed)
				}
				if _, err := rw.RewritePeers(version, prefix, [16]byte{}, ""); !errors.Is(err, ErrMalformed) {
					t.Fatalf("v%d per-column=%v: RewritePeers(%d of %d bytes) error = %v, want %v", version, per, n, len(body), err, ErrMalformed)
				}
				if _, err := ParseLocal(version, prefix); !errors.Is(err, ErrMalformed) {
					t.Fatalf("v%d per-column=%v: ParseLocal(%d of %d bytes) error = %v, want %v", version, per, n, len(body), err, ErrMalformed)
				}
			}
		}
	}
}

// Hand-made hostile bodies.
func TestMalformed(t *testing.T) {
	be := func(vs ...int) []byte {
		var b []byte
		for _, v := range vs {
			b = binary.BigEndian.AppendUint32(b, uint32(v))
		}
		return b
	}
	short := func(vs ...int) []byte {
		var b []byte
		for _, v := range vs {
			b = binary.BigEndian.AppendUint16(b, uint16(v))
		}
		return b
	}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	nested := cat(be(2, 1, 1), short(0, 0, 1), []byte("c"))
	for i := 0; i < 100; i++ {
		nested = append(nested, 0, 0x20) // list<list<...
	}
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"negative column count", be(2, 0, -1, 0)},
		{"negative rows count", be(2, 4, 0, -1)},
		{"huge column count", cat(be(2, 1, 0x7fffffff), short(0, 0))},
		{"huge rows count", cat(be(2, 1, 1), short(0, 0, 1), []byte("a"), short(9), be(0x7fffffff), be(4, 1))},
		{"unknown type id", cat(be(2, 1, 1), short(0, 0, 1), []byte("a"), short(0x99), be(0))},
		{"types nested too deep", nested},
		{"cell longer than body", cat(be(2, 1, 1), short(0, 0, 1), []byte("a"), short(9), be(1, 100), []byte{1})},
		{"negative paging state", be(2, 2|4, 0, -5, 0)}, // null paging state is accepted; then rows count
	} {
		t.Run(tc.name, func(t *testing.T) {
			rw := &Rewriter{Local: proxyLocal, Peers: proxyPeers}
			for _, version := range versions {
				_, errL := rw.RewriteLocal(version, tc.body)
				_, errP := rw.RewritePeers(version, tc.body, [16]byte{}, "")
				_, errI := ParseLocal(version, tc.body)
				if tc.name == "negative paging state" {
					continue // well-formed enough: just must not panic
				}
				for _, err := range []error{errL, errP, errI} {
					if !errors.Is(err, ErrMalformed) {
						t.Errorf("v%d: error = %v, want %v", version, err, ErrMalformed)
					}
				}
			}
		})
	}
}

func TestRewriteLocalIdempotent(t *testing.T) {
	rw := &Rewriter{Local: proxyLocal}
	for _, version := range versions {
		in := buildRows(t, version, localCols, rowsOpts{table: "local", nRows: 1, perColumn: true})
		once, err := rw.RewriteLocal(version, in)
		if err != nil {
			t.Fatal(err)
		}
		twice, err := rw.RewriteLocal(version, once)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(once, twice) {
			t.Errorf("v%d: rewriting twice changed the body", version)
		}
	}
}

func BenchmarkRewriteLocal(b *testing.B) {
	body := buildRows(b, 4, localCols, rowsOpts{table: "local", nRows: 1})
	rw := &Rewriter{Local: proxyLocal}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := rw.RewriteLocal(4, body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRewritePeers(b *testing.B) {
	body := buildRows(b, 4, peersV2Cols, rowsOpts{table: "peers_v2", nRows: 3})
	rw := &Rewriter{Local: proxyLocal, Peers: proxyPeers}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := rw.RewritePeers(4, body, [16]byte{}, "5.0.2"); err != nil {
			b.Fatal(err)
		}
	}
}
