package config

import (
	"fmt"
	"strings"
)

const usageIntro = `Usage: cqlgate [flags]

cqlgate is a proxy for Cassandra's native protocol (CQL).

Settings come from, in increasing order of precedence: the defaults, the YAML
file named by --config, environment variables, and flags. Flags may be written
--name=value or --name value. Lists are comma-separated in flags and
environment variables (a flag given twice accumulates) and YAML lists in the
file. Durations use Go syntax: 300ms, 5s, 1m30s.

Flags:
`

// usage renders the help text: every flag with its type, description,
// environment variable, YAML key and default.
func (s *schema) usage() string {
	var b strings.Builder
	b.WriteString(usageIntro)
	for _, f := range s.fields {
		b.WriteString("  --" + f.Flag)
		if f.kind != kindBool {
			b.WriteString(" " + f.Type)
		}
		if f.Required {
			b.WriteString(" (required)")
		}
		b.WriteByte('\n')
		wrap(&b, f.Help, "        ", 80)
		src := "env " + f.Env
		if f.YAML != "" {
			src += ", yaml " + f.YAML
		}
		if f.Default != "" {
			src += fmt.Sprintf(", default %s", f.Default)
		}
		wrap(&b, "("+src+")", "        ", 80)
	}
	b.WriteString("  --help\n")
	wrap(&b, "show this help and exit", "        ", 80)
	b.WriteString("  --version\n")
	wrap(&b, versionHelp, "        ", 80)
	return b.String()
}

// wrap writes text word-wrapped to width columns, each line indented.
func wrap(b *strings.Builder, text, indent string, width int) {
	col := 0
	for _, w := range strings.Fields(text) {
		switch {
		case col == 0:
			b.WriteString(indent)
			col = len(indent)
		case col+1+len(w) > width:
			b.WriteString("\n" + indent)
			col = len(indent)
		default:
			b.WriteByte(' ')
			col++
		}
		b.WriteString(w)
		col += len(w)
	}
	if col > 0 {
		b.WriteByte('\n')
	}
}
