package rules

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Defaults and bounds of a rule's settings.
const (
	DefaultQueueLength  = 16
	DefaultMaxQueueWait = 100 * time.Millisecond
	MaxInFlightBound    = 1 << 20
	// QueueLengthBound keeps queues small: a rule's queue is for smoothing
	// bursts, and a waiter admitted by a release may refuse the next one on
	// the same stack (see Rule.Release).
	QueueLengthBound  = 10000
	MaxQueueWaitBound = time.Minute
	maxRules          = 1000
)

// Def is one rule as the file gives it, checked and normalized.
type Def struct {
	Name         string
	Statement    string // hex id, lower case ("" for a table rule)
	Keyspace     string // with Table, for a table rule
	Table        string
	MaxInFlight  int
	QueueLength  int
	MaxQueueWait time.Duration
}

// Match describes what the rule matches, as messages and /statements show
// it: "ks.table" or "statement 0a1b...".
func (d Def) Match() string {
	if d.Statement != "" {
		return "statement " + d.Statement
	}
	return d.Keyspace + "." + d.Table
}

// fileRule is one entry of the file.
type fileRule struct {
	Name         string `yaml:"name"`
	Statement    string `yaml:"statement"`
	Table        string `yaml:"table"`
	MaxInFlight  *int   `yaml:"max_in_flight"`
	QueueLength  *int   `yaml:"queue_length"`
	MaxQueueWait string `yaml:"max_queue_wait"`
}

type file struct {
	Rules []fileRule `yaml:"rules"`
}

var (
	nameRE  = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)
	hexRE   = regexp.MustCompile(`^[0-9a-f]{2,64}$`)
	identRE = regexp.MustCompile(`^(?:[A-Za-z0-9_]{1,48}|"(?:[^"]|"")+")$`)
)

// Load reads and checks the rules file at path. An empty file, or one with
// no rules, is valid and caps nothing.
func Load(path string) ([]Def, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("rules file: %w", err)
	}
	defs, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("rules file %s: %w", path, err)
	}
	return defs, nil
}

// Parse checks the YAML of a rules file; its errors name every bad rule.
func Parse(data []byte) ([]Def, error) {
	var f file
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if len(f.Rules) > maxRules {
		return nil, fmt.Errorf("%d rules: at most %d", len(f.Rules), maxRules)
	}
	var errs []error
	defs := make([]Def, 0, len(f.Rules))
	names := map[string]bool{}
	matches := map[string]string{}
	for i, fr := range f.Rules {
		d, err := fr.def()
		if err != nil {
			errs = append(errs, fmt.Errorf("rule %d (%q): %w", i+1, fr.Name, err))
			continue
		}
		if names[d.Name] {
			errs = append(errs, fmt.Errorf("rule %d: name %q used twice", i+1, d.Name))
			continue
		}
		names[d.Name] = true
		if other, ok := matches[d.Match()]; ok {
			errs = append(errs, fmt.Errorf("rule %d (%q): %s is matched by rule %q already", i+1, d.Name, d.Match(), other))
			continue
		}
		matches[d.Match()] = d.Name
		defs = append(defs, d)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return defs, nil
}

func (fr fileRule) def() (Def, error) {
	d := Def{Name: fr.Name, QueueLength: DefaultQueueLength, MaxQueueWait: DefaultMaxQueueWait}
	if !nameRE.MatchString(fr.Name) {
		return d, errors.New("name: 1-64 letters, digits or _ . : - required")
	}
	switch {
	case fr.Statement != "" && fr.Table != "":
		return d, errors.New("give statement or table, not both")
	case fr.Statement != "":
		s := strings.ToLower(strings.TrimPrefix(fr.Statement, "0x"))
		if !hexRE.MatchString(s) || len(s)%2 != 0 {
			return d, fmt.Errorf("statement %q: a hex id as /statements shows it", fr.Statement)
		}
		d.Statement = s
	case fr.Table != "":
		ks, tb, err := splitTable(fr.Table)
		if err != nil {
			return d, err
		}
		d.Keyspace, d.Table = ks, tb
	default:
		return d, errors.New("statement or table required")
	}
	if fr.MaxInFlight == nil {
		return d, errors.New("max_in_flight required")
	}
	if d.MaxInFlight = *fr.MaxInFlight; d.MaxInFlight < 1 || d.MaxInFlight > MaxInFlightBound {
		return d, fmt.Errorf("max_in_flight %d: 1-%d", d.MaxInFlight, MaxInFlightBound)
	}
	if fr.QueueLength != nil {
		if d.QueueLength = *fr.QueueLength; d.QueueLength < 0 || d.QueueLength > QueueLengthBound {
			return d, fmt.Errorf("queue_length %d: 0-%d", d.QueueLength, QueueLengthBound)
		}
	}
	if fr.MaxQueueWait != "" {
		w, err := time.ParseDuration(fr.MaxQueueWait)
		if err != nil {
			return d, fmt.Errorf("max_queue_wait: %w", err)
		}
		if w <= 0 || w > MaxQueueWaitBound {
			return d, fmt.Errorf("max_queue_wait %s: above 0, at most %s", w, MaxQueueWaitBound)
		}
		d.MaxQueueWait = w
	}
	return d, nil
}

// splitTable parses "keyspace.table". Unquoted names are case-insensitive
// in CQL and stored in lower case, as /statements shows them; quoted ones
// keep their case and lose their quotes.
func splitTable(s string) (string, string, error) {
	i := strings.Index(s, ".")
	if strings.HasPrefix(s, `"`) {
		if j := strings.Index(s[1:], `".`); j >= 0 {
			i = j + 2
		}
	}
	if i <= 0 || i == len(s)-1 {
		return "", "", fmt.Errorf("table %q: keyspace.table required", s)
	}
	ks, tb := s[:i], s[i+1:]
	if !identRE.MatchString(ks) || !identRE.MatchString(tb) {
		return "", "", fmt.Errorf("table %q: keyspace.table required", s)
	}
	return ident(ks), ident(tb), nil
}

func ident(s string) string {
	if strings.HasPrefix(s, `"`) {
		return strings.ReplaceAll(s[1:len(s)-1], `""`, `"`)
	}
	return strings.ToLower(s)
}
