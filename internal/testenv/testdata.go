package testenv

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// DevTestData is where the development machines keep the shared test data.
const DevTestData = "/work/shared/testdata"

// TestData returns the absolute path of rel (joined with filepath.Join) in
// the shared test data: data from outside the project (ONNX test models and
// such; see its README.md) that tests read but never copy into the
// repository.
//
// The test data folder is $FAAS_TESTDATA if set; else the first existing of
// ../shared/testdata next to the repository root (the folder holding go.mod
// above the working directory), shared/testdata in each folder above the
// root, and DevTestData. rel need not exist: the caller reports that.
//
// Without the folder the test is skipped, or fails when CI=true.
func TestData(t testing.TB, rel ...string) string {
	t.Helper()
	dir, tried, err := testDataDir()
	if err != nil {
		missing(t, "shared test data: %v", err)
		return "" // reached only if t's Skipf returns
	}
	if dir == "" {
		missing(t, "shared test data not found in %s; set FAAS_TESTDATA to its folder", strings.Join(tried, ", "))
		return ""
	}
	return filepath.Join(append([]string{dir}, rel...)...)
}

// testDataDir returns the test data folder, or "" and where it looked.
func testDataDir() (dir string, tried []string, err error) {
	isDir := func(p string) bool {
		fi, err := os.Stat(p)
		return err == nil && fi.IsDir()
	}
	if env := os.Getenv("FAAS_TESTDATA"); env != "" {
		abs, err := filepath.Abs(env)
		if err != nil {
			return "", nil, err
		}
		if !isDir(abs) {
			return "", nil, errors.New("FAAS_TESTDATA=" + env + " is not a folder")
		}
		return abs, nil, nil
	}
	var candidates []string
	if root, err := repoRoot(); err == nil {
		candidates = append(candidates, filepath.Join(root, "..", "shared", "testdata"))
		for a := filepath.Dir(root); ; a = filepath.Dir(a) {
			candidates = append(candidates, filepath.Join(a, "shared", "testdata"))
			if a == filepath.Dir(a) {
				break
			}
		}
	}
	candidates = append(candidates, DevTestData)
	for _, c := range candidates {
		c = filepath.Clean(c)
		if isDir(c) {
			return c, nil, nil
		}
		if !slices.Contains(tried, c) { // root/../shared is also the parent's shared
			tried = append(tried, c)
		}
	}
	return "", tried, nil
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
