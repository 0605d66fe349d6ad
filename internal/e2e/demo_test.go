package e2e

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// demoTimeout bounds `make demo` in the clone: building every program (the
// build cache is shared, but the clone's own packages compile again in their
// new folder) and the walk-through, which takes seconds on an idle machine.
const demoTimeout = 20 * time.Minute

// TestDemo proves that `make demo` works from a clone of the repository with
// nothing beside it: it clones the checkout's committed HEAD (uncommitted
// files are not relied upon, nor tested here) into a temporary folder, checks
// that no symbolic link in it points outside, and runs `make demo`
// (DEMO_NO_WAIT=1) there with HOME moved to an empty folder and
// FAAS_TESTDATA unset. It then checks that every step ran and that
// examples/mnist, through the SDK and faasd, classified each MNIST reference
// digit of the clone's testdata as its reference output does.
func TestDemo(t *testing.T) {
	pgFound := os.Getenv("FAAS_PG_BIN") != ""
	if _, err := os.Stat("/usr/lib/postgresql/15/bin/initdb"); err == nil {
		pgFound = true
	}
	if _, err := exec.LookPath("initdb"); err == nil {
		pgFound = true
	}
	if !pgFound {
		skipOrFail(t, "PostgreSQL server binaries not found (make tools installs them)")
	}
	for _, tool := range []string{"git", "make", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			skipOrFail(t, tool+" not found in PATH")
		}
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	clone := cloneHead(t, root)
	checkNoLinkOut(t, clone)

	ctx, cancel := context.WithTimeout(t.Context(), demoTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "demo")
	cmd.Dir = clone
	cmd.Env = append(movedEnv(t, clone, t.TempDir()), "DEMO_NO_WAIT=1")
	got, err := cmd.CombinedOutput()
	text := string(got)
	if err != nil {
		t.Fatalf("make demo in a clone of %s: %v\n%s", root, err, text)
	}
	for _, want := range []string{
		"[1/12] PostgreSQL", "[2/12] registry", "[3/12] acme publishes", "[4/12] the registry validates",
		"[5/12] alice subscribes", "[6/12] alice: faas login, faas load alidnn-dual", "[7/12] faas status", "[8/12] examples/mnist",
		"[9/12] faas trace replay", ": 0 differ", "[10/12] a CPU-only process", "of node demo-node (attachment ",
		"[11/12] the model server", "$ curl -sS", "output Plus214_Output_0: digit 2", "  models    http://",
		"[12/12] examples/ocr", `"FPGA as a Service" (turned 180°)`, `"Hello World 123" (turned 180°)`,
		"-int8 -size 28", `"FPGA as a Service", score`, `"Hello World 123", score`,
		"demo complete", "the portal at http://", "  portal    http://",
		// The model is the clone's own.
		"-model " + filepath.Join(clone, "testdata", "onnx", "models", "mnist", "model.onnx") + " ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	// The reference digits: test_data_set_0 is a 2, test_data_set_1 a 0;
	// the demo runs each 4 times on its slot, then once on the attachment.
	for set, digit := range map[string]string{"test_data_set_0": "2", "test_data_set_1": "0"} {
		re := regexp.MustCompile(`(?m)^\s*` + set + `: digit ` + digit + `, matches the reference`)
		if n := len(re.FindAllString(text, -1)); n != 5 {
			t.Errorf("%s classified as %s and matching %d times, want 5", set, digit, n)
		}
	}
	if strings.Contains(text, "MISMATCH") {
		t.Error("a digit did not match its reference")
	}
	if t.Failed() {
		t.Logf("demo output:\n%s", text)
	}
}

// skipOrFail skips the test for want of msg, or fails it when CI=true, as
// internal/testenv does for a missing dependency.
func skipOrFail(t *testing.T, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: a missing dependency is a failure)", msg)
	}
	t.Skip(msg)
}

// cloneHead clones the git checkout at root into a new temporary folder,
// detached at root's HEAD commit, and returns the clone's folder.
func cloneHead(t *testing.T, root string) string {
	t.Helper()
	head, err := exec.Command("git", "-C", root, "rev-parse", "--verify", "HEAD").Output()
	if err != nil {
		skipOrFail(t, root+" is not a git checkout with a commit ("+err.Error()+"): the demo runs from a clone of it")
	}
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	clone := filepath.Join(tmp, "repo")
	for _, args := range [][]string{
		{"clone", "--quiet", "--no-checkout", root, clone},
		{"-C", clone, "checkout", "--quiet", "--detach", strings.TrimSpace(string(head))},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return clone
}

// checkNoLinkOut fails the test if a symbolic link in the work tree at dir
// is absolute, broken, or leads outside dir.
func checkNoLinkOut(t *testing.T, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		target, err := os.Readlink(path)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(path, dir+string(filepath.Separator))
		resolved, err := filepath.EvalSymlinks(path)
		if err != nil {
			t.Errorf("symbolic link %s -> %s is broken: %v", name, target, err)
			return nil
		}
		rel, err := filepath.Rel(dir, resolved)
		if filepath.IsAbs(target) || err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			t.Errorf("symbolic link %s -> %s leads outside the clone", name, target)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// movedEnv returns the test's environment for a run in the clone at dir with
// HOME moved to home: without FAAS_TESTDATA, the XDG folders (so that they
// follow HOME) and PWD, and with the Go settings that lived under the old
// HOME given explicitly, so that the module and build caches are reused
// rather than filled again.
func movedEnv(t *testing.T, dir, home string) []string {
	t.Helper()
	keys := []string{"GOPATH", "GOMODCACHE", "GOCACHE", "GOPROXY", "GOSUMDB", "GONOSUMDB", "GOPRIVATE", "GOTOOLCHAIN"}
	out, err := exec.Command("go", append([]string{"env", "-json"}, keys...)...).Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	var goEnv map[string]string
	if err := json.Unmarshal(out, &goEnv); err != nil {
		t.Fatalf("go env -json: %v", err)
	}
	drop := map[string]bool{"HOME": true, "PWD": true, "OLDPWD": true, "FAAS_TESTDATA": true, "GOENV": true}
	for _, k := range keys {
		drop[k] = true
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !drop[k] && !strings.HasPrefix(k, "XDG_") {
			env = append(env, kv)
		}
	}
	env = append(env, "HOME="+home, "PWD="+dir)
	for _, k := range keys {
		if v := goEnv[k]; v != "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}
