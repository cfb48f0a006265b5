package config

import (
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

type bounded struct {
	Both     int           `flag:"both" env:"T_BOTH" yaml:"both" min:"1" max:"64" help:"h"`
	AtLeast  int           `flag:"at-least" env:"T_AT_LEAST" yaml:"at_least" min:"100" help:"h"`
	AtMost   int           `flag:"at-most" env:"T_AT_MOST" yaml:"at_most" max:"10" help:"h"`
	Positive time.Duration `flag:"positive" env:"T_POSITIVE" yaml:"positive" above:"0s" help:"h"`
	NonNeg   time.Duration `flag:"non-neg" env:"T_NON_NEG" yaml:"non_neg" min:"0s" help:"h"`
	Share    float64       `flag:"share" env:"T_SHARE" yaml:"share" above:"0" max:"1" help:"h"`
	Above    float64       `flag:"above" env:"T_ABOVE" yaml:"above" above:"1.5" help:"h"`
	Free     int           `flag:"free" env:"T_FREE" yaml:"free" help:"h"`
}

func TestBoundTags(t *testing.T) {
	s, err := newSchema(reflect.TypeFor[bounded]())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		field string
		value any
		want  string // empty: within bounds
	}{
		{"Both", 1, ""},
		{"Both", 64, ""},
		{"Both", 0, "must be between 1 and 64, got 0"},
		{"Both", 65, "must be between 1 and 64, got 65"},
		{"AtLeast", 100, ""},
		{"AtLeast", 99, "must be at least 100, got 99"},
		{"AtMost", -5, ""},
		{"AtMost", 11, "must be at most 10, got 11"},
		{"Positive", time.Nanosecond, ""},
		{"Positive", time.Duration(0), "must be positive, got 0s"},
		{"Positive", -time.Second, "must be positive, got -1s"},
		{"NonNeg", time.Duration(0), ""},
		{"NonNeg", -time.Millisecond, "must not be negative, got -1ms"},
		{"Share", 1.0, ""},
		{"Share", 0.0, "must be in (0, 1], got 0"},
		{"Share", 1.5, "must be in (0, 1], got 1.5"},
		{"Share", math.NaN(), "must be in (0, 1], got NaN"},
		{"Above", 1.75, ""},
		{"Above", 1.5, "must be above 1.5, got 1.5"},
		{"Free", -1 << 40, ""},
	}
	for _, tt := range tests {
		f := s.fields[s.byName[tt.field]]
		v := reflect.New(reflect.TypeOf(tt.value)).Elem()
		v.Set(reflect.ValueOf(tt.value))
		if got := f.outOfBounds(v.Convert(s.typ.Field(f.index).Type)); got != tt.want {
			t.Errorf("%s = %v: got %q, want %q", tt.field, tt.value, got, tt.want)
		}
	}
}

func TestBoundTagsRejected(t *testing.T) {
	tests := []struct {
		name string
		typ  reflect.Type
		want string
	}{
		{"not numeric", reflect.TypeFor[struct {
			X string `flag:"x" env:"X" yaml:"x" help:"h" min:"1"`
		}](), "min tag: only numeric settings have bounds"},
		{"unparsable", reflect.TypeFor[struct {
			X time.Duration `flag:"x" env:"X" yaml:"x" help:"h" max:"5"`
		}](), "max tag: invalid duration"},
		{"min and above", reflect.TypeFor[struct {
			X int `flag:"x" env:"X" yaml:"x" help:"h" min:"1" above:"0"`
		}](), "min and above tags exclude each other"},
		{"max below min", reflect.TypeFor[struct {
			X int `flag:"x" env:"X" yaml:"x" help:"h" min:"2" max:"1"`
		}](), "max tag leaves no valid value"},
		{"max at above", reflect.TypeFor[struct {
			X float64 `flag:"x" env:"X" yaml:"x" help:"h" above:"1" max:"1"`
		}](), "max tag leaves no valid value"},
		{"default out of bounds", reflect.TypeFor[struct {
			X int `flag:"x" env:"X" yaml:"x" help:"h" default:"0" min:"1" max:"64"`
		}](), "default tag: must be between 1 and 64, got 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newSchema(tt.typ)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
	// min:"2" max:"2" and a degenerate interval are fine.
	if _, err := newSchema(reflect.TypeFor[struct {
		X int `flag:"x" env:"X" yaml:"x" help:"h" min:"2" max:"2"`
	}]()); err != nil {
		t.Error(err)
	}
}

// TestValidateBoundTags checks that Validate reports every bound tag of
// Config, just past the bound, with the flag and the tag's message.
func TestValidateBoundTags(t *testing.T) {
	s := configSchema()
	checked := 0
	for _, f := range s.fields {
		var past []reflect.Value
		step := func(b reflect.Value, dir int64) reflect.Value {
			v := reflect.New(b.Type()).Elem()
			if f.kind == kindFloat {
				v.SetFloat(b.Float() + float64(dir)*0.25)
			} else {
				v.SetInt(b.Int() + dir)
			}
			return v
		}
		if f.min.IsValid() {
			past = append(past, step(f.min, -1))
		}
		if f.above.IsValid() {
			past = append(past, f.above)
		}
		if f.max.IsValid() {
			past = append(past, step(f.max, +1))
		}
		for _, v := range past {
			c := Default()
			c.ContactPoints = []string{"a"}
			reflect.ValueOf(&c).Elem().Field(f.index).Set(v)
			want := "--" + f.Flag + ": " + f.outOfBounds(v)
			if err := c.Validate(); err == nil || !slices.Contains(strings.Split(err.Error(), "\n"), want) {
				t.Errorf("%s = %s: err = %v, want a line %q", f.Name, format(v, f.kind), err, want)
			}
			checked++
		}
	}
	if checked < 40 {
		t.Errorf("only %d bounds checked; did the tags go?", checked)
	}

	// One spelled out, so the wording itself is pinned.
	c := Default()
	c.ContactPoints = []string{"a"}
	c.MaxOrphansPerConnection = 32769
	if err := c.Validate(); err == nil || err.Error() != "--max-orphans-per-connection: must be between 1 and 32768, got 32769" {
		t.Errorf("err = %v", err)
	}
}

// TestValidateFieldOrder checks that messages come in the order of the
// fields, whether from tags or code.
func TestValidateFieldOrder(t *testing.T) {
	c := Default()
	c.ContactPoints = nil
	c.Listen = []string{"nope"}
	c.MaxProcs = -1
	c.LogLevel = "loud"
	c.PreparedCacheEntries = 1
	c.HeartbeatInterval = -time.Second
	c.ConnectionsPerNode = 0
	err := c.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	var flags []string
	for line := range strings.SplitSeq(err.Error(), "\n") {
		flag, _, _ := strings.Cut(line, ":")
		flags = append(flags, flag)
	}
	want := []string{"--listen", "--contact-points", "--connections-per-node", "--heartbeat-interval", "--prepared-cache-entries", "--log-level", "--max-procs"}
	if !slices.Equal(flags, want) {
		t.Errorf("flags in the messages: %q, want %q", flags, want)
	}
}
