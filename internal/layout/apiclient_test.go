package layout

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// rawAPIClients may send their own HTTP requests to /api/v1: the one
// client, and the server's own tests, which test the wire itself (raw
// bodies, headers, statuses the client would hide). internal/k8se2e's
// /api/v1 is the Kubernetes API server's, not the registry's.
var rawAPIClients = []string{
	"sdk/registryclient",
	"services/registry/api",
	"services/registry/server",
	"services/registry/keyrelease",
	"internal/k8se2e",
}

var (
	apiPath     = regexp.MustCompile(`"/api/v1|registryapi\.Prefix`)
	httpRequest = regexp.MustCompile(`http\.NewRequest|http\.(Get|Post|Head)\(|\.PostForm\(`)
)

// TestOneAPIClient: every caller of the registry's /api/v1 outside the
// server's own tests goes through sdk/registryclient, so that paths,
// credentials, the error envelope and limits live in one place.
func TestOneAPIClient(t *testing.T) {
	root, _ := moduleRoot(t)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		for _, dir := range rawAPIClients {
			if filepath.Dir(rel) == dir {
				return nil
			}
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if apiPath.Match(b) && httpRequest.Match(b) {
			t.Errorf("%s sends its own requests to /api/v1: use sdk/registryclient (its typed calls, or Do)", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
