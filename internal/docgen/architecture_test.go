package docgen_test

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The code references of docs/architecture.md, as its opening comment
// describes them: a backticked path under pkg/, cmd/ or internal/ names a
// file (ending in .go) or a package directory, and every backticked
// function reference after it, `(*T).Method`, `(T).Method` or `Func()`,
// must be declared there, until the next path. Fenced code blocks and
// HTML comments are skipped.
var (
	codeSpan = regexp.MustCompile("`([^`\n]+)`")
	pathRef  = regexp.MustCompile(`^(pkg|cmd|internal)(/[A-Za-z0-9_.-]+)+$`)
	methRef  = regexp.MustCompile(`^\((\*?)([A-Za-z_][A-Za-z0-9_]*)\)\.([A-Za-z_][A-Za-z0-9_]*)$`)
	funcRef  = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)\(\)$`)
)

// decl is one function or method declaration: recv is "" for a function,
// "*T" or "T" for a method.
type decl struct{ recv, name string }

// declsIn parses the non-test Go files at path (a file, or a package
// directory) and returns their functions and methods.
func declsIn(t *testing.T, path string) map[decl]bool {
	t.Helper()
	var files []string
	if strings.HasSuffix(path, ".go") {
		files = []string{path}
	} else {
		all, err := filepath.Glob(filepath.Join(path, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range all {
			if !strings.HasSuffix(f, "_test.go") {
				files = append(files, f)
			}
		}
	}
	out := make(map[decl]bool)
	fset := token.NewFileSet()
	for _, f := range files {
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parsing %s: %v", f, err)
		}
		for _, d := range af.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			recv := ""
			if fd.Recv != nil && len(fd.Recv.List) == 1 {
				recv = recvName(fd.Recv.List[0].Type)
			}
			out[decl{recv, fd.Name.Name}] = true
		}
	}
	return out
}

// recvName renders a receiver type as "*T" or "T", without type parameters.
func recvName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return "*" + recvName(x.X)
	case *ast.Ident:
		return x.Name
	case *ast.IndexExpr:
		return recvName(x.X)
	case *ast.IndexListExpr:
		return recvName(x.X)
	}
	return "?"
}

// TestArchitectureNamesRealCode checks that every function and method
// docs/architecture.md names is declared in the file or package named
// before it, so that renaming one breaks this test until the document
// follows.
func TestArchitectureNamesRealCode(t *testing.T) {
	root := filepath.Join("..", "..")
	f, err := os.Open(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	cache := make(map[string]map[decl]bool)
	scope, fence, comment := "", false, false
	paths, funcs := 0, 0
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		if fence {
			continue
		}
		// The opening HTML comment describes the syntax with examples.
		if strings.Contains(line, "<!--") {
			comment = true
		}
		if comment {
			if strings.Contains(line, "-->") {
				comment = false
			}
			continue
		}
		for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
			ref := m[1]
			var want decl
			switch {
			case pathRef.MatchString(ref):
				p := filepath.Join(root, filepath.FromSlash(ref))
				st, err := os.Stat(p)
				if err != nil {
					t.Errorf("line %d: `%s` does not exist", n, ref)
					scope = ""
					continue
				}
				if !st.IsDir() && !strings.HasSuffix(ref, ".go") {
					continue // a file that is not Go source: no scope
				}
				scope = ref
				if cache[ref] == nil {
					cache[ref] = declsIn(t, p)
				}
				paths++
				continue
			case methRef.MatchString(ref):
				s := methRef.FindStringSubmatch(ref)
				want = decl{s[1] + s[2], s[3]}
			case funcRef.MatchString(ref):
				want = decl{"", funcRef.FindStringSubmatch(ref)[1]}
			default:
				continue
			}
			funcs++
			if scope == "" {
				t.Errorf("line %d: `%s` follows no `pkg/...` file or package reference", n, ref)
				continue
			}
			if !cache[scope][want] {
				t.Errorf("line %d: `%s` is not declared in %s", n, ref, scope)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	// A document whose references stopped matching the syntax would pass
	// vacuously.
	t.Logf("%d path and %d function references checked", paths, funcs)
	if paths < 20 || funcs < 60 {
		t.Errorf("docs/architecture.md has %d path and %d function references; expected at least 20 and 60 (is the reference syntax still the one this test reads?)", paths, funcs)
	}
}
