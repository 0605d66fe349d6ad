package alidnn_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestGatherInput gathers a FLOAT input [2,3,4] along axis 1 by an INT64
// input [2,2] holding a negative index, then adds 1 on the engine, through
// a program file; an index out of range fails the run naming it.
func TestGatherInput(t *testing.T) {
	g := &onnx.Graph{
		Initializers: []*onnx.Tensor{onnx.NewFloat32("one", nil, []float32{1})},
		Nodes: []*onnx.Node{
			{OpType: "Gather", Name: "pick", Inputs: []string{"data", "ids"}, Outputs: []string{"g"}, Attrs: []*onnx.Attribute{attrInt("axis", 1)}},
			{OpType: "Add", Inputs: []string{"g", "one"}, Outputs: []string{"y"}},
		},
		Inputs:  []onnx.ValueInfo{vinfo("data", 2, 3, 4), typed(vinfo("ids", 2, 2), onnx.Int64)},
		Outputs: []onnx.ValueInfo{vinfo("y", 2, 2, 2, 4)},
	}
	p := compileThroughFile(t, 13, g)
	data := ramp("data", []int64{2, 3, 4}, 1)
	df, _ := data.Float32s()
	ids := []int64{2, 0, -1, 1}
	res := runResult(t, p, data, ints64("ids", onnx.Int64, []int64{2, 2}, ids...))
	got, _ := res.Outputs[0].Float32s()
	k := 0
	for o := range 2 {
		for _, id := range ids {
			if id < 0 {
				id += 3
			}
			for w := range 4 {
				if want := df[(o*3+int(id))*4+w] + 1; got[k] != want {
					t.Fatalf("element %d (outer %d, index %d, %d): %v, want %v", k, o, id, w, got[k], want)
				}
				k++
			}
		}
	}
	s, err := alidnn.Load(context.Background(), local(t), p)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Run(context.Background(), data, ints64("ids", onnx.Int64, []int64{2, 2}, 0, 3, 1, 1))
	if !errors.Is(err, alidnn.ErrInput) || !strings.Contains(err.Error(), "index 3 (element 1)") {
		t.Errorf("index 3 of 3 rows: %v, want ErrInput naming it", err)
	}
}
