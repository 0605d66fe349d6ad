package alidnn

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestNHWCBindings checks that the generated NHWC case's program packs its
// input and unpacks its output in NHWC order, channels on the lanes, that
// a program file keeps those bindings, and that neither Transpose costs a
// layer.
func TestNHWCBindings(t *testing.T) {
	m, err := onnx.ReadModel(filepath.Join("onnxtest", "testdata", "generated", "export_nhwc_conv", "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(m)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := p.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	q, err := ReadProgram(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []Binding{q.Inputs[0], q.Outputs[0]} {
		if b.Shape[3] != b.Lay.Shape[3] || b.Lay.Lane != 3 || !eqInts(b.Lay.Outer, []int{0}) || !eqInts(b.Lay.Rows, []int{1, 2}) {
			t.Errorf("%s: shape %v laid out as %+v, want NHWC with C on the lanes", b.Name, b.Shape, b.Lay)
		}
	}
	c := newCompiler(m, nil)
	if err := c.build(); err != nil {
		t.Fatal(err)
	}
	for _, l := range c.layers {
		if l.kind != lGemm {
			t.Errorf("layer %s is not the Conv's (its stem packing is)", l.out)
		}
	}
}
