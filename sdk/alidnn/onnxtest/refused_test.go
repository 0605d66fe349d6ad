package onnxtest

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/internal/testenv"
)

// TestExpectRefusal checks the verdicts on a listed folder: refused with
// the listed reason passes; passing, compiling or failing otherwise fails
// naming the listed reason; an unlisted folder keeps its result.
func TestExpectRefusal(t *testing.T) {
	// Any listed folder will do: the first by name, so that the test
	// outlives each entry.
	var name string
	for n := range refusals {
		if name == "" || n < name {
			name = n
		}
	}
	reason := refusals[name]
	if reason == "" {
		t.Fatal("no listed folder")
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
		// The errors quote the reason with %q.
		if !tc.pass && (r.Err == nil || !strings.Contains(r.Err.Error(), strconv.Quote(reason))) {
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
