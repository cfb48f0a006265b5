package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// allTypes exercises every supported kind, including float64 and bool,
// which Config itself does not (yet) use, and the secret mechanism.
type allTypes struct {
	S   string        `flag:"s" env:"T_S" yaml:"s" default:"def" help:"a string"`
	L   []string      `flag:"l" env:"T_L" yaml:"l" default:"a,b" help:"a list"`
	I   int           `flag:"i" env:"T_I" yaml:"i" default:"7" help:"an int"`
	B   bool          `flag:"b" env:"T_B" yaml:"b" help:"a bool"`
	D   time.Duration `flag:"d" env:"T_D" yaml:"d" default:"1s" help:"a duration"`
	F   float64       `flag:"f" env:"T_F" yaml:"f" default:"0.5" help:"a float"`
	Pw  string        `flag:"pw" env:"T_PW" yaml:"pw" secret:"true" help:"a secret"`
	Tok []string      `flag:"tok" env:"T_TOK" yaml:"tok" secret:"true" reload:"true" help:"secret list"`
}

func testSchema(t *testing.T) *schema {
	t.Helper()
	s, err := newSchema(reflect.TypeFor[allTypes]())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSchemaDefaults(t *testing.T) {
	s := testSchema(t)
	got := s.defaults().Interface().(allTypes)
	want := allTypes{S: "def", L: []string{"a", "b"}, I: 7, D: time.Second, F: 0.5}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("defaults = %+v, want %+v", got, want)
	}
	fs := s.publicFields()
	if fs[7].Type != "list" || !fs[7].Secret || !fs[7].Reloadable || fs[0].Reloadable {
		t.Errorf("tags not parsed: %+v", fs)
	}
}

