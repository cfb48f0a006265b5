package config

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Field describes one setting of Config, as declared by its struct tags.
type Field struct {
	Name       string // Go field name, e.g. "ConnectionsPerNode"
	Flag       string // flag name without dashes, e.g. "connections-per-node"
	Env        string // environment variable, e.g. "CQLGATE_CONNECTIONS_PER_NODE"
	YAML       string // key in the config file; empty if the file cannot set it
	Default    string // default in flag syntax; empty when there is none
	Help       string // one-line description
	Type       string // "string", "list", "int", "bool", "duration" or "float"
	Required   bool   // must be set to a non-empty value
	Reloadable bool   // may change without a restart
	Secret     bool   // masked in logs
}

// Key is the name the setting carries in structured logs: the YAML key, or
// the flag name in snake case for settings that have no YAML key.
func (f Field) Key() string {
	if f.YAML != "" {
		return f.YAML
	}
	return strings.ReplaceAll(f.Flag, "-", "_")
}

type kind int

const (
	kindString kind = iota
	kindList
	kindInt
	kindBool
	kindDuration
	kindFloat
)

var kindNames = [...]string{
	kindString:   "string",
	kindList:     "list",
	kindInt:      "int",
	kindBool:     "bool",
	kindDuration: "duration",
	kindFloat:    "float",
}

var durationType = reflect.TypeFor[time.Duration]()

// field is a Field plus what reflection needs to read, write and check it.
type field struct {
	Field
	index int
	kind  kind

	// Bounds of a numeric setting, from its min, max and above tags (above
	// is an exclusive minimum); the zero Value when the tag is absent.
	// Validate checks them.
	min, max, above reflect.Value
}

// schema is the parsed tag set of a settings struct. It is built once per
// type and never modified afterwards.
type schema struct {
	typ    reflect.Type
	fields []field
	byYAML map[string]int // YAML key -> index into fields
	byName map[string]int // Go field name -> index into fields
}

// newSchema reads the tags of struct type t. Every field of t must be an
// exported setting carrying flag, env and help tags; a default, if present,
// must parse.
func newSchema(t reflect.Type) (*schema, error) {
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("config schema: %v is not a struct", t)
	}
	s := &schema{
		typ:    t,
		byYAML: make(map[string]int),
		byName: make(map[string]int),
	}
	flags := make(map[string]bool)
	envs := make(map[string]bool)
	var errs []error
	for i := range t.NumField() {
		sf := t.Field(i)
		f, err := parseField(sf)
		if err != nil {
			errs = append(errs, fmt.Errorf("config schema: field %s: %w", sf.Name, err))
			continue
		}
		f.index = i
		switch {
		case flags[f.Flag]:
			errs = append(errs, fmt.Errorf("config schema: field %s: duplicate flag %q", sf.Name, f.Flag))
		case envs[f.Env]:
			errs = append(errs, fmt.Errorf("config schema: field %s: duplicate env %q", sf.Name, f.Env))
		case f.YAML != "" && s.hasYAML(f.YAML):
			errs = append(errs, fmt.Errorf("config schema: field %s: duplicate yaml key %q", sf.Name, f.YAML))
		}
		flags[f.Flag], envs[f.Env] = true, true
		if f.YAML != "" {
			s.byYAML[f.YAML] = len(s.fields)
		}
		s.byName[f.Name] = len(s.fields)
		s.fields = append(s.fields, f)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *schema) hasYAML(key string) bool {
	_, ok := s.byYAML[key]
	return ok
}

