package modelserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"testing"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// fuzzInputs and fuzzOutputs are a model with one input of each kind of
// conversion: floats, booleans and a signed integer narrower than int64.
var (
	fuzzInputs = []tensorSpec{
		{Name: "x", Type: onnx.Float, Shape: []int64{2, 2}},
		{Name: "m", Type: onnx.Bool, Shape: []int64{3}},
		{Name: "i", Type: onnx.Int8, Shape: []int64{2}},
	}
	fuzzOutputs = []tensorSpec{{Name: "y", Type: onnx.Float, Shape: []int64{2}}, {Name: "z", Type: onnx.Int64, Shape: []int64{1}}}
)

// withBinary appends binary data to a JSON header and returns the body and
// the header's length.
func withBinary(header string, data ...byte) ([]byte, int64) {
	return append([]byte(header), data...), int64(len(header))
}

func fuzzSeeds() []struct {
	body      []byte
	headerLen int64
} {
	flat := `{"id":"1","inputs":[{"name":"x","shape":[2,2],"datatype":"FP32","data":[1,2.5,-3,4e3]},` +
		`{"name":"m","shape":[3],"datatype":"BOOL","data":[true,false,true]},{"name":"i","shape":[2],"datatype":"INT8","data":[-128,127]}]}`
	nested := `{"inputs":[{"name":"i","shape":[2],"datatype":"INT8","data":[[1],[2]]},{"name":"x","shape":[2,2],"datatype":"FP32","data":[[1,2],[3,4]]},` +
		`{"name":"m","shape":[3],"datatype":"BOOL","data":[[true],[false,true]]}],"outputs":[{"name":"z"},{"name":"y","parameters":{"binary_data":true}}]}`
	bin, n := withBinary(`{"parameters":{"binary_data_output":true},"inputs":[`+
		`{"name":"x","shape":[2,2],"datatype":"FP32","parameters":{"binary_data_size":16}},`+
		`{"name":"m","shape":[3],"datatype":"BOOL","parameters":{"binary_data_size":3}},`+
		`{"name":"i","shape":[2],"datatype":"INT8","parameters":{"binary_data_size":2}}]}`,
		0, 0, 0x80, 0x3f, 0, 0, 0, 0x40, 0, 0, 0x40, 0x40, 0, 0, 0x80, 0x40, 1, 0, 1, 0xff, 0x7f)
	mixed, m := withBinary(`{"model_name":"t","inputs":[{"name":"x","shape":[2,2],"datatype":"FP32","data":[1,2,3,4]},`+
		`{"name":"m","shape":[3],"datatype":"BOOL","parameters":{"binary_data_size":3}},{"name":"i","shape":[2],"datatype":"INT8","data":[0,0]}]}`, 1, 1, 0)
	return []struct {
		body      []byte
		headerLen int64
	}{{[]byte(flat), -1}, {[]byte(nested), -1}, {bin, n}, {mixed, m}, {[]byte(`{"inputs":[]}`), -1}, {mixed, m + 1}}
}

// TestParseInferRequest checks the seeds' tensors: the flat, nested and
// binary forms of the same kind of request give the values they encode.
func TestParseInferRequest(t *testing.T) {
	seeds := fuzzSeeds()
	want := map[int][]string{
		0: {"[1 2.5 -3 4000]", "[1 0 1]", "[-128 127]"},
		1: {"[1 2 3 4]", "[1 0 1]", "[1 2]"},
		2: {"[1 2 3 4]", "[1 0 1]", "[-1 127]"},
		3: {"[1 2 3 4]", "[1 1 0]", "[0 0]"},
	}
	for k, s := range seeds {
		r, err := parseInferRequest(s.body, s.headerLen, fuzzInputs, fuzzOutputs)
		if _, ok := want[k]; !ok {
			if !errors.Is(err, ErrBadRequest) {
				t.Errorf("seed %d: %v, want ErrBadRequest", k, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("seed %d: %v", k, err)
		}
		for i, in := range r.Inputs {
			if got := values(t, in); got != want[k][i] {
				t.Errorf("seed %d, input %s: %s, want %s", k, in.Name, got, want[k][i])
			}
		}
	}
	r, _ := parseInferRequest(seeds[1].body, -1, fuzzInputs, fuzzOutputs)
	if !slices.Equal(r.Outputs, []requestedOutput{{index: 1}, {index: 0, binary: true}}) {
		t.Errorf("outputs %+v", r.Outputs)
	}
	r, _ = parseInferRequest(seeds[2].body, seeds[2].headerLen, fuzzInputs, fuzzOutputs)
	if !slices.Equal(r.Outputs, []requestedOutput{{index: 0, binary: true}, {index: 1, binary: true}}) {
		t.Errorf("binary_data_output: outputs %+v", r.Outputs)
	}
}

func values(t testing.TB, in *onnx.Tensor) string {
	t.Helper()
	if in.DataType == onnx.Float {
		return fmtSlice(floats(t, in))
	}
	v, err := in.Int64s()
	if err != nil {
		t.Fatal(err)
	}
	return fmtSlice(v)
}

func fmtSlice[T int64 | float32](v []T) string {
	var b bytes.Buffer
	b.WriteByte('[')
	for k, x := range v {
		if k > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.FormatFloat(float64(x), 'g', -1, 32))
	}
	b.WriteByte(']')
	return b.String()
}

// TestUint64Data reads UINT64 inputs of the whole range from JSON, binary
// data and typed contents alike, and refuses values beyond it.
func TestUint64Data(t *testing.T) {
	want := []uint64{0, math.MaxInt64 + 1, math.MaxUint64}
	in, err := jsonTensor("w", onnx.Uint64, []int64{3}, json.RawMessage(`[0, 9223372036854775808, 18446744073709551615]`))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := in.Uint64s(); !slices.Equal(got, want) {
		t.Errorf("JSON: %v, want %v", got, want)
	}
	b, err := tensorBytes(in)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := binaryTensor("w", onnx.Uint64, []int64{3}, b)
	if got, _ := bin.Uint64s(); err != nil || !slices.Equal(got, want) {
		t.Errorf("binary: %v, %v, want %v", got, err, want)
	}
	for _, data := range []string{`[-1, 0, 0]`, `[18446744073709551616, 0, 0]`, `[1.5, 0, 0]`} {
		if _, err := jsonTensor("w", onnx.Uint64, []int64{3}, json.RawMessage(data)); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s: %v, want ErrBadRequest", data, err)
		}
	}
}

