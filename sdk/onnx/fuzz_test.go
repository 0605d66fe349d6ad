package onnx

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fpga-faas/faas/internal/testenv"
)

// realFiles returns the test data files (testdata/ at the repository root)
// matching patterns that are under 1 MiB.
func realFiles(f *testing.F, patterns ...string) [][]byte {
	var files [][]byte
	for _, p := range patterns {
		paths, _ := filepath.Glob(testenv.TestData(f, filepath.FromSlash(p)))
		for _, path := range paths {
			if b, err := os.ReadFile(path); err == nil && len(b) < 1<<20 {
				files = append(files, b)
			}
		}
	}
	return files
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(testModel()))
	for _, b := range realFiles(f, "onnx/node/*/model.onnx", "onnx/models/*/*.onnx") {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			return
		}
		for _, x := range m.Graph.Initializers {
			x.Float32s()
			x.Int64s()
			if _, err := EncodeTensor(x); err != nil {
				t.Errorf("decoded initializer %q does not encode: %v", x.Name, err)
			}
		}
	})
}

func FuzzDecodeTensor(f *testing.F) {
	for _, x := range []*Tensor{NewFloat32("f", []int64{2, 2}, []float32{1, 2, 3, 4})} {
		b, _ := EncodeTensor(x)
		f.Add(b)
	}
	f.Add([]byte(tensorPB("x", Int64, 3).ints(tInt64Data, true, -1, 0, 1)))
	// A transformer's inputs: token ids, an attention mask, a causal mask.
	for _, x := range []struct {
		typ DataType
		v   []int64
	}{{Int64, []int64{101, 2023, 102, 0}}, {Int32, []int64{1, 1, 0, 0}}, {Bool, []int64{1, 0, 1, 1}}} {
		t, err := NewInt("ids", x.typ, []int64{2, 2}, x.v)
		if err != nil {
			f.Fatal(err)
		}
		b, _ := EncodeTensor(t)
		f.Add(b)
	}
	f.Add([]byte(tensorPB("x", Uint8, 2).ints(tInt32Data, false, 0, 255)))
	f.Add([]byte(tensorPB("x", String, 2).str(tStringData, "a").str(tStringData, "b")))
	for _, b := range realFiles(f, "onnx/node/*/test_data_set_0/*.pb", "onnx/models/*/test_data_set_0/*.pb") {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		x, err := DecodeTensor(b)
		if err != nil {
			return
		}
		fs, ferr := x.Float32s()
		is, ierr := x.Int64s()
		if ferr == nil && int64(len(fs)) != x.Len() || ierr == nil && int64(len(is)) != x.Len() {
			t.Fatalf("%d floats, %d ints for Len %d", len(fs), len(is), x.Len())
		}
		// Encoding and decoding again gives the same tensor.
		e, err := EncodeTensor(x)
		if err != nil {
			t.Fatalf("decoded tensor does not encode: %v", err)
		}
		y, err := DecodeTensor(e)
		if err != nil {
			t.Fatalf("re-encoded tensor does not decode: %v", err)
		}
		e2, _ := EncodeTensor(y)
		if string(e) != string(e2) {
			t.Fatal("encoding is not stable")
		}
	})
}
