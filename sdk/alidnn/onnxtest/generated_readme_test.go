package onnxtest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGeneratedFolders checks that testdata/generated holds exactly the
// generator's folders, and that its README counts them: the count went
// stale before.
func TestGeneratedFolders(t *testing.T) {
	root := filepath.Join("testdata", "generated")
	want := map[string]bool{}
	for _, c := range generatedCases(t) {
		want[c.name] = true
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		n++
		if !want[e.Name()] {
			t.Errorf("%s: a folder the generator does not write", filepath.Join(root, e.Name()))
		}
	}
	if n != len(want) {
		t.Errorf("%d folders, the generator writes %d", n, len(want))
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if s := fmt.Sprintf("one folder each, %d in all", len(want)); !strings.Contains(string(readme), s) {
		t.Errorf("README.md does not say %q", s)
	}
}
