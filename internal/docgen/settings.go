package docgen

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/cqlgate/cqlgate/pkg/config"
)

// SettingsData is what templates/settings.md.tmpl renders.
type SettingsData struct {
	Fields      []config.Field
	AnyReload   bool   // some setting can change without a restart
	ExampleYAML string // a config file with every YAML key at its default
}

// Settings renders docs/settings.md from the settings' descriptions
// (config.Fields()).
func Settings(fields []config.Field) ([]byte, error) {
	data := SettingsData{Fields: fields}
	for _, f := range fields {
		data.AnyReload = data.AnyReload || f.Reloadable
	}
	ex, err := ExampleConfig(fields)
	if err != nil {
		return nil, err
	}
	data.ExampleYAML = ex
	return render("settings.md.tmpl", data)
}

// ExampleConfig returns a YAML config file holding every setting the file
// can set, each preceded by its help text as a comment, at its default.
// Settings without a default, and secret ones (which belong in the
// environment), are commented out; the file loads as it is once the required
// settings are given, by flag or environment.
func ExampleConfig(fields []config.Field) (string, error) {
	var b strings.Builder
	for _, f := range fields {
		if f.YAML == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		comment(&b, f.Help)
		var notes []string
		if f.Required {
			notes = append(notes, "required")
		}
		if f.Secret {
			notes = append(notes, "secret: better set through $"+f.Env)
		}
		if len(notes) > 0 {
			comment(&b, "("+strings.Join(notes, "; ")+")")
		}
		if f.Default == "" || f.Secret {
			fmt.Fprintf(&b, "# %s:\n", f.YAML)
			continue
		}
		v, err := yamlValue(f)
		if err != nil {
			return "", err
		}
		var out strings.Builder
		enc := yaml.NewEncoder(&out)
		enc.SetIndent(2)
		if err := enc.Encode(map[string]any{f.YAML: v}); err != nil {
			return "", fmt.Errorf("setting %s: %w", f.Flag, err)
		}
		if err := enc.Close(); err != nil {
			return "", fmt.Errorf("setting %s: %w", f.Flag, err)
		}
		b.WriteString(out.String())
	}
	return b.String(), nil
}

// yamlValue converts a default, given in flag syntax, to the value the YAML
// file holds.
func yamlValue(f config.Field) (any, error) {
	bad := func(err error) (any, error) {
		return nil, fmt.Errorf("setting %s: default %q: %w", f.Flag, f.Default, err)
	}
	switch f.Type {
	case "list":
		var items []string
		for s := range strings.SplitSeq(f.Default, ",") {
			if s = strings.TrimSpace(s); s != "" {
				items = append(items, s)
			}
		}
		return items, nil
	case "int":
		n, err := strconv.Atoi(f.Default)
		if err != nil {
			return bad(err)
		}
		return n, nil
	case "bool":
		v, err := strconv.ParseBool(f.Default)
		if err != nil {
			return bad(err)
		}
		return v, nil
	case "float":
		v, err := strconv.ParseFloat(f.Default, 64)
		if err != nil {
			return bad(err)
		}
		return v, nil
	case "duration":
		d, err := time.ParseDuration(f.Default)
		if err != nil {
			return bad(err)
		}
		return d.String(), nil
	}
	return f.Default, nil
}

// comment writes text as YAML comment lines of at most 100 columns.
func comment(b *strings.Builder, text string) {
	col := 0
	for _, w := range strings.Fields(text) {
		switch {
		case col == 0:
			b.WriteString("#")
			col = 1
		case col+1+len(w) > 100:
			b.WriteString("\n#")
			col = 1
		}
		b.WriteString(" " + w)
		col += 1 + len(w)
	}
	if col > 0 {
		b.WriteByte('\n')
	}
}
