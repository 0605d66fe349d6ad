package onnxtest_test

import (
	"math"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// Cases of unary math on the ALU's exp and log: Exp, Log and Sqrt (of
// positive inputs, and Sqrt of zero), Softplus, Abs and Neg, alone and
// Exp after a Conv (fused into its epilogue).

func init() { caseFamilies = append(caseFamilies, unaryMathCases) }

func f64(f func(float64) float64) func(float32) float32 {
	return func(x float32) float32 { return float32(f(float64(x))) }
}

// positive is unary on x mapped into [0, 5] (with exact zeros kept), the
// domain of Log and Sqrt.
func positive(name, op string, f func(float32) float32) genCase {
	c := unary(name, 13, op, nil, nil, nil, f)
	x, _ := c.ins[0].Float32s()
	x = mapF(x, func(v float32) float32 { return float32(math.Abs(float64(v))) })
	if op == "Log" {
		x = mapF(x, func(v float32) float32 { return v + 0.01 })
	}
	c.ins = []*onnx.Tensor{onnx.NewFloat32("x", xDims, x)}
	c.outs = []*onnx.Tensor{onnx.NewFloat32("y", xDims, mapF(x, f))}
	return c
}

func unaryMathCases() []genCase {
	return []genCase{
		unary("exp", 13, "Exp", nil, nil, nil, f64(math.Exp)),
		positive("log", "Log", f64(math.Log)),
		positive("sqrt", "Sqrt", f64(math.Sqrt)),
		unary("softplus", 13, "Softplus", nil, nil, nil, f64(func(x float64) float64 { return math.Log1p(math.Exp(x)) })),
		unary("abs", 13, "Abs", nil, nil, nil, f64(math.Abs)),
		unary("neg", 13, "Neg", nil, nil, nil, func(x float32) float32 { return -x }),
		convAct("conv_exp", 13, "Exp", nil, nil, nil, f64(math.Exp)),
	}
}