func parseField(sf reflect.StructField) (field, error) {
	if !sf.IsExported() {
		return field{}, errors.New("unexported fields are not allowed in a settings struct")
	}
	k, err := kindOf(sf.Type)
	if err != nil {
		return field{}, err
	}
	f := field{kind: k}
	f.Name = sf.Name
	f.Type = kindNames[k]
	f.Flag = sf.Tag.Get("flag")
	f.Env = sf.Tag.Get("env")
	f.Help = sf.Tag.Get("help")
	f.Default = sf.Tag.Get("default")
	if f.Flag == "" || f.Env == "" || f.Help == "" {
		return field{}, errors.New(`flag, env and help tags are required`)
	}
	yamlKey, ok := sf.Tag.Lookup("yaml")
	if !ok || yamlKey == "" {
		return field{}, errors.New(`yaml tag is required (use yaml:"-" for settings the file cannot set)`)
	}
	if name, _, _ := strings.Cut(yamlKey, ","); name != "-" {
		f.YAML = name
	}
	for _, b := range []struct {
		tag string
		dst *bool
	}{{"required", &f.Required}, {"reload", &f.Reloadable}, {"secret", &f.Secret}} {
		if v, ok := sf.Tag.Lookup(b.tag); ok {
			x, err := strconv.ParseBool(v)
			if err != nil {
				return field{}, fmt.Errorf("%s tag: invalid boolean %q", b.tag, v)
			}
			*b.dst = x
		}
	}
	if f.Default != "" {
		if err := setString(reflect.New(sf.Type).Elem(), k, f.Default); err != nil {
			return field{}, fmt.Errorf("default tag: %w", err)
		}
	}
	if err := f.parseBounds(sf); err != nil {
		return field{}, err
	}
	return f, nil
}

// parseBounds reads the min, max and above tags of a numeric setting: min
// and max are inclusive, above is an exclusive minimum (above:"0s" means
// positive). The default, if any, must lie within them.
func (f *field) parseBounds(sf reflect.StructField) error {
	for _, b := range []struct {
		tag string
		dst *reflect.Value
	}{{"min", &f.min}, {"max", &f.max}, {"above", &f.above}} {
		v, ok := sf.Tag.Lookup(b.tag)
		if !ok {
			continue
		}
		if f.kind != kindInt && f.kind != kindDuration && f.kind != kindFloat {
			return fmt.Errorf("%s tag: only numeric settings have bounds", b.tag)
		}
		*b.dst = reflect.New(sf.Type).Elem()
		if err := setString(*b.dst, f.kind, v); err != nil {
			return fmt.Errorf("%s tag: %w", b.tag, err)
		}
	}
	lo, exclusive := f.min, false
	if f.above.IsValid() {
		if lo.IsValid() {
			return errors.New("min and above tags exclude each other")
		}
		lo, exclusive = f.above, true
	}
	if lo.IsValid() && f.max.IsValid() && less(f.max, lo, f.kind, exclusive) {
		return errors.New("max tag leaves no valid value")
	}
	if f.Default != "" {
		def := reflect.New(sf.Type).Elem()
		_ = setString(def, f.kind, f.Default) // parsed by parseField
		if msg := f.outOfBounds(def); msg != "" {
			return fmt.Errorf("default tag: %s", msg)
		}
	}
	return nil
}

// less reports whether a < b, or a <= b when orEqual; false if either is
// NaN. a and b are of kind k, which is numeric.
func less(a, b reflect.Value, k kind, orEqual bool) bool {
	if k == kindFloat {
		x, y := a.Float(), b.Float()
		return x < y || orEqual && x == y
	}
	x, y := a.Int(), b.Int()
	return x < y || orEqual && x == y
}

// outOfBounds returns why v, a value of f, breaks f's bounds, e.g.
// "must be between 1 and 64, got 0", or "" when it does not.
func (f field) outOfBounds(v reflect.Value) string {
	if (!f.min.IsValid() || less(f.min, v, f.kind, true)) &&
		(!f.above.IsValid() || less(f.above, v, f.kind, false)) &&
		(!f.max.IsValid() || less(v, f.max, f.kind, true)) {
		return ""
	}
	str := func(b reflect.Value) string { return format(b, f.kind) }
	var want string
	switch hasMin, hasMax, hasAbove := f.min.IsValid(), f.max.IsValid(), f.above.IsValid(); {
	case hasMin && hasMax:
		want = "must be between " + str(f.min) + " and " + str(f.max)
	case hasAbove && hasMax:
		want = "must be in (" + str(f.above) + ", " + str(f.max) + "]"
	case hasMax:
		want = "must be at most " + str(f.max)
	case hasMin && f.min.IsZero():
		want = "must not be negative"
	case hasMin:
		want = "must be at least " + str(f.min)
	case f.above.IsZero():
		want = "must be positive"
	default:
		want = "must be above " + str(f.above)
	}
	return want + ", got " + str(v)
}

