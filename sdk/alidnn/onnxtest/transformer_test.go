package onnxtest_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// The transformer reference cases against a tighter rule than the
// generated cases' per-element one: fp32 outputs within 1e-4 of the
// largest |output| of the float64 reference, every data set compiled for
// its own shapes (WithShape binds batch and sequence).
const transformerTol = 1e-4

// runFolder compiles and runs data set set of a generated folder, returning
// the outputs and the expected ones.
func runFolder(t *testing.T, dir string, set int, edit func([]*onnx.Tensor)) ([]*onnx.Tensor, []*onnx.Tensor, error) {
	t.Helper()
	m, err := onnx.ReadModel(filepath.Join(dir, "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	sd := filepath.Join(dir, fmt.Sprintf("test_data_set_%d", set))
	var ins, wants []*onnx.Tensor
	var opts []alidnn.Option
	for k, in := range m.Graph.Inputs {
		x, err := onnx.ReadTensor(filepath.Join(sd, fmt.Sprintf("input_%d.pb", k)))
		if err != nil {
			t.Fatal(err)
		}
		x.Name = in.Name
		dims := make([]int, len(x.Dims))
		for i, d := range x.Dims {
			dims[i] = int(d)
		}
		opts = append(opts, alidnn.WithShape(in.Name, dims...))
		ins = append(ins, x)
	}
	for k := range m.Graph.Outputs {
		w, err := onnx.ReadTensor(filepath.Join(sd, fmt.Sprintf("output_%d.pb", k)))
		if err != nil {
			t.Fatal(err)
		}
		wants = append(wants, w)
	}
	p, err := alidnn.Compile(m, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := alidnn.Load(ctx, local(t), p)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(ins)
	}
	res, err := s.Run(ctx, ins...)
	if err != nil {
		return nil, wants, err
	}
	return res.Outputs, wants, nil
}

func TestTransformerReferences(t *testing.T) {
	for _, c := range []struct {
		name string
		sets int
	}{{"bert_encoder", 4}, {"gpt2_decoder_block", 3}, {"vit_tiny", 3}, {"vit_tiny_sdpa", 3}, {"vit_tiny_timm", 3}, {"trained_vit_tiny", 4}, {"trained_bert_tiny", 4}} {
		for set := range c.sets {
			t.Run(fmt.Sprintf("%s/%d", c.name, set), func(t *testing.T) {
				got, want, err := runFolder(t, filepath.Join("testdata", "generated", c.name), set, nil)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(want) {
					t.Fatalf("%d outputs, want %d", len(got), len(want))
				}
				for o := range want {
					g, err := got[o].Float32s()
					if err != nil {
						t.Fatal(err)
					}
					w, err := want[o].Float32s()
					if err != nil {
						t.Fatal(err)
					}
					if len(g) != len(w) {
						t.Fatalf("output %d: %d values, want %d", o, len(g), len(w))
					}
					var big, worst float64
					for k := range w {
						big = max(big, math.Abs(float64(w[k])))
					}
					for k := range w {
						e := math.Abs(float64(g[k]) - float64(w[k]))
						if math.IsNaN(e) {
							e = math.Inf(1)
						}
						worst = max(worst, e)
					}
					t.Logf("output %d %v: worst |error| %.3g, %.3g of the largest |output| %.3g", o, want[o].Dims, worst, worst/big, big)
					if worst > transformerTol*big {
						t.Errorf("output %d: worst |error| %.3g beyond %g × the largest |output| %.3g", o, worst, transformerTol, big)
					}
				}
			})
		}
	}
}

// An id outside the vocabulary fails the run naming the input, as
// onnxruntime's Gather does; negative ids count from the table's end.
func TestEmbeddingIDBounds(t *testing.T) {
	dir := filepath.Join("testdata", "generated", "bert_encoder")
	setID := func(id int64) func([]*onnx.Tensor) {
		return func(ins []*onnx.Tensor) {
			v, err := ins[0].Int64s()
			if err != nil {
				t.Fatal(err)
			}
			v[3] = id
			ins[0] = intTensor(ins[0].Name, onnx.Int64, ins[0].Dims, v)
		}
	}
	for _, id := range []int64{bertV, -bertV - 1, 1 << 40} {
		_, _, err := runFolder(t, dir, 1, setID(id))
		if !errors.Is(err, alidnn.ErrInput) {
			t.Fatalf("id %d: %v, want ErrInput", id, err)
		}
		t.Log(err)
	}
	// −1 is the last row: the same output as bertV − 1.
	a, _, err := runFolder(t, dir, 1, setID(-1))
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := runFolder(t, dir, 1, setID(bertV-1))
	if err != nil {
		t.Fatal(err)
	}
	fa, _ := a[0].Float32s()
	fb, _ := b[0].Float32s()
	for k := range fa {
		if fa[k] != fb[k] {
			t.Fatalf("id −1 and %d differ at %d: %v, %v", bertV-1, k, fa[k], fb[k])
		}
	}
	// An INT32 tensor for an INT64 input is refused, not reinterpreted.
	_, _, err = runFolder(t, dir, 1, func(ins []*onnx.Tensor) {
		v, _ := ins[1].Int64s()
		ins[1] = intTensor(ins[1].Name, onnx.Int32, ins[1].Dims, v)
	})
	if !errors.Is(err, alidnn.ErrInput) {
		t.Fatalf("INT32 mask for an INT64 input: %v, want ErrInput", err)
	}
}
