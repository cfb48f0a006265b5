package idempotency

import (
	"errors"
	"strings"
	"testing"
)

// lexTexts returns the text of each token of q, markers as "?N".
func lexTexts(t *testing.T, q string) []string {
	t.Helper()
	toks, err := lex(q, nil)
	if err != nil {
		t.Fatalf("lex(%q): %v", q, err)
	}
	out := make([]string, len(toks))
	for i, tk := range toks {
		out[i] = q[tk.start:tk.end]
		if tk.kind == tkMarker {
			out[i] = "?" + string(rune('0'+tk.marker)) + "=" + out[i]
		}
	}
	return out
}

func TestLexTokens(t *testing.T) {
	for _, tc := range []struct {
		q    string
		want string // tokens joined by " | "
	}{
		{"SELECT * FROM t", "SELECT | * | FROM | t"},
		{"a.b", "a | . | b"},
		{"c = c -1", "c | = | c | -1"},
		{"c=c-1", "c | = | c | -1"},
		{"c = c - 1", "c | = | c | - | 1"},
		{"x += 1, y -= 2", "x | += | 1 | , | y | -= | 2"},
		{"a<=b>=c!=d<e>f", "a | <= | b | >= | c | != | d | < | e | > | f"},
		{"'it''s' \"a\"\"b\"", "'it''s' | \"a\"\"b\""},
		{"$$a 'b' $ c$$ x", "$$a 'b' $ c$$ | x"},
		{"1.5e-3 -2 3h30m 12µs 1E5", "1.5e-3 | -2 | 3h30m | 12µs | 1E5"},
		{"0xCAFE 0x", "0xCAFE | 0x"},
		{"123e4567-e89b-12d3-a456-426614174000 x", "123e4567-e89b-12d3-a456-426614174000 | x"},
		{"abcdef01-e89b-12d3-a456-426614174000", "abcdef01-e89b-12d3-a456-426614174000"},
		{"123e4567-e89b-12d3-a456-426614174000a", "123e4567 | - | e89b | -12d3 | - | a456 | -426614174000a"},
		{"a -- c\nb // d\nc /* e\n */ d", "a | b | c | d"},
		{"a--\n", "a"},
		{"a//\r", "a"},
		{"?, ?", "?0=? | , | ?1=?"},
		{":a, :b", "?0=:a | , | ?1=:b"},
		{`:"Quoted Name"`, `?0=:"Quoted Name"`},
		{"{'a': :x, 'b': ?}", "{ | 'a' | : | ?0=:x | , | 'b' | : | ?1=? | }"},
		{"{:k : :v}", "{ | ?0=:k | : | ?1=:v | }"},
		{"{key: 1, ttl: :t}", "{ | key | : | 1 | , | ttl | : | ?0=:t | }"},
		{"{a:b}", "{ | a | : | b | }"},
		{"{'k': [:x, (:y)]}", "{ | 'k' | : | [ | ?0=:x | , | ( | ?1=:y | ) | ] | }"},
		{"x IN :list LIMIT :n", "x | IN | ?0=:list | LIMIT | ?1=:n"},
		{"a: 1", "a | : | 1"},
		{"   ", ""},
	} {
		got := strings.Join(lexTexts(t, tc.q), " | ")
		if got != tc.want {
			t.Errorf("lex(%q) = %q; want %q", tc.q, got, tc.want)
		}
	}
}

func TestLexErrors(t *testing.T) {
	for _, tc := range []struct {
		q    string
		want error
	}{
		{"'abc", errUnterminatedString},
		{"'abc''", errUnterminatedString},
		{`"abc`, errUnterminatedQuoted},
		{`:"abc`, errUnterminatedQuoted},
		{"$$abc", errUnterminatedDollar},
		{"$$abc$", errUnterminatedDollar},
		{"/* abc", errUnterminatedComment},
		{"/*/", errUnterminatedComment},
		{"a --", errUnterminatedLineComment},
		{"a // b", errUnterminatedLineComment},
		{"a # b", errBadChar},
		{"a ! b", errBadChar},
		{"a \\ b", errBadChar},
		{"a ` b", errBadChar},
		{"a $ b", errBadChar},
		{"a é b", errBadChar},
		{strings.Repeat("(", maxDepth+1), errTooDeep},
	} {
		if _, err := lex(tc.q, nil); !errors.Is(err, tc.want) {
			t.Errorf("lex(%q) error %v; want %v", tc.q, err, tc.want)
		}
	}
	if _, err := lex(strings.Repeat("(", maxDepth)+strings.Repeat(")", maxDepth), nil); err != nil {
		t.Errorf("nesting %d deep: %v", maxDepth, err)
	}
}

func TestLexSpaced(t *testing.T) {
	q := "a  b/**/c(d) -- x\ne"
	toks, err := lex(q, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []bool
	for _, tk := range toks {
		got = append(got, tk.spaced)
	}
	want := []bool{false, true, true, false, false, false, true}
	if len(got) != len(want) {
		t.Fatalf("%d tokens; want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("token %d %q spaced %v; want %v", i, q[toks[i].start:toks[i].end], got[i], want[i])
		}
	}
	if n := normalize(q, toks); n != "a b c(d) e" {
		t.Errorf("normalize = %q", n)
	}
}
