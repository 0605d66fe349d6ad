package modelserver

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/fpga-faas/faas/sdk/onnx"
	"github.com/fpga-faas/faas/services/modelserver/inferencepb"
)

// TestGRPCRequestKinds converts requests for the model of the fuzz seeds
// (FP32, BOOL and INT8 inputs) with typed contents and with raw contents:
// both give the values they encode, as the REST forms do.
func TestGRPCRequestKinds(t *testing.T) {
	input := func(name, dt string, shape []int64, c *inferencepb.InferTensorContents) *inferencepb.ModelInferRequest_InferInputTensor {
		return &inferencepb.ModelInferRequest_InferInputTensor{Name: name, Datatype: dt, Shape: shape, Contents: c}
	}
	typed := &inferencepb.ModelInferRequest{Id: "1", Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{
		input("i", "INT8", []int64{2}, &inferencepb.InferTensorContents{IntContents: []int32{-128, 127}}),
		input("x", "FP32", []int64{2, 2}, &inferencepb.InferTensorContents{Fp32Contents: []float32{1, 2.5, -3, 4e3}}),
		input("m", "BOOL", []int64{3}, &inferencepb.InferTensorContents{BoolContents: []bool{true, false, true}}),
	}}
	raw := &inferencepb.ModelInferRequest{Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{
		input("x", "FP32", []int64{2, 2}, nil), input("m", "BOOL", []int64{3}, nil), input("i", "INT8", []int64{2}, nil),
	}, RawInputContents: [][]byte{{0, 0, 0x80, 0x3f, 0, 0, 0, 0x40, 0, 0, 0x40, 0x40, 0, 0, 0x80, 0x40}, {1, 0, 1}, {0xff, 0x7f}}}
	for _, c := range []struct {
		name string
		req  *inferencepb.ModelInferRequest
		want []string
		raw  bool
	}{
		{"typed", typed, []string{"[1 2.5 -3 4000]", "[1 0 1]", "[-128 127]"}, false},
		{"raw", raw, []string{"[1 2 3 4]", "[1 0 1]", "[-1 127]"}, true},
	} {
		r, isRaw, err := grpcRequest(c.req, fuzzInputs, fuzzOutputs)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if isRaw != c.raw || r.ID != c.req.GetId() || len(r.Outputs) != len(fuzzOutputs) {
			t.Errorf("%s: raw %v, id %q, outputs %v", c.name, isRaw, r.ID, r.Outputs)
		}
		for i, in := range r.Inputs {
			if got := values(t, in); got != c.want[i] {
				t.Errorf("%s, input %s: %s, want %s", c.name, in.Name, got, c.want[i])
			}
		}
	}
	// A per-output binary_data asks for raw outputs, and names the outputs.
	typed.Outputs = []*inferencepb.ModelInferRequest_InferRequestedOutputTensor{{Name: "z", Parameters: map[string]*inferencepb.InferParameter{
		"binary_data": {ParameterChoice: &inferencepb.InferParameter_BoolParam{BoolParam: true}}}}}
	r, isRaw, err := grpcRequest(typed, fuzzInputs, fuzzOutputs)
	if err != nil || !isRaw || !slices.Equal(r.Outputs, []requestedOutput{{index: 1, binary: true}}) {
		t.Errorf("binary_data on output z: %v, raw %v, %v", r, isRaw, err)
	}
}

// TestGRPCContentsRange refuses typed contents out of their datatype's
// range, which the wider protobuf fields can hold.
func TestGRPCContentsRange(t *testing.T) {
	for _, c := range []struct {
		spec tensorSpec
		c    *inferencepb.InferTensorContents
		says string
	}{
		{tensorSpec{"i", onnx.Int8, []int64{1}}, &inferencepb.InferTensorContents{IntContents: []int32{128}}, "128 out of INT8 range"},
		{tensorSpec{"u", onnx.Uint8, []int64{1}}, &inferencepb.InferTensorContents{UintContents: []uint32{256}}, "256 out of UINT8 range"},
	} {
		if _, err := contentsTensor(c.spec, c.c); !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s %v: %v, want ErrBadRequest saying %q", datatypeName(c.spec.Type), c.c, err, c.says)
		}
	}
}

