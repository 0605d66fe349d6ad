package demo

import (
	"os"
	"path/filepath"
	"testing"
)

// TestFindTestData lays out a repository with outside test data beside it
// and checks that FindTestData takes the repository's own testdata from a
// folder inside it, and nothing outside the checkout when that is missing.
func TestFindTestData(t *testing.T) {
	for _, withData := range []bool{true, false} {
		t.Run(map[bool]string{true: "own", false: "none"}[withData], func(t *testing.T) {
			tmp, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			repo := filepath.Join(tmp, "repo")
			dirs := []string{filepath.Join(repo, "internal", "demo"), filepath.Join(tmp, "shared", "testdata"), filepath.Join(tmp, "testdata")}
			if withData {
				dirs = append(dirs, filepath.Join(repo, "testdata"))
			}
			for _, d := range dirs {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(repo, "go.mod"), []byte("module x\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Setenv("FAAS_TESTDATA", "")
			t.Chdir(filepath.Join(repo, "internal", "demo"))
			want := ""
			if withData {
				want = filepath.Join(repo, "testdata")
			}
			if got := FindTestData(); got != want {
				t.Errorf("FindTestData() = %q, want %q", got, want)
			}
		})
	}
}

func TestFindTestDataEnv(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("FAAS_TESTDATA", dir)
	if got := FindTestData(); got != dir {
		t.Errorf("FindTestData() = %q, want %q", got, dir)
	}
}