func TestSetString(t *testing.T) {
	tests := []struct {
		field string // allTypes field name
		in    string
		want  any
		err   string // substring of the error; empty for success
	}{
		{"S", "  x y ", "  x y ", ""},
		{"S", "", "", ""},
		{"L", "a, b ,,c", []string{"a", "b", "c"}, ""},
		{"L", "", []string{}, ""},
		{"I", "42", 42, ""},
		{"I", " -3 ", -3, ""},
		{"I", "4x", nil, `invalid integer "4x": invalid syntax`},
		{"I", "99999999999999999999", nil, "value out of range"},
		{"I", "0x10", nil, "invalid integer"},
		{"B", "true", true, ""},
		{"B", "0", false, ""},
		{"B", "yes", nil, `invalid boolean "yes"`},
		{"D", "1m30s", 90 * time.Second, ""},
		{"D", "0", time.Duration(0), ""},
		{"D", "-5ms", -5 * time.Millisecond, ""},
		{"D", "5", nil, `invalid duration "5"`},
		{"D", "5 seconds", nil, "invalid duration"},
		{"F", "1.25", 1.25, ""},
		{"F", "1e3", 1000.0, ""},
		{"F", "NaN", nil, "must be finite"},
		{"F", "x", nil, `invalid number "x"`},
	}
	s := testSchema(t)
	for _, tt := range tests {
		t.Run(tt.field+"/"+tt.in, func(t *testing.T) {
			f := s.fields[s.byName[tt.field]]
			v := reflect.New(s.typ).Elem()
			err := setString(v.Field(f.index), f.kind, tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := v.Field(f.index).Interface(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestFormatRoundTrip(t *testing.T) {
	s := testSchema(t)
	v := s.defaults()
	for _, f := range s.fields {
		text := format(v.Field(f.index), f.kind)
		w := reflect.New(s.typ).Elem()
		if err := setString(w.Field(f.index), f.kind, text); err != nil {
			t.Fatalf("%s: %q: %v", f.Name, text, err)
		}
		if f.kind == kindList && v.Field(f.index).Len() == 0 {
			continue // nil vs empty
		}
		if !reflect.DeepEqual(w.Field(f.index).Interface(), v.Field(f.index).Interface()) {
			t.Errorf("%s: %q did not round-trip", f.Name, text)
		}
	}
}

func TestLayersAllTypes(t *testing.T) {
	want := allTypes{S: "v", L: []string{"x", "y"}, I: 3, B: true, D: 2 * time.Minute, F: 2.5, Pw: "p", Tok: []string{"t"}}
	s := testSchema(t)

	t.Run("env", func(t *testing.T) {
		v := s.defaults()
		env := envMap([]string{"T_S=v", "T_L=x,y", "T_I=3", "T_B=true", "T_D=2m", "T_F=2.5", "T_PW=p", "T_TOK=t", "T_I=9", "OTHER=1"})
		if err := s.applyEnv(v, env); err != nil {
			t.Fatal(err)
		}
		if got := v.Interface().(allTypes); !reflect.DeepEqual(got, want) {
			t.Errorf("got %+v, want %+v", got, want)
		}
	})
	t.Run("flags", func(t *testing.T) {
		pa, err := s.parseArgs([]string{"--s=v", "-l", "x", "--l=y", "--i", "1", "--i=3", "--b", "--d=2m", "--f", "2.5", "--pw", "p", "--tok=t"})
		if err != nil {
			t.Fatal(err)
		}
		v := s.defaults()
		if err := s.applyFlags(v, pa); err != nil {
			t.Fatal(err)
		}
		if got := v.Interface().(allTypes); !reflect.DeepEqual(got, want) {
			t.Errorf("got %+v, want %+v", got, want)
		}
	})
	t.Run("yaml", func(t *testing.T) {
		doc := "s: v\nl: [x, y]\ni: 3\nb: true\nd: 2m\nf: 2.5\npw: p\ntok: t\n"
		v := s.defaults()
		if err := s.applyYAML(v, []byte(doc)); err != nil {
			t.Fatal(err)
		}
		if got := v.Interface().(allTypes); !reflect.DeepEqual(got, want) {
			t.Errorf("got %+v, want %+v", got, want)
		}
	})
}

func TestEnvEmptyIgnored(t *testing.T) {
	s := testSchema(t)
	v := s.defaults()
	if err := s.applyEnv(v, envMap([]string{"T_S=", "T_I="})); err != nil {
		t.Fatal(err)
	}
	if got := v.Interface().(allTypes); got.S != "def" || got.I != 7 {
		t.Errorf("empty variables changed values: %+v", got)
	}
}

func TestLayerErrors(t *testing.T) {
	s := testSchema(t)
	err := s.applyEnv(s.defaults(), envMap([]string{"T_I=x", "T_D=1y"}))
	for _, want := range []string{`$T_I: invalid integer "x"`, `$T_D: invalid duration "1y"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("env error %v does not contain %q", err, want)
		}
	}
	pa, err := s.parseArgs([]string{"--f=abc", "--b=maybe"})
	if err != nil {
		t.Fatal(err)
	}
	err = s.applyFlags(s.defaults(), pa)
	for _, want := range []string{`--f: invalid number "abc"`, `--b: invalid boolean "maybe"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("flag error %v does not contain %q", err, want)
		}
	}
}

func TestYAMLErrors(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"unknown key", "s: v\nnope: 1\n", `line 2: unknown key "nope"`},
		{"suggestion", "S: v\n", `did you mean "s"?`},
		{"bad duration", "d: 10\n", `line 1: d: invalid duration "10"`},
		{"duplicate", "i: 1\ni: 2\n", "line 2: i: duplicate key (first set on line 1)"},
		{"mapping for scalar", "i: {a: 1}\n", "line 1: i: want a single int value"},
		{"list for scalar", "s: [a]\n", "want a single string value"},
		{"mapping in list", "l: [{a: 1}]\n", "list items must be scalars"},
		{"not a mapping", "- a\n", "must be a mapping"},
		{"two documents", "s: a\n---\ns: b\n", "only one YAML document"},
		{"syntax", "s: [\n", "yaml:"},
	}
	s := testSchema(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.applyYAML(s.defaults(), []byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestYAMLEdgeCases(t *testing.T) {
	s := testSchema(t)
	for _, doc := range []string{"", "---\n", "~\n", "# only a comment\n", "s:\ni: ~\n"} {
		v := s.defaults()
		if err := s.applyYAML(v, []byte(doc)); err != nil {
			t.Errorf("%q: %v", doc, err)
		}
		if !reflect.DeepEqual(v.Interface(), s.defaults().Interface()) {
			t.Errorf("%q changed the defaults", doc)
		}
	}
	v := s.defaults()
	doc := "base: &x [p, q]\n"
	if err := s.applyYAML(v, []byte(doc)); err == nil {
		t.Errorf("unknown anchored key accepted")
	}
	doc = "l: &x [p, q]\ntok: *x\ns: 'a,b'\nf: 3\n"
	if err := s.applyYAML(v, []byte(doc)); err != nil {
		t.Fatal(err)
	}
	got := v.Interface().(allTypes)
	if !reflect.DeepEqual(got.Tok, []string{"p", "q"}) || got.S != "a,b" || got.F != 3 {
		t.Errorf("got %+v", got)
	}
	if err := s.applyYAML(v, []byte("l: one, two\n")); err != nil {
		t.Fatal(err)
	}
	if got := v.Interface().(allTypes).L; !reflect.DeepEqual(got, []string{"one", "two"}) {
		t.Errorf("scalar list = %q", got)
	}
}

func TestLogSafeMasksSecrets(t *testing.T) {
	s := testSchema(t)
	v := s.defaults()
	m := s.logSafe(v)
	if m["pw"] != "" || m["tok"] != "" {
		t.Errorf("empty secrets should log as empty: %v", m)
	}
	v.FieldByName("Pw").SetString("hunter2")
	v.FieldByName("Tok").Set(reflect.ValueOf([]string{"t1"}))
	m = s.logSafe(v)
	if m["pw"] != "<redacted>" || m["tok"] != "<redacted>" {
		t.Errorf("secrets not masked: %v", m)
	}
	if m["d"] != "1s" || m["i"] != int64(7) || m["f"] != 0.5 || m["b"] != false {
		t.Errorf("plain values wrong: %v", m)
	}
}

func TestNewSchemaRejects(t *testing.T) {
	tests := []struct {
		name string
		typ  reflect.Type
		want string
	}{
		{"not a struct", reflect.TypeFor[int](), "not a struct"},
		{"unsupported type", reflect.TypeFor[struct {
			X int32 `flag:"x" env:"X" yaml:"x" help:"h"`
		}](), "unsupported type int32"},
		{"missing help", reflect.TypeFor[struct {
			X int `flag:"x" env:"X" yaml:"x"`
		}](), "flag, env and help tags are required"},
		{"missing yaml", reflect.TypeFor[struct {
			X int `flag:"x" env:"X" help:"h"`
		}](), "yaml tag is required"},
		{"bad default", reflect.TypeFor[struct {
			X time.Duration `flag:"x" env:"X" yaml:"x" help:"h" default:"5"`
		}](), "default tag: invalid duration"},
		{"bad bool tag", reflect.TypeFor[struct {
			X int `flag:"x" env:"X" yaml:"x" help:"h" secret:"maybe"`
		}](), "secret tag"},
		{"duplicate flag", reflect.TypeFor[struct {
			X int `flag:"x" env:"X" yaml:"x" help:"h"`
			Y int `flag:"x" env:"Y" yaml:"y" help:"h"`
		}](), `duplicate flag "x"`},
		{"unexported", reflect.TypeFor[struct {
			x int `flag:"x" env:"X" yaml:"x" help:"h"`
		}](), "unexported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newSchema(tt.typ)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}
