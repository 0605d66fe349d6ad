package alidnn

import (
	"math/rand"
	"testing"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// foldOps are the operators FuzzFold folds.
var foldOps = []string{"Range", "Expand", "Where", "Equal", "Less", "GreaterOrEqual", "And", "Or", "Xor", "Not", "Size",
	"Trilu", "Pow", "Neg", "Abs", "MatMul", "ConstantOfShape", "Cast", "Gather", "Slice", "Concat", "Unsqueeze", "Squeeze",
	"ReduceProd", "Shape", "Add", "Div", "Max", "Transpose", "Reshape", "Flatten", "Identity"}

// randomConst is a small constant of random rank, dimensions, type and
// values.
func randomConst(rng *rand.Rand, name string) *value {
	shape := make([]int, rng.Intn(5))
	n := 1
	for k := range shape {
		shape[k] = rng.Intn(4)
		n *= shape[k]
	}
	if rng.Intn(2) == 0 {
		f := make([]float32, n)
		for k := range f {
			f[k] = float32(rng.Intn(9)-4) / 2
		}
		return constFloat(name, shape, f)
	}
	v := make([]int64, n)
	for k := range v {
		v[k] = int64(rng.Intn(9) - 4)
	}
	return constInt(name, onnx.Int64, shape, v)
}

// randomAttrs are attributes of random values under the names the folded
// operators read.
func randomAttrs(rng *rand.Rand) []*onnx.Attribute {
	i := func(name string, lo, n int) *onnx.Attribute {
		return &onnx.Attribute{Name: name, Type: onnx.AttrInt, I: int64(lo + rng.Intn(n))}
	}
	return []*onnx.Attribute{i("upper", 0, 2), i("to", 0, 12), i("axis", -2, 5), i("keepdims", 0, 2), i("start", -3, 7), i("end", -3, 7),
		{Name: "axes", Type: onnx.AttrInts, Ints: []int64{int64(rng.Intn(5) - 2)}},
		{Name: "perm", Type: onnx.AttrInts, Ints: []int64{int64(rng.Intn(3)), int64(rng.Intn(3))}}}
}

// FuzzFold folds operators on random constants — inputs of any rank,
// type and size, attributes in and out of range — and checks that the
// folder errs instead of panicking. Each seed drives 500 nodes.
func FuzzFold(f *testing.F) {
	for seed := range int64(8) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed int64) {
		rng := rand.New(rand.NewSource(seed))
		for range 500 {
			c := &compiler{vals: map[string]*value{}, uses: map[string]int{}, opsetVer: 13}
			n := &onnx.Node{OpType: foldOps[rng.Intn(len(foldOps))], Outputs: []string{"out"}}
			for k := range 1 + rng.Intn(3) {
				v := randomConst(rng, string(rune('a'+k)))
				c.vals[v.name] = v
				n.Inputs = append(n.Inputs, v.name)
			}
			if rng.Intn(2) == 0 {
				n.Attrs = randomAttrs(rng)
			}
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("%s of %d inputs (seed %d): %v", n.OpType, len(n.Inputs), seed, r)
					}
				}()
				c.fold(n)
			}()
		}
	})
}
