package onnxtest_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// The ViT and the MobileNet-v3 net post-training-quantised to int8 against
// the rule for int8 models: every image's top-1 class equal to
// the fp32 reference's, or its output row's cosine similarity to the
// reference's at least 0.99 (the ViT's logits, the MobileNet's Softmax
// probabilities); the ViT's last_hidden_state's cosine is logged. Each set
// is compiled for its own shapes and calibrated on the sets of those
// shapes — here itself, as faas model test --int8 calibrates.
const int8Cosine = 0.99

func cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for k := range a {
		ab += float64(a[k]) * float64(b[k])
		aa += float64(a[k]) * float64(a[k])
		bb += float64(b[k]) * float64(b[k])
	}
	return ab / math.Sqrt(aa*bb)
}

// readSets reads the inputs and expected outputs of sets data sets.
func readSets(t *testing.T, dir string, sets int) (*onnx.Model, [][]*onnx.Tensor, [][]*onnx.Tensor) {
	t.Helper()
	m, err := onnx.ReadModel(filepath.Join(dir, "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	var ins, outs [][]*onnx.Tensor
	for s := range sets {
		sd := filepath.Join(dir, fmt.Sprintf("test_data_set_%d", s))
		var in, out []*onnx.Tensor
		for k, vi := range m.Graph.Inputs {
			x, err := onnx.ReadTensor(filepath.Join(sd, fmt.Sprintf("input_%d.pb", k)))
			if err != nil {
				t.Fatal(err)
			}
			x.Name = vi.Name
			in = append(in, x)
		}
		for k := range m.Graph.Outputs {
			y, err := onnx.ReadTensor(filepath.Join(sd, fmt.Sprintf("output_%d.pb", k)))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, y)
		}
		ins, outs = append(ins, in), append(outs, out)
	}
	return m, ins, outs
}

func TestInt8References(t *testing.T) {
	for _, c := range []struct {
		name         string
		sets, logits int // data sets; the output holding the logits
	}{{"vit_tiny", 3, 1}, {"vit_tiny_sdpa", 3, 1}, {"vit_tiny_timm", 3, 0}, {"trained_vit_tiny", 4, 1}, {"trained_bert_tiny", 4, 0}, {"mbv3_small_paddle", 4, 0}} {
		t.Run(c.name, func(t *testing.T) {
			dev := local(t)
			ctx := context.Background()
			m, ins, outs := readSets(t, filepath.Join("testdata", "generated", c.name), c.sets)
			for s := range c.sets {
				var opts []alidnn.Option
				for _, x := range ins[s] {
					dims := make([]int, len(x.Dims))
					for i, d := range x.Dims {
						dims[i] = int(d)
					}
					opts = append(opts, alidnn.WithShape(x.Name, dims...))
				}
				p, err := alidnn.Quantize(ctx, dev, m, sameShape(ins, s), opts...)
				if err != nil {
					t.Fatal(err)
				}
				sess, err := alidnn.Load(ctx, dev, p)
				if err != nil {
					t.Fatal(err)
				}
				res, err := sess.Run(ctx, ins[s]...)
				if err != nil {
					t.Fatal(err)
				}
				for o, want := range outs[s] {
					g, _ := res.Outputs[o].Float32s()
					w, _ := want.Float32s()
					if o != c.logits {
						t.Logf("set %d output %d %v: cosine %.5f", s, o, want.Dims, cosine(g, w))
						continue
					}
					rows := int(want.Dims[0])
					n := len(w) / rows
					same, worst := 0, 1.0
					for r := range rows {
						gr, wr := g[r*n:(r+1)*n], w[r*n:(r+1)*n]
						cos := cosine(gr, wr)
						worst = min(worst, cos)
						top := argmaxOf32(gr) == argmaxOf32(wr)
						if top {
							same++
						}
						if !top && cos < int8Cosine {
							t.Errorf("set %d image %d: top-1 %d, want %d, and cosine %.5f < %g", s, r, argmaxOf32(gr), argmaxOf32(wr), cos, int8Cosine)
						}
					}
					t.Logf("set %d output %d %v: top-1 equal on %d of %d images, cosine ≥ %.5f", s, o, want.Dims, same, rows, worst)
				}
			}
		})
	}
}

// sameShape returns the data sets whose inputs have set s's shapes.
func sameShape(ins [][]*onnx.Tensor, s int) [][]*onnx.Tensor {
	var out [][]*onnx.Tensor
	for _, in := range ins {
		if fmt.Sprint(in[0].Dims) == fmt.Sprint(ins[s][0].Dims) {
			out = append(out, in)
		}
	}
	return out
}