func kindOf(t reflect.Type) (kind, error) {
	if t == durationType {
		return kindDuration, nil
	}
	switch t.Kind() {
	case reflect.String:
		return kindString, nil
	case reflect.Slice:
		if t.Elem().Kind() == reflect.String {
			return kindList, nil
		}
	case reflect.Int:
		return kindInt, nil
	case reflect.Bool:
		return kindBool, nil
	case reflect.Float64:
		return kindFloat, nil
	}
	return 0, fmt.Errorf("unsupported type %v", t)
}

// defaults returns a new value of the schema's type with every default set.
func (s *schema) defaults() reflect.Value {
	v := reflect.New(s.typ).Elem()
	for _, f := range s.fields {
		if f.Default == "" {
			continue
		}
		if err := setString(v.Field(f.index), f.kind, f.Default); err != nil {
			// newSchema already parsed every default.
			panic(fmt.Sprintf("config: default of %s: %v", f.Name, err))
		}
	}
	return v
}

// setString parses s according to k and stores it in v. Lists are
// comma-separated; surrounding spaces and empty items are dropped.
func setString(v reflect.Value, k kind, s string) error {
	switch k {
	case kindString:
		v.SetString(s)
	case kindList:
		setList(v, splitList(s))
	case kindInt:
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, v.Type().Bits())
		if err != nil {
			return fmt.Errorf("invalid integer %q: %w", s, numErrCause(err))
		}
		v.SetInt(n)
	case kindBool:
		b, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("invalid boolean %q: want true or false", s)
		}
		v.SetBool(b)
	case kindDuration:
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("invalid duration %q: want a number with a unit, such as 300ms, 5s or 1m30s", s)
		}
		v.SetInt(int64(d))
	case kindFloat:
		x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return fmt.Errorf("invalid number %q: %w", s, numErrCause(err))
		}
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("invalid number %q: must be finite", s)
		}
		v.SetFloat(x)
	default:
		panic(fmt.Sprintf("config: unhandled kind %d", k))
	}
	return nil
}

// numErrCause strips strconv's "strconv.ParseInt: parsing ..." prefix,
// which would repeat the input already quoted by the caller.
func numErrCause(err error) error {
	var ne *strconv.NumError
	if errors.As(err, &ne) {
		return ne.Err
	}
	return err
}

func setList(v reflect.Value, items []string) {
	v.Set(reflect.ValueOf(items).Convert(v.Type()))
}

func splitList(s string) []string {
	items := []string{}
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	return items
}

// format renders v in the syntax setString accepts.
func format(v reflect.Value, k kind) string {
	switch k {
	case kindList:
		return strings.Join(v.Convert(reflect.TypeFor[[]string]()).Interface().([]string), ",")
	case kindDuration:
		return time.Duration(v.Int()).String()
	case kindFloat:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	default:
		return fmt.Sprint(v.Interface())
	}
}

// logValue is the value of a setting as it should appear in a structured
// log: durations as text rather than nanoseconds, secrets masked.
func logValue(v reflect.Value, f field) any {
	if f.Secret {
		if v.IsZero() || (f.kind == kindList && v.Len() == 0) {
			return ""
		}
		return "<redacted>"
	}
	switch f.kind {
	case kindString:
		return v.String()
	case kindList:
		return append([]string(nil), v.Convert(reflect.TypeFor[[]string]()).Interface().([]string)...)
	case kindInt:
		return v.Int()
	case kindBool:
		return v.Bool()
	case kindDuration:
		return time.Duration(v.Int()).String()
	case kindFloat:
		return v.Float()
	}
	panic(fmt.Sprintf("config: unhandled kind %d", f.kind))
}

// logSafe maps every setting's Key to its logValue.
func (s *schema) logSafe(v reflect.Value) map[string]any {
	m := make(map[string]any, len(s.fields))
	for _, f := range s.fields {
		m[f.Key()] = logValue(v.Field(f.index), f)
	}
	return m
}

// publicFields returns a copy of the schema's field descriptions.
func (s *schema) publicFields() []Field {
	out := make([]Field, len(s.fields))
	for i, f := range s.fields {
		out[i] = f.Field
	}
	return out
}
