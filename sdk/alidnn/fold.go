package alidnn

import (
	"fmt"
	"math"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// reshapeTo computes the output shape of a Flatten, Reshape, Squeeze or
// Unsqueeze of a tensor of shape in.
func (c *compiler) reshapeTo(n *onnx.Node, in []int) ([]int, error) {
	switch n.OpType {
	case "Flatten":
		axis, err := n.Int("axis", 1)
		if err != nil {
			return nil, err
		}
		a := int(axis)
		if a < 0 {
			a += len(in)
		}
		if a < 0 || a > len(in) {
			return nil, fmt.Errorf("axis %d out of range for rank %d", axis, len(in))
		}
		p, q := 1, 1
		for k, d := range in {
			if k < a {
				p *= d
			} else {
				q *= d
			}
		}
		return []int{p, q}, nil
	case "Reshape":
		sv, err := c.needConst(n, 1, "shape")
		if err != nil {
			return nil, err
		}
		allowZero, err := n.Int("allowzero", 0)
		if err != nil {
			return nil, err
		}
		want := sv.ints()
		out := make([]int, len(want))
		infer := -1
		known := 1
		for k, d := range want {
			switch {
			case d == 0 && allowZero == 0:
				if k >= len(in) {
					return nil, fmt.Errorf("shape[%d] = 0 copies a dimension the input (rank %d) does not have", k, len(in))
				}
				out[k] = in[k]
			case d == -1:
				if infer >= 0 {
					return nil, fmt.Errorf("shape has two -1 dimensions")
				}
				infer = k
				continue
			case d < 0:
				return nil, fmt.Errorf("shape[%d] = %d", k, d)
			case k == 0 && d == 1 && c.opts.batch > 1 && len(in) > 0 && in[0] == c.opts.batch:
				out[k] = c.opts.batch // the exporter's batch of 1
			default:
				out[k] = int(d)
			}
			known *= out[k]
		}
		total := 1
		for _, d := range in {
			total *= d
		}
		if infer >= 0 {
			if known == 0 || total%known != 0 {
				return nil, fmt.Errorf("cannot infer the -1 dimension of %v from %d values", want, total)
			}
			out[infer] = total / known
		}
		return out, nil
	case "Squeeze", "Unsqueeze":
		axes, err := n.Ints("axes")
		if err != nil {
			return nil, err
		}
		if axes == nil && len(n.Inputs) > 1 {
			av, err := c.needConst(n, 1, "axes")
			if err != nil {
				return nil, err
			}
			axes = av.ints()
		}
		if n.OpType == "Squeeze" {
			drop := map[int]bool{}
			for _, a := range axes {
				k, err := normAxis(int(a), len(in))
				if err != nil {
					return nil, err
				}
				drop[k] = true
			}
			var out []int
			for k, d := range in {
				if (len(axes) == 0 && d == 1) || drop[k] {
					if d != 1 {
						return nil, fmt.Errorf("squeezing axis %d of size %d", k, d)
					}
					continue
				}
				out = append(out, d)
			}
			return out, nil
		}
		r := len(in) + len(axes)
		ins := map[int]bool{}
		for _, a := range axes {
			k, err := normAxis(int(a), r)
			if err != nil {
				return nil, err
			}
			ins[k] = true
		}
		out := make([]int, 0, r)
		j := 0
		for k := 0; k < r; k++ {
			if ins[k] {
				out = append(out, 1)
			} else if j < len(in) {
				out = append(out, in[j])
				j++
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("not a reshape: %s", n.OpType)
}

// fold evaluates n at compile time when its inputs are constants. It
// reports false for operators it leaves to the engine.
func (c *compiler) fold(n *onnx.Node) (bool, error) {
	out := func(v *value) (bool, error) {
		c.set(n, 0, v)
		v.isConst = true
		return true, nil
	}
	switch n.OpType {
	case "Constant":
		if t, _ := n.Tensor("value"); t != nil {
			v, err := fromTensor(t)
			if err != nil {
				return true, err
			}
			return out(v)
		}
		if f, err := n.Float("value_float", float32(math.NaN())); err == nil && n.Attr("value_float") != nil {
			return out(constFloat("", nil, []float32{f}))
		}
		if fs, err := n.Ints("value_ints"); err == nil && fs != nil {
			return out(constInt("", onnx.Int64, []int{len(fs)}, fs))
		}
		if i, err := n.Int("value_int", 0); err == nil && n.Attr("value_int") != nil {
			return out(constInt("", onnx.Int64, nil, []int64{i}))
		}
		if a := n.Attr("value_floats"); a != nil {
			return out(constFloat("", []int{len(a.Floats)}, a.Floats))
		}
		return true, fmt.Errorf("Constant without a supported value attribute: %w", ErrUnsupported)
	case "ConstantOfShape":
		sv, err := c.needConst(n, 0, "shape")
		if err != nil {
			return true, err
		}
		shape := toInts(sv.ints())
		total := 1
		for _, d := range shape {
			if d < 0 {
				return true, fmt.Errorf("negative dimension %d", d)
			}
			total *= d
			if total > 1<<28 {
				return true, fmt.Errorf("ConstantOfShape of %v is too large", shape)
			}
		}
		fv := constFloat("", shape, make([]float32, total))
		if t, _ := n.Tensor("value"); t != nil {
			v, err := fromTensor(t)
			if err != nil {
				return true, err
			}
			if v.f != nil {
				for k := range fv.f {
					fv.f[k] = v.f[0]
				}
			} else {
				iv := constInt("", v.typ, shape, make([]int64, total))
				for k := range iv.i {
					iv.i[k] = v.i[0]
				}
				return out(iv)
			}
		}
		return out(fv)
	case "Shape":
		v, err := c.foldShape(n)
		if err != nil {
			return true, err
		}
		return out(v)
	case "Gather":
		v, err := c.foldGather(n)
		if err != nil {
			return true, err
		}
		return out(v)
	case "Slice":
		v, err := c.foldSlice(n)
		if err != nil {
			return true, err
		}
		return out(v)
	case "ReduceProd":
		v, err := c.foldReduceProd(n)
		if err != nil {
			return true, err
		}
		return out(v)
	case "Transpose":
		v, err := c.foldTranspose(n)
		if err != nil {
			return true, err
		}
		return out(v)
	case "Clip", "LeakyRelu", "HardSigmoid", "HardSwish", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Softplus", "Abs", "Neg":
		v, err := c.foldActivation(n)
		if err != nil {
			return true, err
		}
		return out(v)
	case "Identity", "Dropout", "Cast":
		x, _ := c.need(n, 0)
		if err := c.dropoutMask(n, x); err != nil {
			return true, err
		}
		v := *x
		if n.OpType == "Cast" {
			to, _ := n.Int("to", int64(onnx.Float))
			v.typ = onnx.DataType(to)
			if v.isFloat() {
				v.f, v.i = x.floats(), nil
			} else {
				v.i, v.f = x.ints(), nil
			}
		}
		return out(&v)
	case "Flatten", "Reshape", "Squeeze", "Unsqueeze":
		x, _ := c.need(n, 0)
		shape, err := c.reshapeTo(n, x.shape)
		if err != nil {
			return true, err
		}
		v := *x
		v.shape = shape
		return out(&v)
	case "Add", "Sub", "Mul", "Div", "Max", "Min":
		if len(n.Inputs) == 1 && (n.OpType == "Max" || n.OpType == "Min") {
			x, _ := c.need(n, 0)
			v := *x
			return out(&v)
		}
		if len(n.Inputs) != 2 {
			return false, nil // Max and Min of many: chained by sum
		}
		a, _ := c.need(n, 0)
		b, _ := c.need(n, 1)
		shape, err := broadcastShape(a.shape, b.shape)
		if err != nil {
			return true, err
		}
		ia, ib := broadcastIndex(shape, a.shape), broadcastIndex(shape, b.shape)
		if a.isFloat() || b.isFloat() {
			fa, fb := a.floats(), b.floats()
			r := make([]float32, len(ia))
			for k := range r {
				x, y := fa[ia[k]], fb[ib[k]]
				switch n.OpType {
				case "Add":
					r[k] = x + y
				case "Sub":
					r[k] = x - y
				case "Mul":
					r[k] = x * y
				case "Div":
					r[k] = x / y
				case "Max":
					r[k] = max(x, y)
				case "Min":
					r[k] = min(x, y)
				}
			}
			return out(constFloat("", shape, r))
		}
		xa, xb := a.ints(), b.ints()
		r := make([]int64, len(ia))
		for k := range r {
			x, y := xa[ia[k]], xb[ib[k]]
			switch n.OpType {
			case "Add":
				r[k] = x + y
			case "Sub":
				r[k] = x - y
			case "Mul":
				r[k] = x * y
			case "Div":
				if y == 0 {
					return true, fmt.Errorf("integer division by zero")
				}
				r[k] = x / y
			case "Max":
				r[k] = max(x, y)
			case "Min":
				r[k] = min(x, y)
			}
		}
		return out(constInt("", a.typ, shape, r))
	case "QuantizeLinear", "DequantizeLinear":
		v, err := c.foldQDQ(n)
		if err != nil {
			return true, err
		}
		return out(v)
	case "Concat":
		axis, err := n.Int("axis", 0)
		if err != nil {
			return true, err
		}
		var parts []*value
		for k := range n.Inputs {
			v, err := c.need(n, k)
			if err != nil {
				return true, err
			}
			parts = append(parts, v)
		}
		return c.foldConcat(n, parts, int(axis))
	}
	return false, nil
}

func toInts(v []int64) []int {
	out := make([]int, len(v))
	for k, x := range v {
		out[k] = int(x)
	}
	return out
}

func (c *compiler) foldConcat(n *onnx.Node, parts []*value, axis int) (bool, error) {
	if len(parts) == 0 {
		return true, fmt.Errorf("Concat of nothing")
	}
	r := len(parts[0].shape)
	a, err := normAxis(axis, r)
	if err != nil {
		return true, err
	}
	shape := append([]int(nil), parts[0].shape...)
	shape[a] = 0
	for _, p := range parts {
		if len(p.shape) != r {
			return true, fmt.Errorf("Concat of ranks %d and %d", r, len(p.shape))
		}
		shape[a] += p.shape[a]
	}
	outer := 1
	for _, d := range shape[:a] {
		outer *= d
	}
	isF := parts[0].isFloat()
	var rf []float32
	var ri []int64
	for o := 0; o < outer; o++ {
		for _, p := range parts {
			inner := 1
			for _, d := range p.shape[a:] {
				inner *= d
			}
			if isF {
				rf = append(rf, p.floats()[o*inner:(o+1)*inner]...)
			} else {
				ri = append(ri, p.ints()[o*inner:(o+1)*inner]...)
			}
		}
	}
	var v *value
	if isF {
		v = constFloat("", shape, rf)
	} else {
		v = constInt("", parts[0].typ, shape, ri)
	}
	c.set(n, 0, v)
	return true, nil
}
