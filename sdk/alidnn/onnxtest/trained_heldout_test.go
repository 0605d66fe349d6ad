package onnxtest_test

import (
	"context"
	"math"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestTrainedHeldOut runs the trained nets over more held-out images than
// their folders hold, on the simulator: in fp32 each output must be within
// the generated cases' tolerance of the reference, and post-training
// quantisation to int8 (calibrated on training images) must keep fp32's
// top-1 on nearly all of them. It logs the nets' accuracies.
func TestTrainedHeldOut(t *testing.T) {
	const (
		images = 64
		calib  = 8
	)
	ctx := context.Background()
	dev := local(t)
	for _, a := range trainedArchs {
		t.Run(a.folder, func(t *testing.T) {
			n, err := a.net()
			if err != nil {
				t.Fatal(err)
			}
			// The training stream's first images: those that set the BN
			// statistics, then the first steps'.
			trainX, trainY := newSynth(a.cfg.seed).batch(256)
			testX, testY := newSynth(heldOutSeed).batch(256)
			trainAcc, testAcc := n.accuracy(trainX, trainY), n.accuracy(testX, testY)
			t.Logf("float64 reference: train accuracy %.3f, test accuracy %.3f (chance %.3f)", trainAcc, testAcc, 1.0/synthClasses)
			if testAcc < 0.5 {
				t.Errorf("test accuracy %.3f: the net is not trained (rewrite with -update)", testAcc)
			}
			b, err := encodeModel(a.folder, 13, n.graph())
			if err != nil {
				t.Fatal(err)
			}
			m, err := onnx.Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			fp, err := alidnn.Compile(m)
			if err != nil {
				t.Fatal(err)
			}
			var cal [][]*onnx.Tensor
			for _, x := range trainX[:calib] {
				cal = append(cal, []*onnx.Tensor{onnx.NewFloat32("x", n.inputDims(), to32(x))})
			}
			q8, err := alidnn.Quantize(ctx, dev, m, cal)
			if err != nil {
				t.Fatal(err)
			}
			// A Load overwrites the device's previous program: one at a time.
			logits := func(p *alidnn.Program) [][]float32 {
				s, err := alidnn.Load(ctx, dev, p)
				if err != nil {
					t.Fatal(err)
				}
				var out [][]float32
				for _, x := range testX[:images] {
					res, err := s.Run(ctx, onnx.NewFloat32("x", n.inputDims(), to32(x)))
					if err != nil {
						t.Fatal(err)
					}
					f, err := res.Outputs[0].Float32s()
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, f)
				}
				return out
			}
			outFP, out8 := logits(fp), logits(q8)
			var worst float64
			var agree, rightFP, right8 int
			for k, x := range testX[:images] {
				vals := n.forward(from32(to32(x)))
				for j, want := range vals[len(vals)-1] {
					worst = max(worst, math.Abs(float64(outFP[k][j])-want)/(1e-5+1e-3*math.Abs(want)))
				}
				topFP, top8 := argmaxOf32(outFP[k]), argmaxOf32(out8[k])
				if topFP == top8 {
					agree++
				}
				if topFP == testY[k] {
					rightFP++
				}
				if top8 == testY[k] {
					right8++
				}
			}
			t.Logf("%d held-out images: fp32 worst error %.3g× the tolerance; int8 keeps fp32's top-1 on %d; accuracy fp32 %.3f, int8 %.3f",
				images, worst, agree, float64(rightFP)/images, float64(right8)/images)
			if worst > 1 {
				t.Errorf("fp32: worst error %.3g× the tolerance", worst)
			}
			if agree*100 < 95*images {
				t.Errorf("int8 keeps fp32's top-1 on %d of %d images, want ≥ 95%%", agree, images)
			}
		})
	}
}

func argmaxOf32(v []float32) int {
	best := 0
	for k := range v {
		if v[k] > v[best] {
			best = k
		}
	}
	return best
}