// TestTensorContentsRoundTrip turns tensors of every integer datatype and
// FP32 into typed contents and back.
func TestTensorContentsRoundTrip(t *testing.T) {
	vals := map[onnx.DataType][]int64{
		onnx.Bool: {1, 0}, onnx.Int8: {-128, 127}, onnx.Int16: {-32768, 32767}, onnx.Int32: {math.MinInt32, math.MaxInt32},
		onnx.Int64: {math.MinInt64, math.MaxInt64}, onnx.Uint8: {0, 255}, onnx.Uint16: {0, 65535}, onnx.Uint32: {0, math.MaxUint32},
		onnx.Uint64: {0, math.MaxInt64},
	}
	for dt, v := range vals {
		in, err := onnx.NewInt("t", dt, []int64{2}, v)
		if err != nil {
			t.Fatal(err)
		}
		c, err := tensorContents(in)
		if err != nil {
			t.Fatalf("%s: %v", datatypeName(dt), err)
		}
		out, err := contentsTensor(tensorSpec{"t", dt, []int64{2}}, proto.Clone(c).(*inferencepb.InferTensorContents))
		if err != nil {
			t.Fatalf("%s: contents %v: %v", datatypeName(dt), c, err)
		}
		if got := values(t, out); got != fmtSlice(v) {
			t.Errorf("%s: %v came back as %s", datatypeName(dt), v, got)
		}
	}
	// UINT64 beyond int64's range.
	w, err := onnx.NewUint64("w", []int64{2}, []uint64{math.MaxInt64 + 1, math.MaxUint64})
	if err != nil {
		t.Fatal(err)
	}
	c, err := tensorContents(w)
	if err != nil {
		t.Fatal(err)
	}
	back, err := contentsTensor(tensorSpec{"w", onnx.Uint64, []int64{2}}, c)
	if u, _ := back.Uint64s(); err != nil || !slices.Equal(u, []uint64{math.MaxInt64 + 1, math.MaxUint64}) {
		t.Errorf("UINT64: contents %v came back as %v, %v", c, u, err)
	}
	f := onnx.NewFloat32("f", []int64{3}, []float32{-1.5, 0, float32(math.Inf(1))})
	c, err = tensorContents(f)
	if err != nil || !slices.Equal(c.GetFp32Contents(), floats(t, f)) {
		t.Errorf("FP32: %v, %v", c, err)
	}
}

// FuzzGRPCRequest converts arbitrary ModelInferRequest messages: none
// panics, every refusal is ErrBadRequest, and an accepted one has every
// input of the model with its shape.
func FuzzGRPCRequest(f *testing.F) {
	for _, r := range []*inferencepb.ModelInferRequest{
		{Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{
			{Name: "x", Datatype: "FP32", Shape: []int64{2, 2}, Contents: &inferencepb.InferTensorContents{Fp32Contents: []float32{1, 2, 3, 4}}},
			{Name: "m", Datatype: "BOOL", Shape: []int64{3}, Contents: &inferencepb.InferTensorContents{BoolContents: []bool{true, false, true}}},
			{Name: "i", Datatype: "INT8", Shape: []int64{2}, Contents: &inferencepb.InferTensorContents{IntContents: []int32{-1, 1}}}}},
		{Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{
			{Name: "x", Datatype: "FP32", Shape: []int64{2, 2}}, {Name: "m", Datatype: "BOOL", Shape: []int64{3}}, {Name: "i", Datatype: "INT8", Shape: []int64{2}}},
			RawInputContents: [][]byte{make([]byte, 16), {1, 0, 1}, {0xff, 0x7f}},
			Outputs:          []*inferencepb.ModelInferRequest_InferRequestedOutputTensor{{Name: "y"}}},
	} {
		b, err := proto.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var r inferencepb.ModelInferRequest
		if proto.Unmarshal(b, &r) != nil {
			return
		}
		req, _, err := grpcRequest(&r, fuzzInputs, fuzzOutputs)
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("%v is not ErrBadRequest", err)
			}
			return
		}
		for k, in := range req.Inputs {
			if in == nil || !slices.Equal(in.Dims, fuzzInputs[k].Shape) || in.DataType != fuzzInputs[k].Type {
				t.Fatalf("input %d: %+v for spec %+v", k, in, fuzzInputs[k])
			}
		}
	})
}
