package alidnn

import (
	"fmt"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// dispatch compiles n by its operator, inputs ready (see run), in fp32
// if WithFloatNodes names it.
func (c *compiler) dispatch(n *onnx.Node) error {
	if c.opts.floatNodes[n.Name] && !c.keepFP32 {
		c.keepFP32 = true
		defer func() { c.keepFP32 = false }()
	}
	return c.dispatchOp(n)
}

// dispatchOp compiles n by its operator.
func (c *compiler) dispatchOp(n *onnx.Node) error {
	switch n.OpType {
	case "Identity", "Dropout":
		return c.identityNode(n)
	case blockMaxOp:
		return c.blockMaxNode(n)
	case laneBlockOp:
		return c.laneBlockNode(n)
	case "Flatten", "Reshape", "Squeeze", "Unsqueeze":
		return c.reshape(n)
	case "Transpose":
		return c.transposeNode(n)
	case "Conv", "ConvInteger", "QLinearConv":
		return c.convFamily(n)
	case "Pad":
		return c.padNode(n)
	case "ConvTranspose":
		return c.convTransposeNode(n)
	case "Resize", "Upsample":
		return c.resizeNode(n)
	case "MatMul":
		if sum := c.lateNorm[n.Inputs[0]]; sum != nil {
			return c.lateNormMatMul(n, sum)
		}
		return c.matmulFamily(n)
	case "Gemm", "MatMulInteger", "QLinearMatMul":
		return c.matmulFamily(n)
	case "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool":
		m, err := c.unpad(n)
		if err != nil {
			return err
		}
		return c.poolNode(m)
	case "Relu":
		return c.reluNode(n)
	case "Add", "Sub", "Mul", "Div":
		return c.binary(n)
	case "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin":
		return c.reduceNode(n)
	case "LayerNormalization":
		return c.layerNormNode(n)
	case "Gelu", "Swish", "Mish", "RMSNormalization", "CastLike", "Reciprocal":
		return c.functionNode(n)
	case "Pow":
		return c.powNode(n)
	case "Erf":
		return c.erfNode(n)
	case "Sum", "Max", "Min":
		return c.sum(n)
	case "Clip", "LeakyRelu", "HardSigmoid", "HardSwish", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Softplus", "Abs", "Neg", "Round", "Floor", "Ceil":
		return c.activationNode(n)
	case "LRN":
		return c.lrnNode(n)
	case "Concat":
		return c.concat(n)
	case "BatchNormalization":
		return c.batchNorm(n)
	case "Cast":
		return c.cast(n)
	case "QuantizeLinear":
		return c.quantizeNode(n)
	case "DynamicQuantizeLinear":
		return c.dynamicQuantizeNode(n)
	case "DequantizeLinear":
		return c.dequantizeNode(n)
	case "Softmax":
		return c.softmaxNode(n)
	case "Gather":
		return c.gatherNode(n)
	case "Where":
		return c.whereNode(n)
	case "Split":
		return c.splitNode(n)
	case "Slice":
		return c.sliceNode(n)
	case "Expand":
		return c.expandNode(n)
	case "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Not":
		return c.compareNode(n)
	case "And", "Or", "Xor":
		return c.logicNode(n)
	case "Loop":
		// A constant Loop folds (see loopfold.go).
		return fmt.Errorf("Loop over values known only at run time: the engine has no control flow: %w", ErrUnsupported)
	}
	return fmt.Errorf("operator %s: %w", n.OpType, ErrUnsupported)
}

// identityNode compiles Identity and Dropout (in inference an identity)
// as an alias of the input.
func (c *compiler) identityNode(n *onnx.Node) error {
	x, err := c.need(n, 0)
	if err != nil {
		return err
	}
	c.set(n, 0, &value{shape: x.shape, typ: x.typ, derived: derived{alias: x.root(), view: x.view, cols: x.cols}})
	return c.dropoutMask(n, x)
}

// convFamily compiles Conv, ConvInteger and QLinearConv: a Pad before it
// folded in, the QDQ format as an int8 convolution, else convNode.
func (c *compiler) convFamily(n *onnx.Node) error {
	m, err := c.unpad(n)
	if err != nil {
		return err
	}
	if done, err := c.qdqConv(m); done || err != nil {
		return err
	}
	return c.convNode(m)
}

// matmulFamily compiles Gemm, MatMul, MatMulInteger and QLinearMatMul: of
// a tensor held as columns, of the QDQ format, a Gemm of a flattened
// image, else matmulNode.
func (c *compiler) matmulFamily(n *onnx.Node) error {
	if x := c.vals[n.Inputs[0]]; x != nil && x.cols != nil {
		return c.matmulCols(n)
	}
	if done, err := c.qdqMatMul(n); done || err != nil {
		return err
	}
	if n.OpType == "Gemm" {
		if done, err := c.gemmFlattened(n); done || err != nil {
			return err
		}
	}
	return c.matmulNode(n)
}

// reluNode adds Relu to the epilogue of the layer writing its input.
func (c *compiler) reluNode(n *onnx.Node) error {
	x, err := c.need(n, 0)
	if err != nil {
		return err
	}
	l, err := c.open(x)
	if err != nil {
		return err
	}
	l.steps = append(l.steps, step{kind: sRelu, fp: l.accFP})
	c.set(n, 0, c.rename(l, x.typ))
	return nil
}
