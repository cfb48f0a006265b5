package systables

import (
	"strings"
	"testing"
)

var classifyCases = []struct {
	query    string
	keyspace string
	want     Table
}{
	// What the drivers send.
	{"SELECT * FROM system.local WHERE key='local'", "", TableLocal},
	{"SELECT schema_version FROM system.local WHERE key='local'", "", TableLocal},
	{"SELECT * FROM system.local", "", TableLocal},
	{"SELECT peer, data_center, rack, host_id, tokens, release_version, rpc_address, schema_version FROM system.peers", "", TablePeers},
	{"SELECT peer, rpc_address, schema_version FROM system.peers", "", TablePeers},
	{"SELECT * FROM system.peers", "", TablePeers},
	{"SELECT * FROM system.peers_v2", "", TablePeersV2},
	{"SELECT * FROM system.peers_v2 WHERE peer = :address and peer_port = :port", "", TablePeersV2},
	{"SELECT cluster_name, data_center, rack, tokens, partitioner, release_version FROM system.local WHERE key='local'", "ks", TableLocal},
	// Case, whitespace, newlines, semicolons.
	{"select * from system.local", "", TableLocal},
	{"SeLeCt * FrOm SyStEm.LoCaL", "", TableLocal},
	{"  \t\n\r SELECT\n*\nFROM\nsystem.local\n;", "", TableLocal},
	{"SELECT*FROM system.local", "", TableLocal},
	{"SELECT * FROM system . local", "", TableLocal},
	{"SELECT * FROM system.local;", "", TableLocal},
	{"SELECT * FROM SYSTEM.PEERS_V2 LIMIT 10", "", TablePeersV2},
	{"SELECT\tpeer\tFROM\tsystem.peers\tALLOW FILTERING", "", TablePeers},
	{"SELECT JSON * FROM system.local", "", TableLocal},
	{"SELECT DISTINCT key FROM system.local", "", TableLocal},
	{"SELECT count(*) FROM system.peers", "", TablePeers},
	{"SELECT token(key), writetime(cluster_name) FROM system.local", "", TableLocal},
	// Quoted identifiers: case-sensitive.
	{`select * from "system"."peers_v2"`, "", TablePeersV2},
	{`SELECT * FROM "system".local`, "", TableLocal},
	{`SELECT * FROM system."peers"`, "", TablePeers},
	{`SELECT * FROM "SYSTEM"."local"`, "", TableNone},
	{`SELECT * FROM "system"."LOCAL"`, "", TableNone},
	{`SELECT * FROM "system"."local "`, "", TableNone},
	{`SELECT * FROM "sys""tem".local`, "", TableNone},
	{`SELECT "from" FROM system.local`, "", TableLocal},
	{`SELECT "a ""from"" b", x FROM system.peers`, "", TablePeers},
	// Comments.
	{"SELECT * FROM /* comment */ system.local", "", TableLocal},
	{"SELECT * -- from ks.tbl\nFROM system.local", "", TableLocal},
	{"SELECT * // from ks.tbl\nFROM system.peers", "", TablePeers},
	{"SELECT * -- from ks.tbl\rFROM system.peers", "", TablePeers},
	{"/* leading */ SELECT * FROM system.local", "", TableLocal},
	{"-- leading\nSELECT * FROM system.local", "", TableLocal},
	{"// leading\nselect * from system.peers", "", TablePeers},
	{"SELECT * FROM system/**/./**/local", "", TableLocal},
	{"SELECT/*x*/*/*y*/FROM/*z*/system.local", "", TableLocal},
	{"SELECT * FROM ks.tbl /* system.local */", "", TableNone},
	{"SELECT * FROM ks.tbl -- system.local", "", TableNone},
	{"/* SELECT * FROM system.local */ SELECT * FROM ks.tbl", "", TableNone},
	{"-- SELECT * FROM system.local", "", TableNone},
	{"SELECT * FROM /* system.local", "", TableNone},
	// Unqualified names resolve against the keyspace.
	{"SELECT * FROM local", "system", TableLocal},
	{"SELECT * FROM peers", "system", TablePeers},
	{`SELECT * FROM "peers_v2"`, "system", TablePeersV2},
	{"SELECT * FROM local", "", TableNone},
	{"SELECT * FROM local", "ks", TableNone},
	{"SELECT * FROM local", "System", TableNone},
	{"SELECT * FROM peers", "system_schema", TableNone},
	{"SELECT * FROM system.local", "ks", TableLocal},
	// Not the system tables.
	{"SELECT * FROM system_schema.keyspaces", "", TableNone},
	{"SELECT * FROM system_schema.tables WHERE keyspace_name = 'local'", "", TableNone},
	{"SELECT * FROM system.size_estimates", "", TableNone},
	{"SELECT * FROM system.local_foo", "", TableNone},
	{"SELECT * FROM system.localx", "", TableNone},
	{"SELECT * FROM system.peers_v3", "", TableNone},
	{"SELECT * FROM system_views.local_read_latency", "", TableNone},
	{"SELECT * FROM system_local.local", "", TableNone},
	{"SELECT * FROM ks.local", "", TableNone},
	{"SELECT * FROM ks.peers", "system", TableNone},
	{"SELECT * FROM local.system", "", TableNone},
	{"SELECT local FROM ks.peers", "", TableNone},
	{"SELECT 'from system.local' FROM ks.tbl", "", TableNone},
	{"SELECT $$from system.local$$ FROM ks.tbl", "", TableNone},
	{"SELECT * FROM ks.tbl WHERE a = 'system.local'", "", TableNone},
	{"SELECT * FROM ks.tbl WHERE name = 'peers'", "system", TableNone},
	{"SELECT fromx FROM ks.local", "", TableNone},
	{"INSERT INTO system.local (key) VALUES ('local')", "", TableNone},
	{"UPDATE system.local SET rack = 'r' WHERE key = 'local'", "", TableNone},
	{"DELETE FROM system.peers WHERE peer = '1.2.3.4'", "", TableNone},
	{"DELETE FROM peers", "system", TableNone},
	{"USE system", "", TableNone},
	{"TRUNCATE system.peers", "", TableNone},
	{"SELECTION * FROM system.local", "", TableNone},
	{"selectx * from system.local", "", TableNone},
	{"xSELECT * FROM system.local", "", TableNone},
	{"(SELECT * FROM system.local)", "", TableNone},
	{"SELECT * FROM", "", TableNone},
	{"SELECT * FROM system.", "", TableNone},
	{"SELECT * FROM system", "system", TableNone},
	{"SELECT local", "system", TableNone},
	{"SELECT * FROM 'system'.'local'", "", TableNone},
	{"SELECT * FROM system.'local'", "", TableNone},
	{"SELECT 'unterminated FROM system.local", "", TableNone},
	{`SELECT "unterminated FROM system.local`, "", TableNone},
	{"SELECT $$unterminated FROM system.local", "", TableNone},
	{"SELECT", "", TableNone},
	{"select", "", TableNone},
	{"", "", TableNone},
	{"   ", "system", TableNone},
	{"SELECT id, name, email FROM users WHERE id = ?", "system", TableNone},
}

