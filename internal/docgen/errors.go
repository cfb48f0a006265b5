package docgen

import (
	"cmp"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/cqlgate/cqlgate/pkg/frame"
)

// ErrorSite is an error answer the proxy generates itself (rather than
// relaying Cassandra's), as found in its source.
type ErrorSite struct {
	Code    int32    // e.g. 0x1001
	Name    string   // the protocol's name of the code, e.g. "OVERLOADED"
	Message string   // the message, with "…" for the parts computed at run time ("…" alone: all of it)
	Where   []string // "pkg/proxy/request.go: (*request).admit", one per place
}

// errorCodes names the frame.ErrCode* constants after the protocol spec
// (native_protocol_v5.spec, section 8). A constant missing here makes
// ScanErrors fail, so that a new code cannot go undocumented.
var errorCodes = map[string]struct {
	code int32
	name string
}{
	"ErrCodeServer":          {frame.ErrCodeServer, "SERVER_ERROR"},
	"ErrCodeProtocol":        {frame.ErrCodeProtocol, "PROTOCOL_ERROR"},
	"ErrCodeBadCredentials":  {frame.ErrCodeBadCredentials, "BAD_CREDENTIALS"},
	"ErrCodeUnavailable":     {frame.ErrCodeUnavailable, "UNAVAILABLE"},
	"ErrCodeOverloaded":      {frame.ErrCodeOverloaded, "OVERLOADED"},
	"ErrCodeIsBootstrapping": {frame.ErrCodeIsBootstrapping, "IS_BOOTSTRAPPING"},
	"ErrCodeTruncate":        {frame.ErrCodeTruncate, "TRUNCATE_ERROR"},
	"ErrCodeWriteTimeout":    {frame.ErrCodeWriteTimeout, "WRITE_TIMEOUT"},
	"ErrCodeReadTimeout":     {frame.ErrCodeReadTimeout, "READ_TIMEOUT"},
	"ErrCodeReadFailure":     {frame.ErrCodeReadFailure, "READ_FAILURE"},
	"ErrCodeFunctionFailure": {frame.ErrCodeFunctionFailure, "FUNCTION_FAILURE"},
	"ErrCodeWriteFailure":    {frame.ErrCodeWriteFailure, "WRITE_FAILURE"},
	"ErrCodeSyntax":          {frame.ErrCodeSyntax, "SYNTAX_ERROR"},
	"ErrCodeUnauthorized":    {frame.ErrCodeUnauthorized, "UNAUTHORIZED"},
	"ErrCodeInvalid":         {frame.ErrCodeInvalid, "INVALID"},
	"ErrCodeConfig":          {frame.ErrCodeConfig, "CONFIG_ERROR"},
	"ErrCodeAlreadyExists":   {frame.ErrCodeAlreadyExists, "ALREADY_EXISTS"},
	"ErrCodeUnprepared":      {frame.ErrCodeUnprepared, "UNPREPARED"},
}

// ScanErrors parses the Go files under dir (tests excluded; paths in the
// result are relative to root) and returns the error answers they build:
// every call that passes a frame.ErrCode* constant followed by a message
// argument, e.g.
//
//	r.fail(frame.ErrCodeOverloaded, "cqlgate: "+reason.String())
//
// and every composite literal with a Code field set to such a constant and
// a Message field. Calls that pass a code alone (counting it in a metric, say)
// and comparisons are not answers and are skipped. Sites with the same code
// and message are merged. The result is sorted by code, then message.
func ScanErrors(root, dir string) ([]ErrorSite, error) {
	fset := token.NewFileSet()
	sites := make(map[string]*ErrorSite)
	var errs []error
	err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("scanning for error answers: %w", err)
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return fmt.Errorf("scanning for error answers: %w", err)
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			where := filepath.ToSlash(rel) + ": " + funcName(fd)
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				code, msg, ok := errorAnswer(n)
				if !ok {
					return true
				}
				c, known := errorCodes[code]
				if !known {
					errs = append(errs, fmt.Errorf("%s: unknown error code constant frame.%s: add it to docgen's errorCodes", fset.Position(n.Pos()), code))
					return true
				}
				text := messageText(msg)
				key := fmt.Sprintf("%08x %s", c.code, text)
				s := sites[key]
				if s == nil {
					s = &ErrorSite{Code: c.code, Name: c.name, Message: text}
					sites[key] = s
				}
				if !slices.Contains(s.Where, where) {
					s.Where = append(s.Where, where)
				}
				return true
			})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	out := make([]ErrorSite, 0, len(sites))
	for _, s := range sites {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b ErrorSite) int {
		return cmp.Or(cmp.Compare(a.Code, b.Code), cmp.Compare(a.Message, b.Message))
	})
	return out, nil
}

