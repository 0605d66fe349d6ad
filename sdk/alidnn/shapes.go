package alidnn

// The dimensions a model leaves free — symbolic, as exporters write the
// batch and the sequence length, or unknown — are bound at compile time
// (WithShape); the engine runs static shapes.

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// splitShapes checks WithShape's names against the graph's inputs and
// their symbolic dimensions, and collects the bindings of symbolic
// dimensions in c.dims. A name that is an input's binds that input only.
func (c *compiler) splitShapes() error {
	if len(c.opts.shapes) == 0 {
		return nil
	}
	inputs, params := map[string]bool{}, map[string]bool{}
	for _, in := range c.g.Inputs {
		if c.g.Initializer(in.Name) != nil {
			continue
		}
		inputs[in.Name] = true
		for _, d := range in.Dims {
			if d.Value <= 0 && d.Param != "" {
				params[d.Param] = true
			}
		}
	}
	c.dims = map[string]int{}
	for _, name := range slices.Sorted(maps.Keys(c.opts.shapes)) {
		dims := c.opts.shapes[name]
		for k, d := range dims {
			if d < 0 || d == 0 && !inputs[name] {
				return fmt.Errorf("shape binding %s=%s: dimension %d is %d, want a positive size (0 only for an input's, see empty.go)", name, dimsFlag(dims), k, d)
			}
		}
		switch {
		case inputs[name]:
		case params[name] && len(dims) == 1:
			c.dims[name] = dims[0]
		case params[name]:
			return fmt.Errorf("shape binding %s=%s: %q is a symbolic dimension, which takes one size", name, dimsFlag(dims), name)
		default:
			return fmt.Errorf("shape binding %s=%s: the model has no input and no symbolic dimension %q (inputs: %s; symbolic dimensions: %s)",
				name, dimsFlag(dims), name, strings.Join(slices.Sorted(maps.Keys(inputs)), ", "), strings.Join(slices.Sorted(maps.Keys(params)), ", "))
		}
	}
	return nil
}

// inputShape is the shape graph input in is compiled for: the model's
// fixed dimensions, the ones WithShape binds, and ForBatch's leading one.
// A binding of the whole input also gives the rank of an input whose
// shape the model leaves unknown.
func (c *compiler) inputShape(in onnx.ValueInfo) ([]int, error) {
	bound, ok := c.opts.shapes[in.Name]
	dims := in.Dims
	if ok && dims == nil {
		dims = make([]onnx.Dim, len(bound))
	}
	if ok && len(bound) != len(dims) {
		return nil, fmt.Errorf("input %q %s has %d dimensions, the shape binding %s=%s gives %d", in.Name, dimString(dims), len(dims), in.Name, dimsFlag(bound), len(bound))
	}
	shape := make([]int, len(dims))
	for k := range dims {
		n, err := c.inputDim(in.Name, dims, k, bound)
		if err != nil {
			return nil, err
		}
		shape[k] = n
	}
	return shape, nil
}

// inputDim is dimension k of input name, whose dimensions in the model
// are dims and bound by name to bound (nil if not).
func (c *compiler) inputDim(name string, dims []onnx.Dim, k int, bound []int) (int, error) {
	d := dims[k]
	n := int(max(d.Value, 0))
	switch {
	case bound != nil && d.Value > 0 && int64(bound[k]) != d.Value:
		return 0, fmt.Errorf("input %q %s: dimension %d is %d in the model, the shape binding %s=%s makes it %d",
			name, dimString(dims), k, d.Value, name, dimsFlag(bound), bound[k])
	case bound != nil:
		n = bound[k]
	case d.Value <= 0 && d.Param != "":
		n = c.dims[d.Param]
	}
	if k == 0 && c.opts.batch > 1 && (d.Value == 1 || d.Value <= 0) {
		if n > 1 && n != c.opts.batch {
			return 0, fmt.Errorf("input %q %s: the leading dimension is bound to %d, and the batch to %d", name, dimString(dims), n, c.opts.batch)
		}
		return c.opts.batch, nil
	}
	if n < 0 || n == 0 && bound == nil {
		return 0, freeDim(name, dims, k)
	}
	return n, nil
}

// freeDim is the error of a dimension left free, with the bindings that
// would fix it.
func freeDim(name string, dims []onnx.Dim, k int) error {
	example := make([]string, len(dims))
	for j, d := range dims {
		example[j] = "N"
		if d.Value > 0 {
			example[j] = strconv.FormatInt(d.Value, 10)
		}
	}
	what, flags := "has no size and no name", fmt.Sprintf("--shape %s=%s", name, strings.Join(example, "x"))
	if p := dims[k].Param; p != "" {
		what, flags = fmt.Sprintf("is the symbolic %q", p), fmt.Sprintf("--shape %s=N or %s", p, flags)
	}
	return fmt.Errorf("input %q %s: dimension %d %s: bind it at compile time with faas model compile %s (WithShape in the SDK): %w",
		name, dimString(dims), k, what, flags, ErrUnsupported)
}

// dimString shows a model's dimensions: sizes, symbolic names, ? for
// unknown.
func dimString(dims []onnx.Dim) string {
	s := make([]string, len(dims))
	for k, d := range dims {
		switch {
		case d.Value > 0:
			s[k] = strconv.FormatInt(d.Value, 10)
		case d.Param != "":
			s[k] = d.Param
		default:
			s[k] = "?"
		}
	}
	return "[" + strings.Join(s, " ") + "]"
}

// dimsFlag writes dims as the --shape flag takes them: 1x3x48x320.
func dimsFlag(dims []int) string {
	s := make([]string, len(dims))
	for k, d := range dims {
		s[k] = strconv.Itoa(d)
	}
	return strings.Join(s, "x")
}
