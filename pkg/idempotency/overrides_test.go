package idempotency

import (
	"errors"
	"strings"
	"testing"
)

func TestParseOverridesErrors(t *testing.T) {
	for _, tc := range []struct {
		spec, msg string
	}{
		{"ks.t", "want VERDICT:TARGET"},
		{"maybe:ks.t", `verdict "maybe" is neither`},
		{"idempotent:", "empty target"},
		{"idempotent:   ", "empty target"},
		{"idempotent:re:", "empty regular expression"},
		{"idempotent:re:(", "regular expression: error parsing"},
		{"idempotent:glob:", "empty glob"},
		{"idempotent:ks.t.u", "is not ks.table"},
		{"idempotent:ks.", "is not ks.table"},
		{"idempotent:.t", "is not ks.table"},
		{"idempotent:'t'", "is not ks.table"},
		{"idempotent:t u", "is not ks.table"},
		{`idempotent:"unterminated`, "is not ks.table"},
		{"idempotent:*", "is not ks.table"},
		{"idempotent:regex:x", "is not ks.table"},
	} {
		_, err := ParseOverrides([]string{"idempotent:ok", tc.spec})
		if !errors.Is(err, ErrOverride) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("ParseOverrides(%q) error %v; want ErrOverride and %q", tc.spec, err, tc.msg)
			continue
		}
		if !strings.Contains(err.Error(), "override 2 ") {
			t.Errorf("error %q does not name rule 2", err)
		}
	}
}

func TestParseOverrides(t *testing.T) {
	o, err := ParseOverrides([]string{" idempotent:ks.t ", "", "NOT-IDEMPOTENT:re:x", "idempotent:glob:*", `not-idempotent:"Ks"."T"`, "idempotent:ks.*", "idempotent:t"})
	if err != nil {
		t.Fatal(err)
	}
	if o.Len() != 6 {
		t.Fatalf("%d rules; want 6 (blank skipped)", o.Len())
	}
	r := o.rules[3]
	if r.ks != "Ks" || r.table != "T" || r.idempotent {
		t.Errorf("quoted table rule parsed as %+v", r)
	}
	if r := o.rules[4]; r.ks != "ks" || r.table != "" {
		t.Errorf("ks.* parsed as %+v", r)
	}
	if r := o.rules[5]; r.ks != "" || r.table != "t" {
		t.Errorf("table rule parsed as %+v", r)
	}
}

