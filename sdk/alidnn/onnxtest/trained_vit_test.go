package onnxtest_test

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sync"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// A generated case of the ViT of vit_test.go with trained weights
// (trained_vit_tiny): vit_tiny's graph, as torch.onnx writes
// HuggingFace's ViTForImageClassification, with a head for the six
// classes of the synthetic images of synth_test.go (3×32×32, the ViT's
// input), trained by vit_train_test.go. Its four data sets are held-out
// images in batches of 2, 1, 3 and 2; their outputs come from
// vitWeights.forward, the float64 reference of the graph, on the exported
// float32 numbers.
//
// As for the CNNs (trained_test.go), training runs only with -update;
// otherwise the weights are read back from the committed model.onnx.

func init() { caseFamilies = append(caseFamilies, trainedViTCases) }

const trainedViTFolder = "trained_vit_tiny"

// trainedViTArch is vit_tiny's ViT with six classes.
var trainedViTArch = vitArch{img: vitImg, patch: vitPatch, c: vitC, h: vitH, heads: vitHeads, f: vitF,
	layers: vitLayers, classes: synthClasses, eps: vitEps}

var trainedViTCfg = adamConfig{steps: 300, batch: 16, lr: 1e-3, seed: 3}

// trainedViT is the trained ViT's weights: trained (with -update) or read
// once per test binary.
var trainedViT = sync.OnceValues(func() (vitWeights, error) {
	a := trainedViTArch
	if *update {
		return a.fit(trainedViTCfg).weights(), nil
	}
	m, err := onnx.ReadModel(filepath.Join("testdata", "generated", trainedViTFolder, "model.onnx"))
	if err != nil {
		return nil, fmt.Errorf("%w (train and write it with -update)", err)
	}
	w, err := readWeights(m, trainedViTFolder, a.dims())
	return vitWeights(w), err
})

// trainedViTBatches are the data sets' numbers of images.
var trainedViTBatches = []int{2, 1, 3, 2}

func trainedViTCases() []genCase {
	c := genCase{name: trainedViTFolder, opset: 17, int8: true}
	w, err := trainedViT()
	if err != nil {
		c.err = err
		return []genCase{c}
	}
	c.g = vitGraph(trainedViTArch.size(), w, false)
	ds := newSynth(heldOutSeed)
	for k, n := range trainedViTBatches {
		xs, _ := ds.batch(n)
		set := w.vitSetOf(xs)
		if k == 0 {
			c.ins, c.outs = set.ins, set.outs
		} else {
			c.more = append(c.more, set)
		}
	}
	return []genCase{c}
}

// vitSetOf is the data set of the images xs, its outputs from the
// reference.
func (w vitWeights) vitSetOf(xs [][]float64) dataSet {
	N := len(xs)
	img := to32(slices.Concat(xs...))
	hidden, logits := w.forward(linear, patchConv, img, N, vitEps)
	return dataSet{
		ins: []*onnx.Tensor{onnx.NewFloat32("pixel_values", []int64{int64(N), vitC, vitImg, vitImg}, img)},
		outs: []*onnx.Tensor{onnx.NewFloat32("last_hidden_state", []int64{int64(N), vitTokens, vitH}, hidden),
			onnx.NewFloat32("logits", []int64{int64(N), int64(len(w["head_b"]))}, logits)},
	}
}

// readWeights reads the parameters of dims from m's initializers, those
// of the folder's model.
func readWeights(m *onnx.Model, folder string, dims map[string][]int64) (map[string][]float32, error) {
	w := map[string][]float32{}
	for _, name := range slices.Sorted(maps.Keys(dims)) {
		t := m.Graph.Initializer(name)
		if t == nil {
			return nil, fmt.Errorf("%s: no initializer %s", folder, name)
		}
		f, err := t.Float32s()
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", folder, name, err)
		}
		if len(f) != numel(dims[name]) {
			return nil, fmt.Errorf("%s: %s has %d values, want %d", folder, name, len(f), numel(dims[name]))
		}
		w[name] = f
	}
	return w, nil
}
