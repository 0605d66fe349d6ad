package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fpga-faas/faas/internal/testenv"
)

// demoTimeout bounds the whole demo: building nothing (TestDemo builds
// first), it takes seconds on an idle machine.
const demoTimeout = 10 * time.Minute

// TestDemo runs `make demo`'s program to completion (DEMO_NO_WAIT=1) with
// the programs built as the Makefile builds them, and checks that every
// step ran and that examples/mnist, through the SDK and faasd, classified
// each MNIST reference digit as its reference output does.
func TestDemo(t *testing.T) {
	testdata := testenv.TestData(t)
	pgFound := os.Getenv("FAAS_PG_BIN") != ""
	if _, err := os.Stat("/usr/lib/postgresql/15/bin/initdb"); err == nil {
		pgFound = true
	}
	if _, err := exec.LookPath("initdb"); err == nil {
		pgFound = true
	}
	if !pgFound && os.Getenv("CI") != "true" {
		t.Skip("PostgreSQL server binaries not found (make tools installs them)")
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+string(filepath.Separator),
		"./services/cmd/registry", "./services/cmd/faasd", "./hdk/cmd/hdk", "./sdk/cmd/faas",
		"./bitstreams/images/cmd/genbits", "./internal/cmd/demo", "./examples/mnist")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	ctx, cancel := context.WithTimeout(t.Context(), demoTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "demo"), "-bin", bin, "-testdata", testdata)
	cmd.Env = append(os.Environ(), "DEMO_NO_WAIT=1")
	got, err := cmd.CombinedOutput()
	text := string(got)
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, text)
	}
	for _, want := range []string{
		"[1/8] PostgreSQL", "[2/8] registry", "[3/8] acme publishes", "[4/8] the registry validates",
		"[5/8] alice subscribes", "[6/8] alice: faas login, faas load alidnn-dual", "[7/8] faas status", "[8/8] examples/mnist",
		"demo complete",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	// The reference digits: test_data_set_0 is a 2, test_data_set_1 a 0;
	// the demo runs each 4 times.
	for set, digit := range map[string]string{"test_data_set_0": "2", "test_data_set_1": "0"} {
		re := regexp.MustCompile(`(?m)^\s*` + set + `: digit ` + digit + `, matches the reference`)
		if n := len(re.FindAllString(text, -1)); n != 4 {
			t.Errorf("%s classified as %s and matching %d times, want 4", set, digit, n)
		}
	}
	if strings.Contains(text, "MISMATCH") {
		t.Error("a digit did not match its reference")
	}
	if t.Failed() {
		t.Logf("demo output:\n%s", text)
	}
}