func TestOverridesApply(t *testing.T) {
	rules := []string{
		"idempotent:metrics.samples",                    // 1
		"not-idempotent:app.users",                      // 2
		"idempotent:re:SET hits = hits \\+ 1",           // 3
		"not-idempotent:glob:SELECT * FROM app.secret*", // 4
		"idempotent:lookup",                             // 5: any keyspace
		`not-idempotent:"Ks"."T"`,                       // 6
		"idempotent:udfs.*",                             // 7
		"not-idempotent:re:^update .* set blocked",      // 8: case-insensitive
	}
	o, err := ParseOverrides(rules)
	if err != nil {
		t.Fatal(err)
	}
	c := NewClassifier(o)
	for _, tc := range []struct {
		q, ks string
		idem  bool
		rule  int // 0: no override
	}{
		{"UPDATE metrics.samples SET l = l + [1] WHERE k = 1", "", true, 1},
		{"UPDATE samples SET l = l + [1] WHERE k = 1", "metrics", true, 1},
		{"UPDATE samples SET l = l + [1] WHERE k = 1", "other", false, 0},
		{"UPDATE Metrics.Samples SET l = l + [1] WHERE k = 1", "", true, 1},
		{`UPDATE "Metrics".samples SET l = l + [1] WHERE k = 1`, "", false, 0},
		{"SELECT * FROM app.users", "", false, 2},
		{"SELECT * FROM users", "app", false, 2},
		{"UPDATE app.counters SET hits = hits + 1 WHERE k = 1", "", true, 3},
		{"UPDATE app.counters SET hits   =  hits+1 WHERE k = 1", "", false, 0}, // the regexp wants spaces as written
		{"UPDATE app.counters SET HITS = hits + 1 WHERE k = 1", "", true, 3},
		{"UPDATE app.counters SET /* c */ hits = hits + 1 WHERE k = 1", "", true, 3},
		{"SELECT * FROM app.secrets WHERE k = 1", "", false, 4},
		{"select *   from app.secret_x;", "", false, 4},
		{"SELECT * FROM app.public", "", true, 0},
		{"INSERT INTO a.lookup (k) VALUES (now())", "", true, 5},
		{"INSERT INTO b.lookup (k) VALUES (now())", "", true, 5},
		{`SELECT * FROM "Ks"."T"`, "", false, 6},
		{`SELECT * FROM ks.t`, "", true, 0},
		{"INSERT INTO udfs.x (k) VALUES (udfs.f(1))", "", true, 7},
		{"UPDATE ks.t SET blocked = 1 WHERE k = 1", "", false, 8},
		// Never for statements other than reads and writes.
		{"USE metrics", "", false, 0},
		{"TRUNCATE metrics.samples", "", false, 0},
		{"DROP TABLE lookup", "", false, 0},
		// BATCH: each statement, then the batch.
		{"BEGIN BATCH UPDATE metrics.samples SET l = l + [1] WHERE k = 1; INSERT INTO ks.t (k) VALUES (1); APPLY BATCH", "", true, 0},
		{"BEGIN BATCH UPDATE metrics.samples SET l = l + [1] WHERE k = 1; UPDATE ks.t SET l = l + [1] WHERE k = 1; APPLY BATCH", "", false, 0},
		{"BEGIN BATCH INSERT INTO ks.t (k) VALUES (1); INSERT INTO app.users (k) VALUES (1); APPLY BATCH", "", false, 2},
		{"BEGIN COUNTER BATCH UPDATE app.counters SET hits = hits + 1 WHERE k = 1; APPLY BATCH", "", true, 3}, // a pattern matching the whole batch
		{"BEGIN COUNTER BATCH UPDATE metrics.samples SET c = c + 1 WHERE k = 1; APPLY BATCH", "", false, 0},   // a table rule does not undo COUNTER
	} {
		st := c.Classify(tc.q, tc.ks, nil)
		wantReason := ReasonOverride
		detail := ""
		if tc.rule > 0 {
			detail = rules[tc.rule-1]
		}
		if st.Idempotent != tc.idem || (tc.rule > 0 && (st.Reason != wantReason || st.Detail != detail)) ||
			(tc.rule == 0 && st.Reason == ReasonOverride && tc.q[0] != 'B') {
			t.Errorf("%q (keyspace %q): %+v; want idempotent %v by rule %d", tc.q, tc.ks, st.Verdict, tc.idem, tc.rule)
		}
	}
}

// TestOverridesFirstMatchWins: rules are tried in order.
func TestOverridesFirstMatchWins(t *testing.T) {
	for _, tc := range []struct {
		rules []string
		idem  bool
	}{
		{[]string{"not-idempotent:ks.t", "idempotent:ks.t"}, false},
		{[]string{"idempotent:ks.t", "not-idempotent:ks.t"}, true},
		{[]string{"idempotent:re:.", "not-idempotent:ks.t"}, true},
	} {
		o, err := ParseOverrides(tc.rules)
		if err != nil {
			t.Fatal(err)
		}
		if st := NewClassifier(o).Classify("SELECT * FROM ks.t", "", nil); st.Idempotent != tc.idem {
			t.Errorf("%v: idempotent %v; want %v", tc.rules, st.Idempotent, tc.idem)
		}
	}
}

func TestNilAndZeroClassifier(t *testing.T) {
	var zero Classifier
	q := "UPDATE ks.t SET v = 1 WHERE k = 1"
	if !zero.Classify(q, "", nil).Idempotent || !(*Classifier)(nil).Classify(q, "", nil).Idempotent {
		t.Error("zero or nil Classifier")
	}
}