func TestClassify(t *testing.T) {
	for _, tc := range classifyCases {
		if got := Classify([]byte(tc.query), tc.keyspace); got != tc.want {
			t.Errorf("Classify(%q, %q) = %v, want %v", tc.query, tc.keyspace, got, tc.want)
		}
		// The pre-filter must never change the answer.
		if got := classifyWithoutPrefilter([]byte(tc.query), tc.keyspace); got != tc.want {
			t.Errorf("classifyWithoutPrefilter(%q, %q) = %v, want %v", tc.query, tc.keyspace, got, tc.want)
		}
	}
}

// classifyWithoutPrefilter is Classify without the mayMention pre-filter,
// the reference the fuzzer compares Classify with.
func classifyWithoutPrefilter(q []byte, keyspace string) Table {
	i := skipSpace(q, 0)
	if len(q)-i < 6 || !hasFoldPrefix(q[i:], "select") || (len(q) > i+6 && isWord(q[i+6])) {
		return TableNone
	}
	return classifySlow(q, i+6, keyspace)
}

func TestMayMention(t *testing.T) {
	for _, s := range []string{
		"", "l", "local", "LOCAL", "xxxxxxxlocal", "xxxxxxxxlocal", "xxxxxxxLoCaLxxxxxxxxxxx", "peers", "xxxxxxxxxxxxxxxPEERS",
		"loca", "peer", "lxxxxxxxpxxxxxxxlocaxpeer", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxlocal", "LOCAl\x80\xff",
		"\xcc\xcf\xc3\xc1\xcc", // "local" | 0x80: not a match
	} {
		want := strings.Contains(strings.ToLower(s), "local") || strings.Contains(strings.ToLower(s), "peers")
		if got := mayMention([]byte(s)); got != want {
			t.Errorf("mayMention(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestClassifyAllocs(t *testing.T) {
	for _, tc := range classifyCases {
		q := []byte(tc.query)
		if n := testing.AllocsPerRun(100, func() { Classify(q, tc.keyspace) }); n != 0 {
			t.Errorf("Classify(%q) allocates %v times", tc.query, n)
		}
	}
}

func TestParseUse(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  string
		ok    bool
	}{
		{"USE ks", "ks", true},
		{"use ks", "ks", true},
		{"USE MyKs", "myks", true},
		{"USE my_ks_2", "my_ks_2", true},
		{`USE "MyKs"`, "MyKs", true},
		{`USE "my""ks"`, `my"ks`, true},
		{`USE """"`, `"`, true},
		{`USE "with space"`, "with space", true},
		{"USE ks;", "ks", true},
		{"  USE   ks  ;  ", "ks", true},
		{"USE\n\tks\n", "ks", true},
		{"USE ks ; -- trailing comment", "ks", true},
		{"/* c */ USE /* c */ ks /* c */ ; /* c */", "ks", true},
		{"-- c\nUSE ks", "ks", true},
		{"USE\"ks\"", "ks", true},
		{`USE "ks";`, "ks", true},
		{"USE system", "system", true},
		{"USE SYSTEM", "system", true},
		{"USE", "", false},
		{"USE ;", "", false},
		{`USE ""`, "", false},
		{`USE "unterminated`, "", false},
		{"USE ks extra", "", false},
		{"USE ks;;", "", false},
		{"USE ks; USE other", "", false},
		{"USE ks.tbl", "", false},
		{"USE 'ks'", "", false},
		{"USE 1ks", "", false},
		{"USE _ks", "", false},
		{"USEks", "", false},
		{"USERS ks", "", false},
		{"SELECT * FROM ks", "", false},
		{"use", "", false},
		{"", "", false},
	} {
		got, ok := ParseUse([]byte(tc.query))
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseUse(%q) = %q, %v; want %q, %v", tc.query, got, ok, tc.want, tc.ok)
		}
	}
}

// Typical application queries: none is a system table.
var benchQueries = map[string]string{
	"select":      "SELECT id, name, email, created_at FROM app.users WHERE id = ?",
	"select-long": "SELECT id, name, email, created_at, updated_at, preferences, last_login, plan FROM app.user_profiles WHERE tenant_id = ? AND id IN (?, ?, ?, ?, ?, ?, ?, ?)",
	"select-l-p":  "SELECT email, plan FROM app.people WHERE id = ? LIMIT 1", // 'l' and 'p' but not local/peers
	"insert":      "INSERT INTO app.users (id, name, email) VALUES (?, ?, ?)",
}

func BenchmarkClassify(b *testing.B) {
	for _, name := range []string{"select", "select-long", "select-l-p", "insert"} {
		q := []byte(benchQueries[name])
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if Classify(q, "app") != TableNone {
					b.Fatal("matched")
				}
			}
		})
	}
	b.Run("system.local", func(b *testing.B) {
		q := []byte("SELECT * FROM system.local WHERE key='local'")
		b.ReportAllocs()
		for b.Loop() {
			if Classify(q, "") != TableLocal {
				b.Fatal("not matched")
			}
		}
	})
	b.Run("locale-column", func(b *testing.B) {
		// Passes the pre-filter, rejected by the tokenizer.
		q := []byte("SELECT id, locale FROM app.users WHERE id = ?")
		b.ReportAllocs()
		for b.Loop() {
			if Classify(q, "app") != TableNone {
				b.Fatal("matched")
			}
		}
	})
}

func BenchmarkParseUse(b *testing.B) {
	q := []byte(`USE "MyKeyspace";`)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := ParseUse(q); !ok {
			b.Fatal("not parsed")
		}
	}
}
