package onnxtest_test

import (
	"context"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestTrainedGPT2HeldOut is TestTrainedBertHeldOut for trained_gpt2_tiny:
// the reference's accuracy at the copy task's targets of 128 training and
// 128 held-out sequences (logged; the held-out one must be far above
// chance, 1/90), then 64 held-out sequences of 16 tokens in batches of 8
// on the simulator: in fp32 the logits within 1e-4 of the largest |logit|
// of the reference, and post-training-quantised to int8 (calibrated on
// 16 training sequences) fp32's top-1 kept at ≥ 95% of the targets.
//
// Measured with the committed weights: see the closing lines of the test's
// log; at the time of writing train and test accuracy 1.000.
func TestTrainedGPT2HeldOut(t *testing.T) {
	const batch, batches, S = 8, 8, trainedGPT2Seq
	w, err := trainedGPT2()
	if err != nil {
		t.Fatal(err)
	}
	trainAcc := w.copyAccuracy(newGPTCopyTask(trainedGPT2Cfg.seed).batch(128, S))
	testX := newGPTCopyTask(heldOutSeed+1).batch(128, S)
	testAcc := w.copyAccuracy(testX)
	t.Logf("float64 reference: copy accuracy train %.3f, test %.3f (chance 1/90)", trainAcc, testAcc)
	if testAcc < 0.9 {
		t.Errorf("test accuracy %.3f: the GPT-2 is not trained (rewrite with -update)", testAcc)
	}

	ctx := context.Background()
	dev := local(t)
	b, err := encodeModel(trainedGPT2Folder, 17, gpt2LMGraph(w))
	if err != nil {
		t.Fatal(err)
	}
	m, err := onnx.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	shape := []alidnn.Option{alidnn.WithShape("input_ids", batch, S), alidnn.WithShape("attention_mask", batch, S)}
	fp, err := alidnn.Compile(m, shape...)
	if err != nil {
		t.Fatal(err)
	}
	calTask := newGPTCopyTask(trainedGPT2Cfg.seed)
	cal := [][]*onnx.Tensor{w.lmSet(calTask.batch(batch, S), 0).ins, w.lmSet(calTask.batch(batch, S), 0).ins}
	q8, err := alidnn.Quantize(ctx, dev, m, cal, shape...)
	if err != nil {
		t.Fatal(err)
	}
	var sets []dataSet
	for k := range batches {
		sets = append(sets, w.lmSet(testX[k*batch:(k+1)*batch], 0))
	}
	outFP, out8 := runSets(t, dev, fp, sets), runSets(t, dev, q8, sets)

	var worst float64
	var n, agree, rightFP, right8 int
	for k, set := range sets {
		want, _ := set.outs[0].Float32s()
		worst = max(worst, worstRelError(outFP[k][0], want))
		for i := range batch {
			s := testX[k*batch+i]
			for _, pos := range copyTargets(S) {
				row := func(v []float32) []float32 { return v[(i*S+pos)*gptV : (i*S+pos+1)*gptV] }
				topFP, top8 := argmaxOf32(row(outFP[k][0])), argmaxOf32(row(out8[k][0]))
				agree += b2i(topFP == top8)
				rightFP += b2i(topFP == s[pos+1])
				right8 += b2i(top8 == s[pos+1])
				n++
			}
		}
	}
	t.Logf("%d targets of %d held-out sequences: fp32 worst error %.3g of the largest logit; int8 keeps fp32's top-1 at %d; accuracy fp32 %.3f, int8 %.3f",
		n, batch*batches, worst, agree, float64(rightFP)/float64(n), float64(right8)/float64(n))
	if worst > transformerTol {
		t.Errorf("fp32: worst error %.3g of the largest logit, want ≤ %g", worst, transformerTol)
	}
	if agree*100 < 95*n {
		t.Errorf("int8 keeps fp32's top-1 at %d of %d targets, want ≥ 95%%", agree, n)
	}
}
