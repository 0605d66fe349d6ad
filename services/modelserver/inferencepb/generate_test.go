package inferencepb

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGeneratedUpToDate runs doc.go's go:generate command into a temporary
// folder and compares what it writes with the committed code, so that a
// changed .proto, buf.gen.yaml or plugin version cannot go unregenerated.
// The first run builds buf, which takes a minute or two.
func TestGeneratedUpToDate(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for line := range strings.Lines(string(doc)) {
		if cmd, ok := strings.CutPrefix(line, "//go:generate "); ok {
			args = strings.Fields(cmd)
		}
	}
	if len(args) == 0 || args[0] != "go" {
		t.Fatal("doc.go has no //go:generate go ... line")
	}
	out := t.TempDir()
	cmd := exec.Command("go", append(args[1:], "-o", out)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", cmd.Args, err, b)
	}
	for _, name := range []string{"grpc_predict_v2.pb.go", "grpc_predict_v2_grpc.pb.go"} {
		want, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what `go generate` makes now: run it and commit the result", name)
		}
	}
}
