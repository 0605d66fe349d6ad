package onnxtest_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// A generated case of a BERT with trained weights (trained_bert_tiny):
// bert_encoder's graph (bert_test.go, torch.onnx's HuggingFace BertModel:
// input_ids, attention_mask, token_type_ids, batch and sequence symbolic)
// with BertForSequenceClassification's classifier, a Gemm (transB) of the
// pooler_output to two logits, its only output. Trained by
// bert_train_model_test.go and vit_train_test.go's Adam on bertTask: is
// token 7 before token 3? Its four data sets are held-out sequences in
// batches [2, 16], [1, 16], [3, 12] and [2, 9]; their outputs come from
// bertWeights.forward64, the float64 reference of the graph, and the
// classifier in float64, on the exported float32 numbers.
//
// As for the CNNs (trained_test.go), training runs only with -update;
// otherwise the weights are read back from the committed model.onnx.

func init() { caseFamilies = append(caseFamilies, trainedBertCases) }

const trainedBertFolder = "trained_bert_tiny"

// trainedBertArch is bert_encoder's BERT with a classifier of two classes.
var trainedBertArch = bertArch{vocab: bertV, types: bertT, positions: bertP, h: bertH, heads: bertHeads, f: bertF,
	layers: bertLayers, classes: 2, eps: bertEps}

var trainedBertCfg = adamConfig{steps: 300, batch: 16, lr: 1e-3, seed: 4}

// trainedBert is the trained BERT's weights: trained (with -update) or
// read once per test binary.
var trainedBert = sync.OnceValues(func() (bertWeights, error) {
	a := trainedBertArch
	if *update {
		return bertWeights(a.fit(trainedBertCfg).weights()), nil
	}
	m, err := onnx.ReadModel(filepath.Join("testdata", "generated", trainedBertFolder, "model.onnx"))
	if err != nil {
		return nil, fmt.Errorf("%w (train and write it with -update)", err)
	}
	w, err := readWeights(m, trainedBertFolder, a.dims())
	return bertWeights(w), err
})

// trainedBertShapes are the data sets' [batch, sequence] shapes.
var trainedBertShapes = [][2]int{{2, 16}, {1, 16}, {3, 12}, {2, 9}}

func trainedBertCases() []genCase {
	c := genCase{name: trainedBertFolder, opset: 17, int8: true}
	w, err := trainedBert()
	if err != nil {
		c.err = err
		return []genCase{c}
	}
	c.g = bertClassifierGraph(w)
	task := newBertTask(heldOutSeed)
	for k, shape := range trainedBertShapes {
		seqs, _ := task.batch(shape[0], shape[1])
		set := w.classifierSet(seqs)
		if k == 0 {
			c.ins, c.outs = set.ins, set.outs
		} else {
			c.more = append(c.more, set)
		}
	}
	return []genCase{c}
}

// bertClassifierGraph is bert_encoder's graph with the classifier of w's
// cls_w and cls_b after the pooler, the logits its only output.
func bertClassifierGraph(w bertWeights) graph {
	g := bertGraph(bertSmall, w)
	classes := int64(len(w["cls_b"]))
	g.inits = append(g.inits, onnx.NewFloat32("cls_w", []int64{classes, bertH}, w["cls_w"]), onnx.NewFloat32("cls_b", []int64{classes}, w["cls_b"]))
	g.nodes = append(g.nodes, node{op: "Gemm", inputs: []string{"pooler_output", "cls_w", "cls_b"}, outputs: []string{"logits"},
		attrs: []attr{fAttr("alpha", 1), fAttr("beta", 1), iAttr("transB", 1)}})
	g.outputs = []valueInfo{{name: "logits", typ: onnx.Float, dims: []int64{0, classes}, params: []string{"batch", ""}}}
	return g
}

