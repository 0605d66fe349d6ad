package testenv

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// recorder is a testing.TB that records Skipf and Fatalf, which end the
// goroutine as testing's do but not the test, so that TestData's failure
// paths can be checked; see run.
type recorder struct {
	testing.TB
	skipped, fatal string
}

func (r *recorder) Helper() {}

func (r *recorder) Skipf(format string, args ...any) {
	r.skipped = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls f(r) in a goroutine of its own and waits for it to end.
func (r *recorder) run(f func(testing.TB)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
}

func TestTestDataEnv(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("FAAS_TESTDATA", dir)
	got := TestData(t, "onnx", "node")
	if want := filepath.Join(dir, "onnx", "node"); got != want {
		t.Errorf("TestData = %s, want %s", got, want)
	}
	if got := TestData(t); got != dir {
		t.Errorf("TestData() = %s, want %s", got, dir)
	}
}

func TestTestDataMissing(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "absent")
	t.Setenv("FAAS_TESTDATA", bad)
	for _, ci := range []string{"true", "false", ""} {
		t.Run("CI="+ci, func(t *testing.T) {
			t.Setenv("CI", ci)
			r := &recorder{TB: t}
			r.run(func(tb testing.TB) { TestData(tb, "x") })
			msg, other := r.skipped, r.fatal
			if ci == "true" {
				msg, other = r.fatal, r.skipped
			}
			if msg == "" || other != "" {
				t.Fatalf("skipped %q, fatal %q", r.skipped, r.fatal)
			}
			if !strings.Contains(msg, bad) || !strings.Contains(msg, "FAAS_TESTDATA") {
				t.Errorf("message %q names neither %s nor FAAS_TESTDATA", msg, bad)
			}
		})
	}
}

// layoutRepo makes a repository (a go.mod) at tmp/repo with a package
// folder, outside test data beside it (testdata in tmp/shared) and, if
// withData, the repository's own testdata; it returns the repository root
// and moves the working directory into the package folder, as go test does.
func layoutRepo(t *testing.T, withData bool) string {
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(tmp, "repo")
	pkg := filepath.Join(repo, "sdk", "onnx")
	dirs := []string{pkg, filepath.Join(tmp, "shared", "testdata")}
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
	t.Chdir(pkg)
	return repo
}

// TestTestDataRepo checks that the default is the repository's own testdata
// even with outside test data beside the repository.
func TestTestDataRepo(t *testing.T) {
	repo := layoutRepo(t, true)
	if got, want := TestData(t, "README.md"), filepath.Join(repo, "testdata", "README.md"); got != want {
		t.Errorf("TestData = %s, want %s", got, want)
	}
}

// TestTestDataNoOutsideSearch checks that a repository without testdata
// does not fall back to test data outside the checkout.
func TestTestDataNoOutsideSearch(t *testing.T) {
	repo := layoutRepo(t, false)
	t.Setenv("CI", "true")
	r := &recorder{TB: t}
	var got string
	r.run(func(tb testing.TB) { got = TestData(tb, "README.md") })
	if r.fatal == "" {
		t.Fatalf("TestData = %q, want a failure", got)
	}
	if want := filepath.Join(repo, "testdata"); !strings.Contains(r.fatal, want) || !strings.Contains(r.fatal, "FAAS_TESTDATA") {
		t.Errorf("message %q names neither %s nor FAAS_TESTDATA", r.fatal, want)
	}
}

// TestRepoTestDataSums checks the repository's testdata against its
// SHA256SUMS (see testdata/README.md): every file listed is there with its
// sum, every data file is listed, and none is a symbolic link.
func TestRepoTestDataSums(t *testing.T) {
	t.Setenv("FAAS_TESTDATA", "")
	dir := TestData(t)
	sums, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for i, line := range strings.Split(strings.TrimSuffix(string(sums), "\n"), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok || len(sum) != 64 {
			t.Fatalf("SHA256SUMS line %d: %q is not \"<sha256>  <path>\"", i+1, line)
		}
		want[name] = sum
	}
	seen := 0
	for _, root := range []string{"onnx", "ocr"} {
		seen += checkSums(t, dir, root, want)
	}
	if seen != len(want) {
		t.Errorf("%d files of SHA256SUMS found under onnx/ and ocr/, want %d", seen, len(want))
	}
}

// checkSums checks every file under dir/root against want (sha256 by path
// relative to dir) and returns how many it found listed.
func checkSums(t *testing.T, dir, root string, want map[string]string) int {
	t.Helper()
	seen := 0
	err := filepath.WalkDir(filepath.Join(dir, root), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if !d.Type().IsRegular() {
			t.Errorf("%s is not a regular file (%v)", rel, d.Type())
			return nil
		}
		sum, ok := want[rel]
		if !ok {
			t.Errorf("%s is not in SHA256SUMS", rel)
			return nil
		}
		seen++
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if got := fmt.Sprintf("%x", sha256.Sum256(b)); got != sum {
			t.Errorf("%s: sha256 %s, SHA256SUMS says %s", rel, got, sum)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return seen
}
