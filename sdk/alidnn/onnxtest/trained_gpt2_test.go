package onnxtest_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// A generated case of a GPT-2 language model with trained weights
// (trained_gpt2_tiny): gpt2_decoder_block's graph (gpt2_test.go,
// torch.onnx's GPT2Model: input_ids and attention_mask, batch and
// sequence symbolic, the causal mask a Where) with GPT2LMHeadModel's head,
// tied to the token embeddings, as torch.onnx writes it with constant
// folding: a MatMul by the table's transpose, an initializer of its own,
// the logits [batch, seq, vocab] its only output. Trained by
// gpt2_train_model_test.go and vit_train_test.go's Adam on gptCopyTask:
// after a separator, repeat the seven tokens before it. Its data sets are
// held-out sequences in batches [2, 16], [1, 16], [2, 16] with the second
// sequence's last four tokens masked out, and [3, 12]; their outputs come
// from gptWeights.logits64, the float64 reference of the graph, on the
// exported float32 numbers.
//
// As for the other trained cases, training runs only with -update;
// otherwise the weights are read back from the committed model.onnx.

func init() { caseFamilies = append(caseFamilies, trainedGPT2Cases) }

const trainedGPT2Folder = "trained_gpt2_tiny"

var trainedGPT2Cfg = adamConfig{steps: 400, batch: 16, lr: 3e-3, seed: 6}

// trainedGPT2 is the trained GPT-2's weights: trained (with -update) or
// read once per test binary.
var trainedGPT2 = sync.OnceValues(func() (gptWeights, error) {
	if *update {
		return gptWeights(gptDefault.fit(trainedGPT2Cfg).weights()), nil
	}
	m, err := onnx.ReadModel(filepath.Join("testdata", "generated", trainedGPT2Folder, "model.onnx"))
	if err != nil {
		return nil, fmt.Errorf("%w (train and write it with -update)", err)
	}
	w, err := readWeights(m, trainedGPT2Folder, gptDims())
	return gptWeights(w), err
})

func trainedGPT2Cases() []genCase {
	c := genCase{name: trainedGPT2Folder, opset: 17, int8: true}
	w, err := trainedGPT2()
	if err != nil {
		c.err = err
		return []genCase{c}
	}
	c.g = gpt2LMGraph(w)
	task := newGPTCopyTask(heldOutSeed)
	first := w.lmSet(task.batch(2, 16), 0)
	c.ins, c.outs = first.ins, first.outs
	c.more = []dataSet{w.lmSet(task.batch(1, 16), 0), w.lmSet(task.batch(2, 16), 4), w.lmSet(task.batch(3, 12), 0)}
	return []genCase{c}
}

// gpt2LMGraph is gpt2_decoder_block's graph with the tied head after the
// final LayerNormalization, the logits its only output.
func gpt2LMGraph(w gptWeights) graph {
	g := gpt2Graph(w)
	lm := make([]float32, gptH*gptV)
	for v := range gptV {
		for c := range gptH {
			lm[c*gptV+v] = w["wte"][v*gptH+c]
		}
	}
	g.inits = append(g.inits, onnx.NewFloat32("lm_head_w", []int64{gptH, gptV}, lm))
	g.nodes = append(g.nodes, node{op: "MatMul", inputs: []string{"last_hidden_state", "lm_head_w"}, outputs: []string{"logits"}})
	g.outputs = []valueInfo{{name: "logits", typ: onnx.Float, dims: []int64{0, 0, gptV}, params: []string{"batch", "seq", ""}}}
	return g
}

// logits64 is the reference's logits [N, S, gptV]: the tied head on
// forward's last_hidden_state.
func (w gptWeights) logits64(ids, mask []int64, N, S int) []float64 {
	y := w.forward(ids, mask, N, S)
	logits := make([]float64, N*S*gptV)
	for t := range N * S {
		for v := range gptV {
			var s float64
			for c := range gptH {
				s += y[t*gptH+c] * float64(w["wte"][v*gptH+c])
			}
			logits[t*gptV+v] = s
		}
	}
	return logits
}

