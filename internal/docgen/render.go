package docgen

import (
	"bytes"
	"embed"
	"fmt"
	"strings"
	"text/template"
)

//go:embed templates/*.tmpl
var templateFS embed.FS

var templates = template.Must(template.New("").Funcs(template.FuncMap{
	"cell":  cell,
	"code":  code,
	"codes": codes,
	"hex":   HexCode,
	"join":  strings.Join,
}).ParseFS(templateFS, "templates/*.tmpl"))

// render executes one template. The output ends with exactly one newline.
func render(name string, data any) ([]byte, error) {
	var b bytes.Buffer
	if err := templates.ExecuteTemplate(&b, name, data); err != nil {
		return nil, fmt.Errorf("rendering %s: %w", name, err)
	}
	return append(bytes.TrimRight(b.Bytes(), "\n"), '\n'), nil
}

// cell makes text safe inside a Markdown table cell.
func cell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.ReplaceAll(s, "|", `\|`)
}

// code wraps s in backticks for Markdown, or returns "" for "".
func code(s string) string {
	if s == "" {
		return ""
	}
	return "`" + strings.ReplaceAll(s, "`", "'") + "`"
}

// codes wraps each of ss in backticks, comma-separated.
func codes(ss []string) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = code(s)
	}
	return strings.Join(out, ", ")
}
