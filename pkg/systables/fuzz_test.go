package systables

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/datastax/go-cassandra-native-protocol/message"
)

// seedBodies adds realistic RESULT bodies of every shape to a fuzz corpus.
func seedBodies(f *testing.F, tables ...[]colDef) {
	for _, version := range versions {
		for _, cols := range tables {
			for _, bv := range bodyVariants {
				if bv.v5 && version < 5 {
					continue
				}
				f.Add(version, buildRows(f, version, cols, bv.opts))
			}
		}
		f.Add(version, encodeResult(f, version, &message.VoidResult{}))
		f.Add(version, encodeResult(f, version, &message.RowsResult{
			Metadata: &message.RowsMetadata{ColumnCount: 2},
			Data:     message.RowSet{{realIP, realHostID[:]}},
		}))
	}
}

// checkRows asserts that out is a well-formed Rows body and returns its
// layout.
func checkRows(t *testing.T, version byte, out []byte) rows {
	t.Helper()
	rs, err := parseRows(version, out)
	if err != nil {
		t.Fatalf("output does not parse: %v", err)
	}
	if _, err := forEachCell(out, rs, nil); err != nil {
		t.Fatalf("output rows do not parse: %v", err)
	}
	return rs
}

func isRowsWithMetadata(body []byte) bool {
	return len(body) >= 8 && int32(binary.BigEndian.Uint32(body)) == resultRows &&
		int32(binary.BigEndian.Uint32(body[4:]))&flagNoMetadata == 0
}

func FuzzRewriteLocal(f *testing.F) {
	seedBodies(f, localCols, peersCols, peersV2Cols)
	rw := &Rewriter{Local: proxyLocal, Peers: proxyPeers}
	f.Fuzz(func(t *testing.T, version byte, body []byte) {
		orig := bytes.Clone(body)
		out, err := rw.RewriteLocal(version, body)
		_, _ = ParseLocal(version, body)
		if !bytes.Equal(body, orig) {
			t.Fatal("input modified")
		}
		if err != nil {
			if out != nil {
				t.Fatalf("body returned with error %v", err)
			}
			return
		}
		if !isRowsWithMetadata(body) {
			if !bytes.Equal(out, body) {
				t.Fatal("non-rows or no-metadata body changed")
			}
			return
		}
		rsIn, _ := parseRows(version, body)
		rsOut := checkRows(t, version, out)
		if rsOut.nCols != rsIn.nCols || rsOut.count != rsIn.count || rsOut.flags != rsIn.flags {
			t.Fatalf("layout changed: %+v -> %+v", rsIn, rsOut)
		}
		if !bytes.Equal(out[:rsOut.countAt], body[:rsIn.countAt]) {
			t.Fatal("metadata changed")
		}
		again, err := rw.RewriteLocal(version, out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: %v", err)
		}
	})
}

func FuzzRewritePeers(f *testing.F) {
	seedBodies(f, peersCols, peersV2Cols, localCols)
	rw := &Rewriter{Local: proxyLocal, Peers: proxyPeers}
	schema := [16]byte{1, 2, 3}
	f.Fuzz(func(t *testing.T, version byte, body []byte) {
		orig := bytes.Clone(body)
		out, err := rw.RewritePeers(version, body, schema, "5.0.2")
		if !bytes.Equal(body, orig) {
			t.Fatal("input modified")
		}
		if err != nil {
			if out != nil {
				t.Fatalf("body returned with error %v", err)
			}
			return
		}
		if !isRowsWithMetadata(body) {
			if !bytes.Equal(out, body) {
				t.Fatal("non-rows body changed")
			}
			return
		}
		rsIn, _ := parseRows(version, body)
		rsOut := checkRows(t, version, out)
		if rsOut.count != len(rw.Peers) || rsOut.nCols != rsIn.nCols {
			t.Fatalf("%d rows of %d columns, want %d of %d", rsOut.count, rsOut.nCols, len(rw.Peers), rsIn.nCols)
		}
		if rsOut.flags != rsIn.flags&^flagHasMorePages {
			t.Fatalf("flags %#x, want %#x", rsOut.flags, rsIn.flags&^flagHasMorePages)
		}
		again, err := rw.RewritePeers(version, out, schema, "5.0.2")
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: %v", err)
		}
	})
}

func FuzzClassify(f *testing.F) {
	for _, tc := range classifyCases {
		f.Add(tc.query, tc.keyspace)
	}
	for _, q := range benchQueries {
		f.Add(q, "app")
	}
	f.Fuzz(func(t *testing.T, query, keyspace string) {
		got := Classify([]byte(query), keyspace)
		if ref := classifyWithoutPrefilter([]byte(query), keyspace); got != ref {
			t.Fatalf("Classify = %v, without pre-filter = %v", got, ref)
		}
		lower := strings.ToLower(query)
		mention := strings.Contains(lower, "local") || strings.Contains(lower, "peers")
		if m := mayMention([]byte(query)); m != mention {
			t.Fatalf("mayMention = %v, want %v", m, mention)
		}
		if got != TableNone && !mention {
			t.Fatalf("Classify = %v for a query naming no system table", got)
		}
	})
}

func FuzzParseUse(f *testing.F) {
	for _, q := range []string{"USE ks", `USE "My""Ks";`, "/* c */ use KS ; -- x", "USE", `USE ""`, "USE ks extra", "USE\"a\""} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, query string) {
		ks, ok := ParseUse([]byte(query))
		if !ok {
			if ks != "" {
				t.Fatalf("keyspace %q with ok == false", ks)
			}
			return
		}
		if ks == "" {
			t.Fatal("empty keyspace with ok == true")
		}
		quoted := `USE "` + strings.ReplaceAll(ks, `"`, `""`) + `"`
		if again, ok := ParseUse([]byte(quoted)); !ok || again != ks {
			t.Fatalf("ParseUse(%q) = %q, %v; want %q", quoted, again, ok, ks)
		}
	})
}
