package alidnn_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// randTensor is a tensor of distinct-looking values in [-2, 2).
func randTensor(name string, dims []int64, seed int64) *onnx.Tensor {
	n := 1
	for _, d := range dims {
		n *= int(d)
	}
	r := rand.New(rand.NewSource(seed))
	f := make([]float32, n)
	for k := range f {
		f[k] = float32(r.Float64()*4 - 2)
	}
	return onnx.NewFloat32(name, dims, f)
}

// refReduce is op over axes (normalised) of x of shape dims in float64,
// with the shape of the result as keepdims keep gives it.
func refReduce(x []float32, dims []int, op string, axes []int, keep bool) ([]float64, []int) {
	kept := slices.Clone(dims)
	for _, a := range axes {
		kept[a] = 1
	}
	n := 1
	for _, d := range kept {
		n *= d
	}
	acc, cnt := make([]float64, n), make([]int, n)
	for k := range acc {
		switch op {
		case "ReduceMax":
			acc[k] = math.Inf(-1)
		case "ReduceMin":
			acc[k] = math.Inf(1)
		}
	}
	idx := make([]int, len(dims))
	for _, v := range x {
		o := 0
		for a, i := range idx {
			if kept[a] == 1 {
				i = 0
			}
			o = o*kept[a] + i
		}
		switch op {
		case "ReduceMax":
			acc[o] = math.Max(acc[o], float64(v))
		case "ReduceMin":
			acc[o] = math.Min(acc[o], float64(v))
		default:
			acc[o] += float64(v)
		}
		cnt[o]++
		for a := len(idx) - 1; a >= 0; a-- {
			if idx[a]++; idx[a] < dims[a] {
				break
			}
			idx[a] = 0
		}
	}
	if op == "ReduceMean" {
		for k := range acc {
			acc[k] /= float64(cnt[k])
		}
	}
	if keep {
		return acc, kept
	}
	var out []int
	for a, d := range dims {
		if !slices.Contains(axes, a) {
			out = append(out, d)
		}
	}
	return acc, out
}

// reduceAxesGraph is op(src) over axes with keepdims, src the graph input
// x itself (laid out as hidden states by its first reader) or, relu,
// Relu(x) (laid out as an image, axis 1 on the lanes).
func reduceAxesGraph(op string, dims []int64, axes []int64, keep int64, relu bool) *onnx.Model {
	at, _ := onnx.NewInt("axes", onnx.Int64, []int64{int64(len(axes))}, axes)
	g := &onnx.Graph{Inputs: []onnx.ValueInfo{vinfo("x", dims...)}, Initializers: []*onnx.Tensor{at}}
	src := "x"
	if relu {
		g.Nodes = append(g.Nodes, &onnx.Node{Name: "relu", OpType: "Relu", Inputs: []string{"x"}, Outputs: []string{"r"}})
		src = "r"
	}
	g.Nodes = append(g.Nodes, &onnx.Node{Name: "red", OpType: op, Inputs: []string{src, "axes"}, Outputs: []string{"y"},
		Attrs: []*onnx.Attribute{{Name: "keepdims", Type: onnx.AttrInt, I: keep}}})
	g.Outputs = []onnx.ValueInfo{{Name: "y"}}
	return &onnx.Model{Opsets: []onnx.Opset{{Version: 18}}, Graph: g}
}

// TestReduceAxes reduces over every set of axes the layouts allow, kept
// and not, as graph outputs, against float64: of hidden states [2,4,20]
// (outer and row axes folded by picks, the last by the lanes' MatMul or
// rotations) and of images [2,3,5] and [2,3,4,5] (their rows, the last
// axis among them, folded by picks too; their channels, for sums and
// means, by a 1×1 convolution).
func TestReduceAxes(t *testing.T) {
	for _, src := range []struct {
		dims  []int64
		relu  bool
		axess [][]int64
		sums  [][]int64 // for ReduceSum and ReduceMean only
	}{
		{[]int64{2, 4, 20}, false, [][]int64{{0}, {1}, {-1}, {0, 1}, {1, 2}, {0, 2}, {}}, nil},
		{[]int64{2, 3, 5}, true, [][]int64{{0}, {2}, {0, -1}}, [][]int64{{1}, {1, 2}, {0, 1}, {}}},
		{[]int64{2, 3, 4, 5}, true, [][]int64{{2, 3}, {3}}, [][]int64{{1}, {1, 2, 3}, {}}},
	} {
		x := randTensor("x", src.dims, 7)
		xf, _ := x.Float32s()
		in := xf
		if src.relu {
			in = make([]float32, len(xf))
			for k, v := range xf {
				in[k] = max(v, 0)
			}
		}
		dims := make([]int, len(src.dims))
		for k, d := range src.dims {
			dims[k] = int(d)
		}
		for _, op := range []string{"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"} {
			axess := src.axess
			if op == "ReduceSum" || op == "ReduceMean" {
				axess = append(slices.Clone(axess), src.sums...)
			}
			for _, axes := range axess {
				for _, keep := range []int64{0, 1} {
					norm := normAxes(axes, len(dims))
					t.Run(fmt.Sprintf("%v/%s/%v/keep%d", src.dims, op, axes, keep), func(t *testing.T) {
						want, _ := refReduce(in, dims, op, norm, keep == 1)
						checkClose(t, runModel(t, reduceAxesGraph(op, src.dims, axes, keep, src.relu), x), want)
					})
				}
			}
		}
	}
}

