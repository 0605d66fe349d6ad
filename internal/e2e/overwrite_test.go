package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// overwriteVersion copies the image of from over the listed version of to
// with crane, as the ISV whose docker configuration env names: the
// registry refuses it (TAG_INVALID, naming the version) and the tag still
// names to's image.
func overwriteVersion(t *testing.T, env []string, from, to pushed) {
	t.Helper()
	crane := goTool(t, "crane")
	cmd := exec.CommandContext(t.Context(), crane, "copy", "--insecure", from.ref, to.ref)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "TAG_INVALID") || !strings.Contains(string(out), "version 1.0.0") {
		t.Fatalf("crane copy over the listed version %s: %v, want TAG_INVALID naming the version:\n%s", to.ref, err, out)
	}
	t.Logf("crane copy over %s refused: %s", to.ref, lastLine(string(out)))
	cmd = exec.CommandContext(t.Context(), crane, "digest", "--insecure", to.ref)
	cmd.Env = env
	if out, err := cmd.Output(); err != nil || strings.TrimSpace(string(out)) != to.digest {
		t.Fatalf("after the refused copy %s names %q (%v), want %s", to.ref, out, err, to.digest)
	}
}

// goTool finds a tool `make tools` installs in GOPATH/bin (or on PATH).
func goTool(t *testing.T, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	out, err := exec.Command("go", "env", "GOPATH").Output()
	if err == nil {
		for _, dir := range filepath.SplitList(strings.TrimSpace(string(out))) {
			if st, err := os.Stat(filepath.Join(dir, "bin", name)); err == nil && !st.IsDir() {
				return filepath.Join(dir, "bin", name)
			}
		}
	}
	t.Fatalf("%s not found on PATH or in GOPATH/bin: run make tools", name)
	return ""
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