// errorAnswer recognizes a call or composite literal that builds an error
// answer, and returns the frame.ErrCode* constant's name and the message.
func errorAnswer(n ast.Node) (code string, msg ast.Expr, ok bool) {
	switch n := n.(type) {
	case *ast.CallExpr:
		for i, arg := range n.Args {
			if c, isCode := errCodeConst(arg); isCode && i+1 < len(n.Args) {
				return c, n.Args[i+1], true
			}
		}
	case *ast.CompositeLit:
		var codeName string
		var message ast.Expr
		for _, elt := range n.Elts {
			kv, isKV := elt.(*ast.KeyValueExpr)
			if !isKV {
				continue
			}
			switch key, _ := kv.Key.(*ast.Ident); {
			case key == nil:
			case key.Name == "Code":
				codeName, _ = errCodeConst(kv.Value)
			case key.Name == "Message" || key.Name == "Msg":
				message = kv.Value
			}
		}
		if codeName != "" && message != nil {
			return codeName, message, true
		}
	}
	return "", nil, false
}

// errCodeConst tells whether e is frame.ErrCode<Something>.
func errCodeConst(e ast.Expr) (string, bool) {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok || !strings.HasPrefix(sel.Sel.Name, "ErrCode") {
		return "", false
	}
	if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "frame" {
		return "", false
	}
	return sel.Sel.Name, true
}

// fmtVerb matches a fmt verb in a format string.
var fmtVerb = regexp.MustCompile(`%[-+# 0]*[0-9]*(\.[0-9]+)?[a-zA-Z]`)

// messageText renders a message expression: string literals as they are,
// fmt.Sprintf formats with their verbs as "…", anything else as "…".
func messageText(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind == token.STRING {
			if s, err := strconv.Unquote(e.Value); err == nil {
				return s
			}
		}
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			return messageText(e.X) + messageText(e.Y)
		}
	case *ast.ParenExpr:
		return messageText(e.X)
	case *ast.CallExpr:
		if sel, ok := e.Fun.(*ast.SelectorExpr); ok && len(e.Args) > 0 {
			if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "fmt" && (sel.Sel.Name == "Sprintf" || sel.Sel.Name == "Errorf") {
				if lit, ok := e.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if s, err := strconv.Unquote(lit.Value); err == nil {
						return strings.ReplaceAll(fmtVerb.ReplaceAllString(s, "…"), "%%", "%")
					}
				}
			}
		}
	}
	return "…"
}

// funcName names a function declaration as Go's stack traces do, e.g.
// "(*client).handshake" or "newMetrics".
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if idx, ok := t.(*ast.IndexExpr); ok { // generic receiver
		t = idx.X
	}
	switch t := t.(type) {
	case *ast.StarExpr:
		if id, ok := t.X.(*ast.Ident); ok {
			return "(*" + id.Name + ")." + fd.Name.Name
		}
	case *ast.Ident:
		return t.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// ErrorsData is what templates/errors.md.tmpl renders.
type ErrorsData struct {
	Sites []ErrorSite
}

// Errors renders docs/errors.md. Every code among sites must be described
// in the template's prose (as 0xNNNN); otherwise it returns an error naming
// the code, so that a new kind of answer cannot go undocumented.
func Errors(sites []ErrorSite) ([]byte, error) {
	prose, err := templateFS.ReadFile("templates/errors.md.tmpl")
	if err != nil {
		return nil, fmt.Errorf("reading errors template: %w", err)
	}
	var missing []string
	for _, s := range sites {
		hex := HexCode(s.Code)
		if !strings.Contains(string(prose), hex) && !slices.Contains(missing, hex) {
			missing = append(missing, hex)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("the proxy answers with error code(s) %s, which internal/docgen/templates/errors.md.tmpl does not describe", strings.Join(missing, ", "))
	}
	return render("errors.md.tmpl", ErrorsData{Sites: sites})
}

// HexCode formats an error code as the documents write it, e.g. "0x1001".
func HexCode(code int32) string { return fmt.Sprintf("0x%04X", code) }
