package onnx

import (
	"math"
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
	// The narrow and packed types, in raw_data and in int32_data.
	f.Add([]byte(tensorPB("x", Float16, 2).ints(tInt32Data, true, 0x3c00, 0x7e00)))
	f.Add([]byte(tensorPB("x", Bfloat16, 2).bytes(tRawData, le(2, 0x3f80, 0xff80))))
	f.Add([]byte(tensorPB("x", Float8E4M3FN, 3).bytes(tRawData, []byte{0x7e, 0x7f, 0x80})))
	f.Add([]byte(tensorPB("x", Float8E4M3FNUZ, 2).ints(tInt32Data, false, 0x80, 0x7f)))
	f.Add([]byte(tensorPB("x", Float8E5M2, 2).bytes(tRawData, []byte{0x7c, 0x7e})))
	f.Add([]byte(tensorPB("x", Float8E5M2FNUZ, 1).bytes(tRawData, []byte{0x80})))
	f.Add([]byte(tensorPB("x", Int4, 3).bytes(tRawData, []byte{0x87, 0x0f})))
	f.Add([]byte(tensorPB("x", Uint4, 3).ints(tInt32Data, true, 0xf1, 0x02)))
	f.Add([]byte(tensorPB("x", Int2, 5).bytes(tRawData, []byte{0xe4, 0x01})))
	f.Add([]byte(tensorPB("x", Uint2, 4).ints(tInt32Data, true, 0xe4)))
	f.Add([]byte(tensorPB("x", Float4E2M1, 3).bytes(tRawData, []byte{0x7f, 0x08})))
	f.Add([]byte(tensorPB("x", Float8E8M0, 3).ints(tInt32Data, true, 0, 0x7f, 0xff)))
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
		ss, serr := x.Strings()
		if ferr == nil && int64(len(fs)) != x.Len() || ierr == nil && int64(len(is)) != x.Len() || serr == nil && int64(len(ss)) != x.Len() {
			t.Fatalf("%d floats, %d ints, %d strings for Len %d", len(fs), len(is), len(ss), x.Len())
		}
		// A narrow float's values are float32 values: encoding one gives
		// back its bits (NaNs aside, whose payloads are not kept).
		if x.DataType == Float8E8M0 && ferr == nil {
			for k, v := range fs {
				if b, _ := encodeE8M0(v, true, "down"); !math.IsNaN(float64(v)) && b != x.raw[k] {
					t.Fatalf("element %d: %#x decodes to %v, which encodes to %#x", k, x.raw[k], v, b)
				}
			}
		}
		if mf, ok := minifloatOf(x.DataType); ok && ferr == nil {
			for k, v := range fs {
				if b := x.bitsAt(k); !math.IsNaN(float64(v)) && mf.encode(v, false) != b && !(v == 0 && mf.uz) {
					t.Fatalf("element %d: %#x decodes to %v, which encodes to %#x", k, b, v, mf.encode(v, false))
				}
			}
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
