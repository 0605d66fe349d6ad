package onnx

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// Field numbers of onnx.proto used by the model tests.
const (
	mIRVersion, mProducerName, mGraph, mOpsetImport                               = 1, 2, 7, 8
	gNode, gName, gInitializer, gInput, gOutput                                   = 1, 2, 5, 11, 12
	gSparseInitializer                                                            = 15
	nInput, nOutput, nName, nOpType, nAttribute, nDomain                          = 1, 2, 3, 4, 5, 7
	aName, aF, aI, aS, aT, aG, aFloats, aInts, aStrings, aTensors, aGraphs, aType = 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 20
)

func attrPB(name string, typ AttrType) pb { return pb{}.str(aName, name).int(aType, int64(typ)) }

func valueInfoPB(name string, elem DataType, dims ...int64) pb {
	shape := pb{}
	for _, d := range dims {
		shape = shape.msg(1, pb{}.int(1, d))
	}
	shape = shape.msg(1, pb{}.str(2, "N"))
	return pb{}.str(1, name).msg(2, pb{}.msg(1, pb{}.int(1, int64(elem)).msg(2, shape)))
}

// testModel builds a model with one node of every attribute type.
func testModel() pb {
	w := tensorPB("w", Float, 2).floats(tFloatData, true, 1, 2)
	sub := pb{}.str(gName, "body").msg(gNode, pb{}.str(nOpType, "Identity").str(nInput, "a").str(nOutput, "b"))
	node := pb{}.str(nInput, "x").str(nInput, "").str(nInput, "w").str(nOutput, "y").
		str(nName, "n0").str(nOpType, "Custom").str(nDomain, "com.example").
		msg(nAttribute, attrPB("f", AttrFloat).float(aF, 0.5)).
		msg(nAttribute, attrPB("i", AttrInt).int(aI, -3)).
		msg(nAttribute, attrPB("s", AttrString).str(aS, "SAME_UPPER")).
		msg(nAttribute, attrPB("t", AttrTensor).msg(aT, w)).
		msg(nAttribute, attrPB("g", AttrGraph).msg(aG, sub)).
		msg(nAttribute, attrPB("floats", AttrFloats).floats(aFloats, false, 1.5, 2.5)).
		msg(nAttribute, attrPB("ints", AttrInts).ints(aInts, true, 1, -1, 1<<40)).
		msg(nAttribute, attrPB("ints_unpacked", AttrInts).ints(aInts, false, 4, 5)).
		msg(nAttribute, attrPB("strings", AttrStrings).str(aStrings, "a").str(aStrings, "")).
		msg(nAttribute, attrPB("tensors", AttrTensors).msg(aTensors, w).msg(aTensors, w)).
		msg(nAttribute, attrPB("graphs", AttrGraphs).msg(aGraphs, sub)).
		msg(nAttribute, pb{}.str(aName, "untyped").int(aI, 9)). // IR version 1: no type
		str(99, "unknown field")
	graph := pb{}.str(gName, "g").msg(gNode, node).msg(gInitializer, w).
		msg(gInput, valueInfoPB("x", Float, 1, 2)).msg(gOutput, valueInfoPB("y", Float)).
		double(77, 1) // unknown
	return pb{}.int(mIRVersion, 7).str(mProducerName, "test").
		msg(mOpsetImport, pb{}.str(1, "").int(2, 13)).
		msg(mOpsetImport, pb{}.str(1, "com.example").int(2, 1)).
		msg(mGraph, graph).
		msg(25, pb{}.str(1, "a function, skipped"))
}

