package layout

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// outsideCitation matches what a comment must not point to: the design
// handbook that is not in the repository, and issue numbers, which mean
// nothing to a reader of the code (docs/ARCHITECTURE.md is the design).
var outsideCitation = regexp.MustCompile(`DESIGN\.md|\b[Ii]ssues? #?\d+|\btask #?\d+`)

// TestNoOutsideCitations: comments point into the repository.
func TestNoOutsideCitations(t *testing.T) {
	root, _ := moduleRoot(t)
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				if m := outsideCitation.FindString(c.Text); m != "" {
					t.Errorf("%s: a comment cites %q; point to docs/ARCHITECTURE.md or the code instead", fset.Position(c.Pos()), m)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"see DESIGN.md", "(issue 24)", "Issue #3", "task 7"} {
		if !outsideCitation.MatchString(s) {
			t.Errorf("%q is not caught", s)
		}
	}
}