// classifierSet is the data set of the sequences seqs, all of one length,
// its logits from the reference.
func (w bertWeights) classifierSet(seqs []bertSeq) dataSet {
	N, S := len(seqs), len(seqs[0].ids)
	var ids, types, mask []int64
	for _, s := range seqs {
		for t := range S {
			ids, types = append(ids, int64(s.ids[t])), append(types, int64(s.types[t]))
			mask = append(mask, int64(b2i(s.keep[t])))
		}
	}
	d := []int64{int64(N), int64(S)}
	return dataSet{
		ins: []*onnx.Tensor{intTensor("input_ids", onnx.Int64, d, ids), intTensor("attention_mask", onnx.Int64, d, mask),
			intTensor("token_type_ids", onnx.Int64, d, types)},
		outs: []*onnx.Tensor{onnx.NewFloat32("logits", []int64{int64(N), int64(len(w["cls_b"]))}, to32(w.classify(ids, types, mask, N, S)))},
	}
}

// classify is the logits [N, classes] of the reference: the classifier
// on bertWeights.forward64's pooler_output.
func (w bertWeights) classify(ids, types, mask []int64, N, S int) []float64 {
	_, pool := w.forward64(linear, ids, types, mask, N, S)
	classes := len(w["cls_b"])
	logits := make([]float64, N*classes)
	for n := range N {
		for o := range classes {
			v := float64(w["cls_b"][o])
			for i := range bertH {
				v += pool[n*bertH+i] * float64(w["cls_w"][o*bertH+i])
			}
			logits[n*classes+o] = v
		}
	}
	return logits
}

// bertTask draws sequences for "is token 7 before token 3?": the class
// token (id 1) first, then 5 to S−1 more tokens, one of them 7 and
// another 3, the rest drawn from ids 10 to 99; token type 1 from the
// sequence's second half on (as a pair of segments). Padding up to S is
// masked out and holds 7s and 3s half of the time, which only the mask
// hides. Label 1 when the 7 comes first.
type bertTask struct{ r *rand.Rand }

const bertTaskFirst, bertTaskSecond, bertTaskCLS, bertTaskFillers = 7, 3, 1, 10

func newBertTask(seed uint64) *bertTask { return &bertTask{rand.New(rand.NewPCG(seed, 0xbe57))} }

// next draws a sequence of S ≥ 6 tokens and its label.
func (b *bertTask) next(S int) (bertSeq, int) {
	s := bertSeq{ids: make([]int, S), types: make([]int, S), keep: make([]bool, S)}
	L := 6 + b.r.IntN(S-5)
	for t := range S {
		s.ids[t] = bertTaskFillers + b.r.IntN(bertV-bertTaskFillers)
		if t >= L && b.r.IntN(2) == 0 {
			s.ids[t] = []int{bertTaskFirst, bertTaskSecond}[b.r.IntN(2)]
		}
		s.keep[t] = t < L
		s.types[t] = b2i(t >= (L+1)/2)
	}
	s.ids[0] = bertTaskCLS
	i, j := 1+b.r.IntN(L-1), 1+b.r.IntN(L-2)
	if j >= i {
		j++
	}
	s.ids[i], s.ids[j] = bertTaskFirst, bertTaskSecond
	return s, b2i(i < j)
}

// batch draws n sequences of S tokens and their labels.
func (b *bertTask) batch(n, S int) ([]bertSeq, []int) {
	seqs, labels := make([]bertSeq, n), make([]int, n)
	for k := range n {
		seqs[k], labels[k] = b.next(S)
	}
	return seqs, labels
}

// fit trains the BERT from scratch on bertTask's sequences of
// trainedBertSeq tokens, and rounds its parameters to float32.
func (a bertArch) fit(cfg adamConfig) tfParams {
	p := a.initParams(rand.New(rand.NewPCG(cfg.seed, 1)))
	task := newBertTask(cfg.seed)
	adamTrain(p, cfg, func(g tfParams) {
		for range cfg.batch {
			s, label := task.next(trainedBertSeq)
			tp := a.forward(p, s)
			a.backward(p, s, tp, xentGrad(tp.logits, label, cfg.batch), g)
		}
	})
	p.roundTo32()
	return p
}

// trainedBertSeq is the training sequences' length.
const trainedBertSeq = 16

// accuracy is the share of the sequences seqs with labels ys the weights w
// classify right, by the reference.
func (w bertWeights) accuracy(seqs []bertSeq, ys []int) float64 {
	right := 0
	for k, s := range seqs {
		set := w.classifierSet([]bertSeq{s})
		logits, _ := set.outs[0].Float32s()
		right += b2i(argmaxOf32(logits) == ys[k])
	}
	return float64(right) / float64(len(seqs))
}
