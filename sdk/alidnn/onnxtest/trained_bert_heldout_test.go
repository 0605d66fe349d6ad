package onnxtest_test

import (
	"context"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestTrainedBertHeldOut is TestTrainedViTHeldOut for trained_bert_tiny:
// the reference's accuracy on 256 training and 256 held-out sequences
// (logged; the held-out one must be clearly above chance, 1/2), then 64
// held-out sequences of 16 tokens in batches of 8 on the simulator: in
// fp32 the logits within 1e-4 of the largest |logit| of the reference, and
// post-training-quantised to int8 (calibrated on 16 training sequences)
// fp32's top-1 kept on ≥ 95% of them.
//
// Measured with the committed weights: train accuracy 0.965, test 0.957;
// fp32 worst error 3e-7 of the largest logit; int8 keeps fp32's top-1 on
// all 64 (both right on 0.938 of them).
func TestTrainedBertHeldOut(t *testing.T) {
	const batch, batches, S = 8, 8, trainedBertSeq
	w, err := trainedBert()
	if err != nil {
		t.Fatal(err)
	}
	trainX, trainY := newBertTask(trainedBertCfg.seed).batch(256, S)
	testX, testY := newBertTask(heldOutSeed).batch(256, S)
	trainAcc, testAcc := w.accuracy(trainX, trainY), w.accuracy(testX, testY)
	t.Logf("float64 reference: train accuracy %.3f, test accuracy %.3f (chance 0.5)", trainAcc, testAcc)
	if testAcc < 0.8 {
		t.Errorf("test accuracy %.3f: the BERT is not trained (rewrite with -update)", testAcc)
	}

	ctx := context.Background()
	dev := local(t)
	b, err := encodeModel(trainedBertFolder, 17, bertClassifierGraph(w))
	if err != nil {
		t.Fatal(err)
	}
	m, err := onnx.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	var shape []alidnn.Option
	for _, name := range []string{"input_ids", "attention_mask", "token_type_ids"} {
		shape = append(shape, alidnn.WithShape(name, batch, S))
	}
	fp, err := alidnn.Compile(m, shape...)
	if err != nil {
		t.Fatal(err)
	}
	cal := [][]*onnx.Tensor{w.classifierSet(trainX[:batch]).ins, w.classifierSet(trainX[batch : 2*batch]).ins}
	q8, err := alidnn.Quantize(ctx, dev, m, cal, shape...)
	if err != nil {
		t.Fatal(err)
	}
	var sets []dataSet
	for k := range batches {
		sets = append(sets, w.classifierSet(testX[k*batch:(k+1)*batch]))
	}
	outFP, out8 := runSets(t, dev, fp, sets), runSets(t, dev, q8, sets)

	var worst float64
	var agree, rightFP, right8 int
	for k, set := range sets {
		want, _ := set.outs[0].Float32s()
		worst = max(worst, worstRelError(outFP[k][0], want))
		for i := range batch {
			label := testY[k*batch+i]
			row := func(v []float32) []float32 { return v[i*2 : (i+1)*2] }
			topFP, top8 := argmaxOf32(row(outFP[k][0])), argmaxOf32(row(out8[k][0]))
			agree += b2i(topFP == top8)
			rightFP += b2i(topFP == label)
			right8 += b2i(top8 == label)
		}
	}
	n := batch * batches
	t.Logf("%d held-out sequences: fp32 worst error %.3g of the largest logit; int8 keeps fp32's top-1 on %d; accuracy fp32 %.3f, int8 %.3f",
		n, worst, agree, float64(rightFP)/float64(n), float64(right8)/float64(n))
	if worst > transformerTol {
		t.Errorf("fp32: worst error %.3g of the largest logit, want ≤ %g", worst, transformerTol)
	}
	if agree*100 < 95*n {
		t.Errorf("int8 keeps fp32's top-1 on %d of %d sequences, want ≥ 95%%", agree, n)
	}
}
