package config

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"
)

// parsedArgs is the command line, recorded but not yet applied: flags have
// the highest precedence, yet the config file they may name is read first.
type parsedArgs struct {
	values  map[int][]string // index into schema.fields -> every value given, in order
	version bool
}

// rawFlag records the values given for one flag.
type rawFlag struct {
	isBool bool
	values *[]string
}

func (r rawFlag) String() string { return "" }

func (r rawFlag) Set(s string) error {
	*r.values = append(*r.values, s)
	return nil
}

func (r rawFlag) IsBoolFlag() bool { return r.isBool }

// parseArgs parses the command line. Both -name and --name are accepted, with
// the value after "=" or as the next argument. -h, -help and --help yield
// flag.ErrHelp.
func (s *schema) parseArgs(args []string) (*parsedArgs, error) {
	fs := flag.NewFlagSet(programName, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are returned, usage is written by Load
	fs.Usage = func() {}
	pa := &parsedArgs{values: make(map[int][]string)}
	recorded := make([]*[]string, len(s.fields))
	for i, f := range s.fields {
		recorded[i] = new([]string)
		fs.Var(rawFlag{isBool: f.kind == kindBool, values: recorded[i]}, f.Flag, f.Help)
	}
	fs.BoolVar(&pa.version, "version", false, versionHelp)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		// The flag package spells flags with one dash; the docs use two.
		msg := strings.Replace(err.Error(), " -", " --", 1)
		return nil, fmt.Errorf("command line: %s", msg)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("command line: unexpected argument %q (settings are given as --name=value)", fs.Arg(0))
	}
	for i, r := range recorded {
		if len(*r) > 0 {
			pa.values[i] = *r
		}
	}
	return pa, nil
}

// applyFlags stores the recorded flag values. A list flag given several times
// accumulates; for any other flag the last value wins.
func (s *schema) applyFlags(v reflect.Value, pa *parsedArgs) error {
	var errs []error
	for i, f := range s.fields {
		vals, ok := pa.values[i]
		if !ok {
			continue
		}
		fv := v.Field(f.index)
		if f.kind == kindList {
			items := []string{}
			for _, val := range vals {
				items = append(items, splitList(val)...)
			}
			setList(fv, items)
			continue
		}
		if err := setString(fv, f.kind, vals[len(vals)-1]); err != nil {
			errs = append(errs, fmt.Errorf("--%s: %w", f.Flag, err))
		}
	}
	return errors.Join(errs...)
}

// envMap turns an os.Environ-style slice into a map. As with os.Getenv, the
// first of duplicate entries wins.
func envMap(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		if _, dup := m[k]; !dup {
			m[k] = v
		}
	}
	return m
}

// applyEnv stores the settings found in env. Variables that are set but
// empty are ignored, so an empty template substitution keeps the lower
// layers' value.
func (s *schema) applyEnv(v reflect.Value, env map[string]string) error {
	var errs []error
	for _, f := range s.fields {
		val, ok := env[f.Env]
		if !ok || val == "" {
			continue
		}
		if err := setString(v.Field(f.index), f.kind, val); err != nil {
			errs = append(errs, fmt.Errorf("$%s: %w", f.Env, err))
		}
	}
	return errors.Join(errs...)
}

// applyYAML stores the settings of a YAML document: a mapping from the
// fields' yaml keys to scalars (lists: a sequence of scalars, or one
// comma-separated scalar). Scalars are parsed exactly like flag values, so
// durations are Go duration strings. Unknown and duplicate keys are errors;
// a key whose value is empty (null) keeps the default. Every problem is
// reported with its line number and key.
func (s *schema) applyYAML(v reflect.Value, data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // empty file
		}
		return err
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return err
		}
		return fmt.Errorf("line %d: only one YAML document is allowed", extra.Line)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return nil
		}
		root = root.Content[0]
	}
	if isNull(root) {
		return nil
	}
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: the file must be a mapping of setting names to values", root.Line)
	}

	var errs []error
	seen := make(map[string]int)
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, val := root.Content[i], root.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			errs = append(errs, fmt.Errorf("line %d: setting names must be scalars", k.Line))
			continue
		}
		key := k.Value
		if first, dup := seen[key]; dup {
			errs = append(errs, fmt.Errorf("line %d: %s: duplicate key (first set on line %d)", k.Line, key, first))
			continue
		}
		seen[key] = k.Line
		idx, ok := s.byYAML[key]
		if !ok {
			errs = append(errs, fmt.Errorf("line %d: unknown key %q%s", k.Line, key, s.suggest(key)))
			continue
		}
		f := s.fields[idx]
		if err := setNode(v.Field(f.index), f.kind, val); err != nil {
			errs = append(errs, fmt.Errorf("line %d: %s: %w", val.Line, key, err))
		}
	}
	return errors.Join(errs...)
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

func setNode(v reflect.Value, k kind, n *yaml.Node) error {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if isNull(n) {
		return nil
	}
	switch {
	case n.Kind == yaml.ScalarNode:
		return setString(v, k, n.Value)
	case n.Kind == yaml.SequenceNode && k == kindList:
		items := make([]string, 0, len(n.Content))
		for _, item := range n.Content {
			if item.Kind == yaml.AliasNode && item.Alias != nil {
				item = item.Alias
			}
			if item.Kind != yaml.ScalarNode || isNull(item) {
				return fmt.Errorf("list items must be scalars (line %d)", item.Line)
			}
			if s := strings.TrimSpace(item.Value); s != "" {
				items = append(items, s)
			}
		}
		setList(v, items)
		return nil
	case k == kindList:
		return errors.New("want a list of scalars")
	default:
		return fmt.Errorf("want a single %s value", kindNames[k])
	}
}

// suggest returns a hint naming the YAML key that key was probably meant to
// be, such as contact_points for contact-points or ContactPoints.
func (s *schema) suggest(key string) string {
	norm := func(s string) string {
		return strings.NewReplacer("-", "", "_", "").Replace(strings.ToLower(s))
	}
	want := norm(key)
	for _, f := range s.fields {
		switch {
		case f.YAML != "" && norm(f.YAML) == want:
			return fmt.Sprintf(" (did you mean %q?)", f.YAML)
		case f.YAML == "" && (norm(f.Flag) == want || norm(f.Name) == want):
			return fmt.Sprintf(" (%s can only be set with --%s or $%s)", f.Flag, f.Flag, f.Env)
		}
	}
	return ""
}
