package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestData returns the absolute path of rel (joined with filepath.Join) in
// the test data from outside the project (ONNX test models and such; see
// testdata/README.md at the repository root).
//
// The test data folder is $FAAS_TESTDATA if set (a larger set laid out the
// same way), else testdata/ in the repository root: the nearest folder
// holding go.mod at or above the working directory. Nothing outside the
// checkout is searched. rel need not exist: the caller reports that.
//
// Without the folder the test is skipped, or fails when CI=true.
func TestData(t testing.TB, rel ...string) string {
	t.Helper()
	dir, err := testDataDir()
	if err != nil {
		missing(t, "test data: %v", err)
		return "" // reached only if t's Skipf returns
	}
	return filepath.Join(append([]string{dir}, rel...)...)
}

// testDataDir returns the test data folder.
func testDataDir() (string, error) {
	if env := os.Getenv("FAAS_TESTDATA"); env != "" {
		abs, err := filepath.Abs(env)
		if err != nil {
			return "", err
		}
		if !isDir(abs) {
			return "", fmt.Errorf("FAAS_TESTDATA=%s is not a folder", env)
		}
		return abs, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", fmt.Errorf("%w; set FAAS_TESTDATA to the test data folder", err)
	}
	dir := filepath.Join(root, "testdata")
	if !isDir(dir) {
		return "", fmt.Errorf("%s is not a folder; set FAAS_TESTDATA to the test data folder", dir)
	}
	return dir, nil
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// repoRoot returns the nearest folder holding go.mod at or above the working
// directory (go test runs tests in their package's folder).
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}