func normAxes(axes []int64, r int) []int {
	var out []int
	for _, a := range axes {
		out = append(out, (int(a)+r)%r)
	}
	if len(axes) == 0 {
		for a := range r {
			out = append(out, a)
		}
	}
	return out
}

// TestReduceAxesBroadcast subtracts a reduction over the rows and the last
// axis, kept, from its input — the mean or maximum held on every lane, as
// a normalisation reads it — against float64.
func TestReduceAxesBroadcast(t *testing.T) {
	dims := []int64{2, 4, 20}
	x := randTensor("x", dims, 3)
	xf, _ := x.Float32s()
	for _, op := range []string{"ReduceMean", "ReduceMax"} {
		t.Run(op, func(t *testing.T) {
			m := reduceAxesGraph(op, dims, []int64{1, 2}, 1, false)
			m.Graph.Nodes = append(m.Graph.Nodes, &onnx.Node{Name: "sub", OpType: "Sub", Inputs: []string{"x", "y"}, Outputs: []string{"d"}})
			m.Graph.Outputs = []onnx.ValueInfo{{Name: "d"}}
			red, _ := refReduce(xf, []int{2, 4, 20}, op, []int{1, 2}, true)
			want := make([]float64, len(xf))
			for k, v := range xf {
				want[k] = float64(v) - red[k/80]
			}
			checkClose(t, runModel(t, m, x), want)
		})
	}
}

// TestReduceAxesRefused: a maximum or minimum over the channels of an
// image, which its layout holds on the lanes, is refused naming the node
// and the axis.
func TestReduceAxesRefused(t *testing.T) {
	for _, op := range []string{"ReduceMax", "ReduceMin"} {
		for _, axes := range [][]int64{{1}, {}, {0, 1}} {
			_, err := alidnn.Compile(reduceAxesGraph(op, []int64{2, 3, 5}, axes, 1, true))
			if !errors.Is(err, alidnn.ErrUnsupported) || !strings.Contains(err.Error(), `"red"`) || !strings.Contains(err.Error(), "over axis 1") || !strings.Contains(err.Error(), "holds on the lanes") {
				t.Errorf("%s over %v: %v, want ErrUnsupported naming \"red\", axis 1 and the lanes", op, axes, err)
			}
		}
	}
}

// TestReduceChannelsBroadcast divides an image [2,3,5] by the root mean
// square over its channels and rows (RMSNormalization's body over axis
// 1), the mean held on every channel, against float64.
func TestReduceChannelsBroadcast(t *testing.T) {
	dims := []int64{2, 3, 5}
	x := randTensor("x", dims, 5)
	xf, _ := x.Float32s()
	m := reduceAxesGraph("ReduceMean", dims, []int64{1, 2}, 1, true)
	g := m.Graph
	g.Nodes[0] = &onnx.Node{Name: "sq", OpType: "Mul", Inputs: []string{"x", "x"}, Outputs: []string{"r"}}
	g.Nodes = append(g.Nodes, &onnx.Node{Name: "rms", OpType: "Sqrt", Inputs: []string{"y"}, Outputs: []string{"s"}},
		&onnx.Node{Name: "div", OpType: "Div", Inputs: []string{"x", "s"}, Outputs: []string{"d"}})
	g.Outputs = []onnx.ValueInfo{{Name: "d"}}
	sq := make([]float32, len(xf))
	for k, v := range xf {
		sq[k] = v * v
	}
	ms, _ := refReduce(sq, []int{2, 3, 5}, "ReduceMean", []int{1, 2}, true)
	want := make([]float64, len(xf))
	for k, v := range xf {
		want[k] = float64(v) / math.Sqrt(ms[k/15])
	}
	checkClose(t, runModel(t, m, x), want)
}