func TestDecodeModel(t *testing.T) {
	m, err := Decode(testModel())
	if err != nil {
		t.Fatal(err)
	}
	if m.IRVersion != 7 || m.ProducerName != "test" {
		t.Errorf("model %+v", m)
	}
	if m.Opset("") != 13 || m.Opset("ai.onnx") != 13 || m.Opset("com.example") != 1 || m.Opset("x") != 0 {
		t.Errorf("opsets %+v", m.Opsets)
	}
	g := m.Graph
	if g.Name != "g" || len(g.Nodes) != 1 || g.Initializer("w") == nil || g.Initializer("x") != nil {
		t.Fatalf("graph %+v", g)
	}
	in := g.Inputs[0]
	if in.Name != "x" || in.ElemType != Float || !slices.Equal(in.Dims, []Dim{{Value: 1}, {Value: 2}, {Param: "N"}}) {
		t.Errorf("input %+v", in)
	}
	n := g.Nodes[0]
	if n.OpType != "Custom" || n.Domain != "com.example" || n.Name != "n0" ||
		!slices.Equal(n.Inputs, []string{"x", "", "w"}) || !slices.Equal(n.Outputs, []string{"y"}) {
		t.Errorf("node %+v", n)
	}
	check := func(what string, got, want any, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v", what, err)
		} else if !equal(got, want) {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	f, err := n.Float("f", 9)
	check("f", f, float32(0.5), err)
	i, err := n.Int("i", 9)
	check("i", i, int64(-3), err)
	s, err := n.String("s", "")
	check("s", s, "SAME_UPPER", err)
	ints, err := n.Ints("ints")
	check("ints", ints, []int64{1, -1, 1 << 40}, err)
	ints, err = n.Ints("ints_unpacked")
	check("ints_unpacked", ints, []int64{4, 5}, err)
	tensor, err := n.Tensor("t")
	if err != nil || tensor == nil || tensor.Name != "w" {
		t.Errorf("t = %+v, %v", tensor, err)
	}
	a := n.Attr("floats")
	check("floats", a.Floats, []float32{1.5, 2.5}, nil)
	a = n.Attr("strings")
	if len(a.Strings) != 2 || string(a.Strings[0]) != "a" || len(a.Strings[1]) != 0 {
		t.Errorf("strings %q", a.Strings)
	}
	if a := n.Attr("tensors"); len(a.Tensors) != 2 || a.Type != AttrTensors {
		t.Errorf("tensors %+v", a)
	}
	if a := n.Attr("g"); a.G == nil || a.G.Name != "body" || a.G.Nodes[0].OpType != "Identity" {
		t.Errorf("g %+v", a)
	}
	if a := n.Attr("graphs"); len(a.Graphs) != 1 || a.Type != AttrGraphs {
		t.Errorf("graphs %+v", a)
	}
	if a := n.Attr("untyped"); a.Type != AttrInt || a.I != 9 {
		t.Errorf("untyped %+v", a)
	}
	// Defaults, and wrong types.
	if v, err := n.Int("absent", 7); v != 7 || err != nil {
		t.Errorf("Int(absent) = %d, %v", v, err)
	}
	if v, err := n.Ints("absent"); v != nil || err != nil {
		t.Errorf("Ints(absent) = %v, %v", v, err)
	}
	if v, err := n.String("absent", "NOTSET"); v != "NOTSET" || err != nil {
		t.Errorf("String(absent) = %v, %v", v, err)
	}
	for what, err := range map[string]error{
		"Int(s)":    second(n.Int("s", 0)),
		"Ints(i)":   second(n.Ints("i")),
		"Float(i)":  second(n.Float("i", 0)),
		"String(f)": second(n.String("f", "")),
		"Tensor(g)": second(n.Tensor("g")),
	} {
		if err == nil || !strings.Contains(err.Error(), `Custom "n0"`) {
			t.Errorf("%s: error %v, want one naming the node", what, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }

func equal(a, b any) bool {
	switch a := a.(type) {
	case []int64:
		return slices.Equal(a, b.([]int64))
	case []float32:
		return slices.Equal(a, b.([]float32))
	}
	return a == b
}

// TestDecodeModelErrors checks that errors name the path of the offending
// field.
func TestDecodeModelErrors(t *testing.T) {
	conv := func(attrs ...pb) pb {
		n := pb{}.str(nInput, "x").str(nOutput, "y").str(nName, "conv1").str(nOpType, "Conv")
		for _, a := range attrs {
			n = n.msg(nAttribute, a)
		}
		return n
	}
	model := func(g pb) pb { return pb{}.int(mIRVersion, 8).msg(mGraph, g) }
	pads := attrPB("pads", AttrInts).bytes(aInts, []byte{1, 0x80})
	deep := pb{}.msg(gNode, pb{}.str(nOpType, "Leaf"))
	for range MaxDepth {
		deep = pb{}.msg(gNode, pb{}.str(nOpType, "If").msg(nAttribute, attrPB("then_branch", AttrGraph).msg(aG, deep)))
	}
	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{"attribute", model(pb{}.msg(gNode, conv()).msg(gNode, conv(attrPB("group", AttrInt).int(aI, 1), pads))),
			`onnx: graph.node[1] (Conv "conv1").attribute[1] "pads".ints: truncated varint at byte `},
		{"initializer", model(pb{}.msg(gInitializer, tensorPB("W", Float, 2, 2).bytes(tRawData, make([]byte, 3)))),
			`onnx: graph.initializer[0] "W".raw_data: 3 bytes for 4 elements of FLOAT (dims [2 2]), want 16`},
		{"external", model(pb{}.msg(gInitializer, tensorPB("W", Float, 1).int(tDataLocation, 1))),
			`graph.initializer[0] "W": tensor "W": external data is not supported`},
		{"sparse initializer", model(pb{}.msg(gSparseInitializer, pb{})), "graph.sparse_initializer[0]: sparse initializers are not supported"},
		{"sparse attribute", model(pb{}.msg(gNode, conv(attrPB("v", AttrSparseTensor).msg(22, pb{})))), "sparse tensors are not supported"},
		{"no graph", pb{}.int(mIRVersion, 8), "graph: missing"},
		{"no op_type", model(pb{}.msg(gNode, pb{}.str(nName, "n"))), `graph.node[0] ( "n").op_type: missing`},
		{"opset", pb{}.msg(mOpsetImport, pb{}.str(1, "").str(2, "13")), "opset_import[0].version: length-delimited field at byte 6, want varint"},
		{"truncated", trunc(model(pb{}.msg(gNode, conv())), 3), "truncated length-delimited field at byte 3"},
		{"negative dim", model(pb{}.msg(gInput, valueInfoPB("x", Float, -1))), `graph.input[0] "x".type.tensor_type.shape.dim[0].dim_value: -1 is negative`},
		{"depth", model(deep), "graphs nested more than 16 deep"},
		{"empty nodes", model(pb(strings.Repeat("\x0a\x00", 1000))), "op_type: missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Decode(tc.in)
			if err == nil {
				t.Fatalf("decoded %+v", m)
			}
			var e *Error
			if !errors.Is(err, ErrFormat) || !errors.As(err, &e) {
				t.Errorf("%v (%T) is not an *Error wrapping ErrFormat", err, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestDecodeBudget checks that a small input cannot make the decoder
// allocate much more than its size: an empty attribute costs 2 bytes in the
// input and an Attribute in memory.
func TestDecodeBudget(t *testing.T) {
	node := pb{}.str(nOpType, "Op").bytes(nAttribute, nil)
	attrs := pb(strings.Repeat("\x2a\x00", 1<<20))
	_, err := Decode(pb{}.msg(mGraph, pb{}.msg(gNode, append(node, attrs...))))
	if err == nil || !strings.Contains(err.Error(), "16 times") {
		t.Fatalf("error %v, want the budget exceeded", err)
	}
}
