package layout

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docFiles are the handbooks whose backticked paths must exist in the tree.
// (README.md also names paths that a build makes, such as build/demo/bin,
// and outside ones, so it is not checked.)
var docFiles = []string{"docs/ARCHITECTURE.md"}

// docModule is the module path; a backticked import path is checked as the
// folder below it.
const docModule = "github.com/fpga-faas/faas/"

// docSpan matches a backticked span of markdown.
var docSpan = regexp.MustCompile("`([^`\n]+)`")

// docPathChars are the characters of a span that may name a path.
var docPathChars = regexp.MustCompile(`^[A-Za-z0-9_./-]+$`)

// docFileExts are the endings by which a span without a slash names a file
// at the module root.
var docFileExts = []string{".md", ".go", ".sql", ".yaml", ".yml", ".json", ".toml", ".mod"}

// docNotPaths are first path elements of spans that look like paths but are
// not paths of the tree (media types).
var docNotPaths = map[string]bool{"application": true, "text": true}

// docPaths returns the spans of text that name a path of the module: a
// span of path characters with a slash, not starting with one (those are
// URL paths) and whose first element has no dot (host names such as
// faas.dev/chip), or without a slash but ending in a file extension; an
// import path of the module is given relative to the module root.
func docPaths(text string) []string {
	var paths []string
	for _, m := range docSpan.FindAllStringSubmatch(text, -1) {
		s := strings.TrimPrefix(m[1], docModule)
		if s == strings.TrimSuffix(docModule, "/") {
			continue
		}
		if !docPathChars.MatchString(s) || strings.HasPrefix(s, "/") || strings.HasPrefix(s, ".") {
			continue
		}
		first, _, hasSlash := strings.Cut(s, "/")
		switch {
		case hasSlash:
			if strings.Contains(first, ".") || docNotPaths[first] {
				continue
			}
		default:
			ok := false
			for _, ext := range docFileExts {
				ok = ok || strings.HasSuffix(s, ext)
			}
			if !ok {
				continue
			}
		}
		// A package pattern ("services/agent/...") names its folder.
		s = strings.TrimSuffix(strings.TrimSuffix(s, "/..."), "/")
		paths = append(paths, s)
	}
	return paths
}

// TestDocPathsExist checks that every file or package the handbooks name
// in backticks exists, so that a rename or a removal cannot leave them
// pointing at nothing.
func TestDocPathsExist(t *testing.T) {
	root := layoutRoot(t)
	for _, name := range docFiles {
		text, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		paths := docPaths(string(text))
		if len(paths) == 0 {
			t.Errorf("%s names no path in backticks; is the checker broken?", name)
		}
		for _, p := range paths {
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(p))); err != nil {
				t.Errorf("%s names `%s`, which is not in the tree: fix the name or the text", name, p)
			}
		}
	}
}

func TestDocPaths(t *testing.T) {
	text := "See `shell/sim`, `github.com/fpga-faas/faas/sdk/poolapi`, `README.md`, `hdk/image/SPEC.md` and `services/...`; " +
		"not `/api/v1/attachments`, `faas.dev/chip`, `application/vnd.faas.image.v1`, `faas load`, " +
		"`OUT/<image>/image.yaml` nor `x`."
	got := strings.Join(docPaths(text), " ")
	if want := "shell/sim sdk/poolapi README.md hdk/image/SPEC.md services"; got != want {
		t.Errorf("docPaths = %q, want %q", got, want)
	}
}
