package alidnn

import (
	"fmt"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// padOp names the host value a Pad leaves for its Conv and AveragePool
// consumers: the engine pads while it loads their input, so a zero Pad in
// front of them costs nothing, and anything else reading it is refused.
const padOp = "Pad (folded only into a following Conv or AveragePool)"

// padNode compiles a constant-mode zero Pad of the spatial axes of an NCHW
// tensor into a value the following Conv or AveragePool adds to its own
// padding. MaxPool is refused: its padding is −∞, not the Pad's zeros.
func (c *compiler) padNode(n *onnx.Node) error {
	x, err := c.need(n, 0)
	if err != nil {
		return err
	}
	mode, err := n.String("mode", "constant")
	if err != nil {
		return err
	}
	if mode != "constant" {
		return fmt.Errorf("Pad mode %q: only constant: %w", mode, ErrUnsupported)
	}
	var pads []int64
	fill := float32(0)
	if c.opset() < 11 {
		if pads, err = n.Ints("pads"); err != nil {
			return err
		}
		if fill, err = n.Float("value", 0); err != nil {
			return err
		}
	} else {
		pv, err := c.needConst(n, 1, "pads")
		if err != nil {
			return err
		}
		pads = pv.ints()
		if v, err := c.in(n, 2); err != nil {
			return err
		} else if v != nil {
			if !v.isConst || len(v.floats()) != 1 {
				return fmt.Errorf("Pad's constant_value (%q) must be a constant scalar: %w", v.name, ErrUnsupported)
			}
			fill = v.floats()[0]
		}
		if v, err := c.in(n, 3); err != nil {
			return err
		} else if v != nil {
			return fmt.Errorf("Pad's axes input: %w", ErrUnsupported)
		}
	}
	r := len(x.shape)
	if len(pads) != 2*r {
		return fmt.Errorf("pads %v: want %d values for a rank-%d input", pads, 2*r, r)
	}
	if fill != 0 {
		return fmt.Errorf("Pad with the value %g: only zero: %w", fill, ErrUnsupported)
	}
	if r != 4 || pads[0] != 0 || pads[1] != 0 || pads[4] != 0 || pads[5] != 0 {
		return fmt.Errorf("Pad %v of a rank-%d tensor: only the two spatial axes of NCHW: %w", pads, r, ErrUnsupported)
	}
	shape := append([]int(nil), x.shape...)
	for a := range r {
		if pads[a] < 0 || pads[a+r] < 0 {
			return fmt.Errorf("negative pads %v (cropping): %w", pads, ErrUnsupported)
		}
		shape[a] += int(pads[a] + pads[a+r])
	}
	c.set(n, 0, &value{shape: shape, typ: x.typ, derived: derived{host: &hostOp{op: padOp, src: x, pads: []int{int(pads[2]), int(pads[3]), int(pads[6]), int(pads[7])}}}})
	return nil
}

// unpad rewrites a Conv or AveragePool reading a Pad's output to read the
// Pad's input with the Pad's amounts added to its own pads (an average then
// counts the padding, as it counted the Pad's zeros).
func (c *compiler) unpad(n *onnx.Node) (*onnx.Node, error) {
	v := c.vals[n.Inputs[0]]
	if v == nil || v.host == nil || v.host.op != padOp {
		return n, nil
	}
	if n.OpType != "Conv" && n.OpType != "AveragePool" {
		return nil, fmt.Errorf("%s reads the Pad %q: a Pad folds only into a Conv or an AveragePool: %w", n.OpType, v.name, ErrUnsupported)
	}
	if ap, err := n.String("auto_pad", "NOTSET"); err != nil || (ap != "NOTSET" && ap != "") {
		if err == nil {
			err = fmt.Errorf("Pad %q before a Conv with auto_pad %s: %w", v.name, ap, ErrUnsupported)
		}
		return nil, err
	}
	own, err := n.Ints("pads")
	if err != nil {
		return nil, err
	}
	if own == nil {
		own = make([]int64, 4)
	}
	if len(own) != 4 {
		return nil, fmt.Errorf("pads %v: want 4 values", own)
	}
	// The Pad's zeros count in an average: the pool must count its own
	// padding too, which is only the same when it has none or counts it.
	cip, err := n.Int("count_include_pad", 0)
	if err != nil {
		return nil, err
	}
	if n.OpType == "AveragePool" && cip == 0 && (own[0] != 0 || own[1] != 0 || own[2] != 0 || own[3] != 0) {
		return nil, fmt.Errorf("Pad %q before an AveragePool with pads %v that does not count them: %w", v.name, own, ErrUnsupported)
	}
	sum := make([]int64, 4)
	for k := range sum {
		sum[k] = own[k] + int64(v.host.pads[k])
	}
	m := *n
	m.Inputs = append([]string{v.host.src.name}, n.Inputs[1:]...)
	m.Attrs = []*onnx.Attribute{{Name: "pads", Type: onnx.AttrInts, Ints: sum}}
	if n.OpType == "AveragePool" {
		m.Attrs = append(m.Attrs, &onnx.Attribute{Name: "count_include_pad", Type: onnx.AttrInt, I: 1})
	}
	for _, a := range n.Attrs {
		if a.Name != "pads" && a.Name != "count_include_pad" {
			m.Attrs = append(m.Attrs, a)
		}
	}
	return &m, nil
}
