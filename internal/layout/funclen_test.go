package layout

import (
	"cmp"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Function-length limits: long functions hide the steps a reader
// has to reconstruct, so none may pass hardLimit and only a few softLimit.
const (
	softLimit   = 100 // lines
	maxOverSoft = 10  // functions
	hardLimit   = 150 // lines
)

// funcLen is one function declaration and its length in lines, from the
// func keyword to the closing brace.
type funcLen struct {
	name  string // package-relative, with the receiver type for methods
	pos   string // file:line relative to the module root
	lines int
}

// TestFunctionLength measures every function of the module's non-test Go
// files (generated files excepted) and fails when one is longer than
// hardLimit lines or more than maxOverSoft are longer than softLimit. `make
// lint` runs it with -v to print the figures.
func TestFunctionLength(t *testing.T) {
	root, _ := moduleRoot(t)
	funcs := measureFunctions(t, root)
	var overSoft []funcLen
	for _, f := range funcs {
		if f.lines > softLimit {
			overSoft = append(overSoft, f)
		}
		if f.lines > hardLimit {
			t.Errorf("%s: %s is %d lines, over the limit of %d", f.pos, f.name, f.lines, hardLimit)
		}
	}
	if len(overSoft) > maxOverSoft {
		t.Errorf("%d functions are over %d lines; at most %d may be", len(overSoft), softLimit, maxOverSoft)
	}
	t.Logf("%d functions over %d lines (at most %d), %d over %d (none allowed)",
		len(overSoft), softLimit, maxOverSoft, countOver(funcs, hardLimit), hardLimit)
	for _, f := range overSoft {
		t.Logf("  %4d  %s  %s", f.lines, f.name, f.pos)
	}
}

// countOver counts the functions longer than limit lines.
func countOver(funcs []funcLen, limit int) int {
	n := 0
	for _, f := range funcs {
		if f.lines > limit {
			n++
		}
	}
	return n
}

// measureFunctions returns every function declaration of the non-test,
// non-generated Go files under root, longest first. It skips the folders the
// go command skips (testdata, dot and underscore folders) and the build
// output (/build).
func measureFunctions(t *testing.T, root string) []funcLen {
	t.Helper()
	fset := token.NewFileSet()
	var funcs []funcLen
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (name == "testdata" || p == filepath.Join(root, "build") || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			start, end := fset.Position(fd.Pos()), fset.Position(fd.End())
			funcs = append(funcs, funcLen{
				name:  f.Name.Name + "." + funcName(fd),
				pos:   fmt.Sprintf("%s:%d", filepath.ToSlash(rel), start.Line),
				lines: end.Line - start.Line + 1,
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortStableFunc(funcs, func(a, b funcLen) int { return cmp.Compare(b.lines, a.lines) })
	return funcs
}

// funcName is fd's name, prefixed with its receiver's type for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	switch x := typ.(type) {
	case *ast.IndexExpr:
		typ = x.X
	case *ast.IndexListExpr:
		typ = x.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}
