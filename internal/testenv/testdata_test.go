package testenv

import (
	"fmt"
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

// TestTestDataSearch lays out a repository and shared test data in a
// temporary folder and checks that TestData finds the data from a package
// folder, next to the root and further up.
func TestTestDataSearch(t *testing.T) {
	for _, tc := range []struct {
		name, repo, data string
	}{
		{"sibling", "repo", "shared/testdata"},
		{"ancestor", "a/b/repo", "shared/testdata"},
		{"nearest", "a/repo", "a/shared/testdata"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			repo := filepath.Join(tmp, tc.repo)
			pkg := filepath.Join(repo, "sdk", "onnx")
			data := filepath.Join(tmp, tc.data)
			for _, d := range []string{pkg, data, filepath.Join(tmp, "shared", "testdata")} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(repo, "go.mod"), []byte("module x\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Setenv("FAAS_TESTDATA", "")
			t.Chdir(pkg)
			if got, want := TestData(t, "README.md"), filepath.Join(data, "README.md"); got != want {
				t.Errorf("TestData = %s, want %s", got, want)
			}
		})
	}
}