// lmSet is the data set of the sequences seqs, all of one length, the
// last pad tokens of every second one masked out.
func (w gptWeights) lmSet(seqs [][]int, pad int) dataSet {
	N, S := len(seqs), len(seqs[0])
	var ids, mask []int64
	for n, s := range seqs {
		for t, id := range s {
			ids = append(ids, int64(id))
			mask = append(mask, int64(b2i(n%2 == 0 || t < S-pad)))
		}
	}
	d := []int64{int64(N), int64(S)}
	return dataSet{
		ins:  []*onnx.Tensor{intTensor("input_ids", onnx.Int64, d, ids), intTensor("attention_mask", onnx.Int64, d, mask)},
		outs: []*onnx.Tensor{onnx.NewFloat32("logits", []int64{int64(N), int64(S), gptV}, to32(w.logits64(ids, mask, N, S)))},
	}
}

// gptCopyTask draws sequences of the copy task: the start token (id 1), L
// tokens drawn from ids 10 to 99, the separator (id 2), and the L tokens
// again, L = (S − 2) / 2 (and a filler at the end of an odd S). The model
// learns to predict the second copy: at the separator and the L − 1
// tokens after it, the next token.
type gptCopyTask struct{ r *rand.Rand }

const gptCopyStart, gptCopySep, gptCopyFillers = 1, 2, 10

func newGPTCopyTask(seed uint64) *gptCopyTask {
	return &gptCopyTask{rand.New(rand.NewPCG(seed, 0x9e72))}
}

// next draws a sequence of S ≥ 4 tokens.
func (c *gptCopyTask) next(S int) []int {
	L := (S - 2) / 2
	s := make([]int, S)
	for t := range s {
		s[t] = gptCopyFillers + c.r.IntN(gptV-gptCopyFillers)
	}
	s[0], s[L+1] = gptCopyStart, gptCopySep
	copy(s[L+2:2*L+2], s[1:L+1])
	return s
}

// batch draws n sequences of S tokens.
func (c *gptCopyTask) batch(n, S int) [][]int {
	seqs := make([][]int, n)
	for k := range seqs {
		seqs[k] = c.next(S)
	}
	return seqs
}

// copyTargets are the positions of a sequence of S tokens whose next
// token the task predicts: the separator's and the L − 1 after it.
func copyTargets(S int) []int {
	L := (S - 2) / 2
	var ps []int
	for p := L + 1; p < 2*L+1; p++ {
		ps = append(ps, p)
	}
	return ps
}

// fit trains the language model from scratch on gptCopyTask's sequences of
// trainedGPT2Seq tokens, its loss the cross-entropy at copyTargets, and
// rounds its parameters to float32.
func (a gptArch) fit(cfg adamConfig) tfParams {
	p := a.initParams(rand.New(rand.NewPCG(cfg.seed, 1)))
	task := newGPTCopyTask(cfg.seed)
	targets := copyTargets(trainedGPT2Seq)
	adamTrain(p, cfg, func(g tfParams) {
		for range cfg.batch {
			s := task.next(trainedGPT2Seq)
			tp := a.forward(p, s)
			dz := make([]float64, len(tp.logits))
			for _, pos := range targets {
				d := xentGrad(tp.logits[pos*a.vocab:(pos+1)*a.vocab], s[pos+1], cfg.batch*len(targets))
				copy(dz[pos*a.vocab:], d)
			}
			a.backward(p, tp, dz, g)
		}
	})
	p.roundTo32()
	return p
}

// trainedGPT2Seq is the training sequences' length.
const trainedGPT2Seq = 16

// copyAccuracy is the share of copyTargets of the sequences seqs the
// weights w predict right, by the reference.
func (w gptWeights) copyAccuracy(seqs [][]int) float64 {
	right, n := 0, 0
	for _, s := range seqs {
		set := w.lmSet([][]int{s}, 0)
		logits, _ := set.outs[0].Float32s()
		for _, pos := range copyTargets(len(s)) {
			right += b2i(argmaxOf32(logits[pos*gptV:(pos+1)*gptV]) == s[pos+1])
			n++
		}
	}
	return float64(right) / float64(n)
}
