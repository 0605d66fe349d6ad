package onnxtest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/internal/testenv"
)

// TestExpectRefusal checks the verdicts on a listed folder: refused with
// the listed reason passes; passing, compiling or failing otherwise fails
// naming the listed reason; an unlisted folder keeps its result.
func TestExpectRefusal(t *testing.T) {
	const name = "test_cast_FLOAT_to_DOUBLE"
	reason := refusals[name]
	if reason == "" {
		t.Fatalf("%s is not listed", name)
	}
	for _, tc := range []struct {
		what    string
		in      Result
		pass    bool
		refused bool
	}{
		{"refused as listed", Result{Err: errors.New("compile: " + reason + ": unsupported")}, true, true},
		{"passes", Result{Pass: true, Sets: 1}, false, false},
		{"compiles but is wrong", Result{Worst: 3, Sets: 1}, false, false},
		{"refused otherwise", Result{Err: errors.New("compile: something else")}, false, false},
	} {
		r := tc.in
		r.Dir = "/data/" + name + "/"
		expectRefusal(&r)
		if r.Pass != tc.pass || (r.Refused != "") != tc.refused {
			t.Errorf("%s: pass %v, refused %q, want %v, %v", tc.what, r.Pass, r.Refused, tc.pass, tc.refused)
		}
		if !tc.pass && (r.Err == nil || !strings.Contains(r.Err.Error(), reason)) {
			t.Errorf("%s: error %v does not name the listed reason", tc.what, r.Err)
		}
	}
	r := Result{Dir: "/data/test_add", Err: errors.New("compile: broken")}
	expectRefusal(&r)
	if r.Pass || r.Refused != "" || r.Err.Error() != "compile: broken" {
		t.Errorf("unlisted folder: %+v", r)
	}
}

// TestRefusalsNameFolders checks that every listed test is a folder of the
// test data, so that the list cannot keep entries for tests long gone.
func TestRefusalsNameFolders(t *testing.T) {
	root := testenv.TestData(t, "onnx", "node")
	for name := range refusals {
		if _, err := os.Stat(filepath.Join(root, name, "model.onnx")); err != nil {
			t.Errorf("refusals lists %s: %v", name, err)
		}
	}
}