// TestBinaryRoundTrip converts extreme values of every integer type and
// FP32 to binary data and back (BYTES: TestBytesData).
func TestBinaryRoundTrip(t *testing.T) {
	for dt := range protocolTypes {
		if !convertible(dt) || dt == onnx.String {
			continue
		}
		var in *onnx.Tensor
		if dt == onnx.Float {
			in = onnx.NewFloat32("t", []int64{3}, []float32{-math.MaxFloat32, 0.5, float32(math.Inf(1))})
		} else {
			lo, hi := int64(0), int64(1)
			switch dt.Size() {
			case 1, 2, 4:
				if dt != onnx.Bool {
					bits := 8*dt.Size() - 1
					lo, hi = -1<<bits, 1<<bits-1
					if dt == onnx.Uint8 || dt == onnx.Uint16 || dt == onnx.Uint32 {
						lo, hi = 0, 1<<(bits+1)-1
					}
				}
			case 8:
				lo, hi = math.MinInt64, math.MaxInt64
				if dt == onnx.Uint64 {
					lo = 0
				}
			}
			var err error
			if in, err = onnx.NewInt("t", dt, []int64{3}, []int64{lo, 0, hi}); err != nil {
				t.Fatal(err)
			}
		}
		b, err := tensorBytes(in)
		if err != nil {
			t.Fatal(err)
		}
		out, err := binaryTensor("t", dt, []int64{3}, b)
		if err != nil {
			t.Fatalf("%v: %v", dt, err)
		}
		if dt == onnx.Float {
			if got, want := floats(t, out), floats(t, in); !slices.Equal(got, want) {
				t.Errorf("%v: %v back, %v sent", dt, got, want)
			}
			continue
		}
		got, _ := out.Int64s()
		if want, _ := in.Int64s(); !slices.Equal(got, want) {
			t.Errorf("%v: %v back, %v sent", dt, got, want)
		}
	}
}

// FuzzParseInferRequest parses infer bodies, JSON and binary: nothing
// panics, every refusal is ErrBadRequest, and an accepted request holds
// each of the model's inputs with its shape and type, whose binary form
// converts back to the same tensor.
func FuzzParseInferRequest(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s.body, s.headerLen)
	}
	f.Fuzz(func(t *testing.T, body []byte, headerLen int64) {
		r, err := parseInferRequest(body, headerLen, fuzzInputs, fuzzOutputs)
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("%v is not ErrBadRequest", err)
			}
			return
		}
		for k, in := range r.Inputs {
			spec := fuzzInputs[k]
			if in.Name != spec.Name || in.DataType != spec.Type || !slices.Equal(in.Dims, spec.Shape) {
				t.Fatalf("input %d: %s %v %v for spec %+v", k, in.Name, in.DataType, in.Dims, spec)
			}
			b, err := tensorBytes(in)
			if err != nil {
				t.Fatal(err)
			}
			back, err := binaryTensor(in.Name, in.DataType, in.Dims, b)
			if err != nil {
				t.Fatal(err)
			}
			if c, _ := tensorBytes(back); !bytes.Equal(c, b) {
				t.Fatalf("input %s: binary round trip %x → %x", in.Name, b, c)
			}
		}
		for _, o := range r.Outputs {
			if o.index < 0 || o.index >= len(fuzzOutputs) {
				t.Fatalf("output index %d", o.index)
			}
		}
	})
}
