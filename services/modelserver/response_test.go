package modelserver

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"testing"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// refOutput is an output of an $inference_response as encoding/json
// writes it, the reference of newResponse's hand-written JSON.
type refOutput struct {
	Name       string         `json:"name"`
	Shape      []int64        `json:"shape"`
	Datatype   string         `json:"datatype"`
	Parameters map[string]any `json:"parameters,omitempty"`
	Data       any            `json:"data,omitempty"`
}

type refResponse struct {
	ModelName    string      `json:"model_name"`
	ModelVersion string      `json:"model_version"`
	ID           string      `json:"id,omitempty"`
	Outputs      []refOutput `json:"outputs"`
}

// TestResponseJSON checks newResponse's JSON byte for byte against
// encoding/json's, on floats across every magnitude, integers, booleans,
// binary outputs and names that need escaping.
func TestResponseJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	f := []float32{0, 1, -1, 0.1, 1e-6, 9.99e-7, 1e-7, 1.5e-30, 1e20, 1e21, 3.4e38, -2.5e-9, math.SmallestNonzeroFloat32, float32(math.Copysign(0, -1))}
	for range 200 {
		f = append(f, math.Float32frombits(rng.Uint32()&^(0xff<<23)|uint32(rng.IntN(254)+1)<<23))
	}
	ints, err := onnx.NewInt("i\"<&>é", onnx.Int32, []int64{3}, []int64{-7, 0, math.MaxInt32})
	if err != nil {
		t.Fatal(err)
	}
	bools, err := onnx.NewInt("b", onnx.Bool, []int64{2}, []int64{1, 0})
	if err != nil {
		t.Fatal(err)
	}
	wide, err := onnx.NewUint64("w", []int64{3}, []uint64{0, math.MaxInt64 + 1, math.MaxUint64})
	if err != nil {
		t.Fatal(err)
	}
	outs := []*onnx.Tensor{onnx.NewFloat32("f", []int64{1, int64(len(f))}, f), ints, bools, onnx.NewFloat32("scalar", nil, []float32{2}), wide}
	for _, id := range []string{"", "r-1", "\x01\u2028<x>"} {
		for _, binary := range []bool{false, true} {
			req := &inferRequest{ID: id}
			want := refResponse{ModelName: "mnist", ModelVersion: "1", ID: id}
			for k, o := range outs {
				bin := binary && k%2 == 1
				req.Outputs = append(req.Outputs, requestedOutput{index: k, binary: bin})
				ro := refOutput{Name: o.Name, Shape: o.Dims, Datatype: datatypeName(o.DataType)}
				if ro.Shape == nil {
					ro.Shape = []int64{}
				}
				switch {
				case bin:
					ro.Parameters = map[string]any{"binary_data_size": len(o.RawData())}
				case o.DataType == onnx.Float:
					ro.Data, _ = o.Float32s()
				case o.DataType == onnx.Bool:
					v, _ := o.Int64s()
					ro.Data = []bool{v[0] != 0, v[1] != 0}
				case o.DataType == onnx.Uint64:
					ro.Data, _ = o.Uint64s()
				default:
					ro.Data, _ = o.Int64s()
				}
				want.Outputs = append(want.Outputs, ro)
			}
			wantJSON, err := json.Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			r, err := newResponse("mnist", "1", req, outs)
			if err != nil {
				t.Fatal(err)
			}
			w := httptest.NewRecorder()
			r.write(w)
			got := w.Body.Bytes()
			if binary {
				got = got[:len(wantJSON)]
			}
			if !bytes.Equal(got, wantJSON) {
				k := 0
				for k < min(len(got), len(wantJSON)) && got[k] == wantJSON[k] {
					k++
				}
				from := max(k-40, 0)
				t.Errorf("id %q, binary %v: the JSON differs at byte %d:\n got …%s\nwant …%s", id, binary, k, got[from:min(k+40, len(got))], wantJSON[from:min(k+40, len(wantJSON))])
			}
		}
	}
	nan := onnx.NewFloat32("n", []int64{1}, []float32{float32(math.NaN())})
	if _, err := newResponse("m", "1", &inferRequest{Outputs: []requestedOutput{{index: 0}}}, []*onnx.Tensor{nan}); err == nil {
		t.Error("a NaN output answered as JSON")
	}
}
