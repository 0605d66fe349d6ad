package modelserver

import (
	"bytes"
	"testing"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// FuzzJSONTensor checks the fast path of JSON inputs against
// encoding/json's tokens: whatever the data, jsonTensor and tokenTensor
// both refuse it or both return the same tensor.
func FuzzJSONTensor(f *testing.F) {
	for _, seed := range []string{
		`[1, 2.5, -3e-2]`, `[[1, 2], [3]]`, `[ [ [1] ], 2 , 3 ]`, `[true, false, true]`, `[0, 1, 2]`,
		`[1, 2]`, `[1, 2, 3, 4]`, `[1,, 2, 3]`, `[1, 2, 3,]`, `[01, 2, 3]`, `[1., 2, 3]`, `[.5, 2, 3]`, `[+1, 2, 3]`,
		`[1e400, 2, 3]`, `[1, 2, "3"]`, `[1, 2, null]`, `[1, 2, {}]`, `3`, `[1, 2, 3] x`, `[1 2 3]`, `[[1][2]3]`,
		`[1E+2, -0, 0.0e-0]`, `[1, 2, 3]]`, `[[[[[[[[[[[1]]]]]]]]]], 2, 3]`, `[1, 2, 0x3]`, `[true1, 2, 3]`, `[1, 2, Infinity]`,
		"[1,\t2,\r\n3]", `[2147483648, 1, 1]`, `[9223372036854775808, 1, 1]`, `[1.0, 2, 3]`,
	} {
		for dt := range 4 {
			f.Add([]byte(seed), uint8(dt))
		}
	}
	types := []onnx.DataType{onnx.Float, onnx.Int32, onnx.Bool, onnx.Int8}
	f.Fuzz(func(t *testing.T, data []byte, k uint8) {
		dt := types[int(k)%len(types)]
		dims := []int64{3}
		fast, ferr := jsonTensor("x", dt, dims, data)
		slow, serr := tokenTensor("x", dt, dims, data)
		if (ferr == nil) != (serr == nil) {
			t.Fatalf("%s as %v: jsonTensor %v, tokenTensor %v", data, dt, ferr, serr)
		}
		if ferr == nil && !bytes.Equal(fast.RawData(), slow.RawData()) {
			t.Fatalf("%s as %v: jsonTensor % x, tokenTensor % x", data, dt, fast.RawData(), slow.RawData())
		}
	})
}

// TestScanElements checks that well-formed inputs take the fast path: the
// fuzz target alone would pass if scanElements refused everything.
func TestScanElements(t *testing.T) {
	for _, c := range []struct {
		data string
		dt   onnx.DataType
	}{
		{`[1, 2.5, -3e-2]`, onnx.Float}, {` [[1], [2, 3]] `, onnx.Float}, {`[0,-7,9]`, onnx.Int32}, {"[true,\n false, true]", onnx.Bool},
	} {
		if _, _, ok := scanElements([]byte(c.data), c.dt, 3); !ok {
			t.Errorf("%s as %v: not read by the fast path", c.data, c.dt)
		}
	}
}
