package onnxtest_test

import (
	"context"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestTrainedInt8 runs the trained nets over held-out images in fp32 and
// post-training-quantised to int8 (calibrated on training images) on the
// simulator: int8 must keep fp32's top-1 on nearly all of them.
func TestTrainedInt8(t *testing.T) {
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
			tops := func(p *alidnn.Program) []int {
				s, err := alidnn.Load(ctx, dev, p)
				if err != nil {
					t.Fatal(err)
				}
				var top []int
				for _, x := range testX[:images] {
					res, err := s.Run(ctx, onnx.NewFloat32("x", n.inputDims(), to32(x)))
					if err != nil {
						t.Fatal(err)
					}
					f, err := res.Outputs[0].Float32s()
					if err != nil {
						t.Fatal(err)
					}
					top = append(top, argmaxOf32(f))
				}
				return top
			}
			topFP, top8 := tops(fp), tops(q8)
			var agree, rightFP, right8 int
			for k := range images {
				if topFP[k] == top8[k] {
					agree++
				}
				if topFP[k] == testY[k] {
					rightFP++
				}
				if top8[k] == testY[k] {
					right8++
				}
			}
			t.Logf("%d held-out images: int8 keeps fp32's top-1 on %d; accuracy fp32 %.3f, int8 %.3f",
				images, agree, float64(rightFP)/images, float64(right8)/images)
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
