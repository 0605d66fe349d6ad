package onnxtest_test

import (
	"fmt"
	"path/filepath"
	"sync"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// Generated cases of CNNs with trained weights, where constant weights
// would hide numerical bugs: the ResNet-style and MobileNet-v2-style nets
// of nets_test.go, trained on synthetic images (synth_test.go) by
// train_test.go, with reference outputs from refnet_test.go. The
// transformers' trained cases are trained_vit_test.go's and
// trained_bert_test.go's.
//
// Training takes seconds, so it runs only with -update; otherwise the
// weights are read back from the committed folder's model.onnx, which the
// generator must then write byte-identically.

func init() { caseFamilies = append(caseFamilies, trainedCases) }

// trainedArch is one trained case: its architecture and training.
type trainedArch struct {
	folder string // under testdata/generated
	build  func() *net
	cfg    trainConfig
	// net is the trained net: trained (with -update) or read once per
	// test binary.
	net func() (*net, error)
}

func newTrainedArch(folder string, build func() *net, cfg trainConfig) *trainedArch {
	a := &trainedArch{folder: folder, build: build, cfg: cfg}
	a.net = sync.OnceValues(a.trainedNet)
	return a
}

var trainedArchs = []*trainedArch{
	newTrainedArch("trained_resnet_tiny", resnetTiny, trainConfig{steps: 600, batch: 16, lr: 0.01, momentum: 0.9, seed: 1}),
	newTrainedArch("trained_mobilenet_tiny", mobilenetTiny, trainConfig{steps: 600, batch: 16, lr: 0.01, momentum: 0.9, seed: 2}),
}

const (
	// heldOutSeed draws the test images, never seen in training (whose
	// streams are seeded by trainConfig.seed).
	heldOutSeed = 1000
	// trainedSets is the number of data sets of a trained case's folder,
	// an image each.
	trainedSets = 4
)

func trainedCases() []genCase {
	var cs []genCase
	for _, a := range trainedArchs {
		cs = append(cs, a.genCase())
	}
	return cs
}

func (a *trainedArch) trainedNet() (*net, error) {
	n := a.build()
	if *update {
		n.fit(a.cfg)
		return n, nil
	}
	m, err := onnx.ReadModel(filepath.Join("testdata", "generated", a.folder, "model.onnx"))
	if err != nil {
		return nil, fmt.Errorf("%w (train and write it with -update)", err)
	}
	return n, n.load(m)
}

// genCase is the trained net with the first held-out images and the
// reference's outputs for them.
func (a *trainedArch) genCase() genCase {
	c := genCase{name: a.folder, opset: 13, int8: true}
	n, err := a.net()
	if err != nil {
		c.err = err
		return c
	}
	c.g = n.graph()
	xs, _ := newSynth(heldOutSeed).batch(trainedSets)
	for k, x := range xs {
		x32 := to32(x)
		vals := n.forward(from32(x32))
		set := dataSet{
			ins:  []*onnx.Tensor{onnx.NewFloat32("x", n.inputDims(), x32)},
			outs: []*onnx.Tensor{onnx.NewFloat32("y", n.outputDims(), to32(vals[len(vals)-1]))},
		}
		if k == 0 {
			c.ins, c.outs = set.ins, set.outs
		} else {
			c.more = append(c.more, set)
		}
	}
	return c
}

func from32(v []float32) []float64 {
	f := make([]float64, len(v))
	for k := range v {
		f[k] = float64(v[k])
	}
	return f
}
