package onnxtest

import (
	"path/filepath"
	"strings"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// params lists, per operator, the inputs that are parameters.
var params = map[string][]int{
	"Conv":               {1, 2},
	"ConvInteger":        {1, 2, 3},
	"QLinearConv":        {1, 2, 3, 4, 5, 6, 7, 8},
	"Gemm":               {1, 2},
	"MatMul":             {1},
	"MatMulInteger":      {1, 2, 3},
	"QLinearMatMul":      {1, 2, 3, 4, 5, 6, 7},
	"BatchNormalization": {1, 2, 3, 4},
	"QuantizeLinear":     {1, 2},
	"DequantizeLinear":   {1, 2},
	"Reshape":            {1},
	"Clip":               {1, 2},
	"LayerNormalization": {1, 2},
	"RMSNormalization":   {1},
	// Shapes, axes and sizes: a deployed model writes them as constants.
	// (Gather's indices stay inputs: token ids are.)
	"Expand":    {1},
	"Slice":     {1, 2, 3, 4},
	"Split":     {1},
	"Range":     {0, 1, 2},
	"ReduceMax": {1}, "ReduceMean": {1}, "ReduceMin": {1}, "ReduceSum": {1},
	// Pow's exponent: the engine raises to constant powers (see alidnn's pow.go).
	"Pow": {1},
}

// split separates the parameter inputs from the runtime inputs. An
// _expanded folder holds its operator's function body, whose nodes read the
// operator's parameters (a LayerNormalization's scale through a Flatten):
// the inputs its operator's folder binds, position for position, are
// bound here too, so that both run the same model.
func split(dir string, g *onnx.Graph, ins []*onnx.Tensor) (bound, runtime []*onnx.Tensor) {
	param := paramNames(g)
	if op := expandedOf(dir); op != "" {
		if m, err := onnx.ReadModel(filepath.Join(op, "model.onnx")); err == nil {
			opParam, own := paramNames(m.Graph), realInputs(g)
			for k, name := range realInputs(m.Graph) {
				if opParam[name] && k < len(own) {
					param[own[k]] = true
				}
			}
		}
	}
	for _, t := range ins {
		if param[t.Name] {
			bound = append(bound, t)
		} else {
			runtime = append(runtime, t)
		}
	}
	return bound, runtime
}

// paramNames returns the inputs of g's nodes that params lists.
func paramNames(g *onnx.Graph) map[string]bool {
	param := map[string]bool{}
	for _, n := range g.Nodes {
		for _, k := range params[n.OpType] {
			if k < len(n.Inputs) {
				param[n.Inputs[k]] = true
			}
		}
	}
	return param
}

// expandedOf returns the folder of the operator whose function body the
// folder dir holds (test_x_expanded or test_x_expanded_ver18 beside
// test_x), or "".
func expandedOf(dir string) string {
	dir = filepath.Clean(dir)
	base := filepath.Base(dir)
	i := strings.LastIndex(base, "_expanded")
	if i < 0 {
		return ""
	}
	return filepath.Join(filepath.Dir(dir), base[:i])
}
