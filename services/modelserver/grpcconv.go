package modelserver

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/fpga-faas/faas/sdk/onnx"
	"github.com/fpga-faas/faas/services/modelserver/inferencepb"
)

// grpcRequest turns a ModelInferRequest into the server's inferRequest,
// checked against the model's inputs ins and outputs outs as
// parseInferRequest checks a REST body. An input's data is either its
// typed contents or, for every input at once, raw_input_contents in the
// inputs' order (the binary tensor data extension's bytes). raw says the
// answer goes as raw_output_contents: when the inputs came raw, or a
// binary_data or binary_data_output parameter asks for it; the protocol
// allows no mix of raw and typed outputs. Every error wraps ErrBadRequest.
func grpcRequest(r *inferencepb.ModelInferRequest, ins, outs []tensorSpec) (req *inferRequest, raw bool, err error) {
	rawIn := r.GetRawInputContents()
	if len(rawIn) > 0 && len(rawIn) != len(r.GetInputs()) {
		return nil, false, fmt.Errorf("%w: %d raw_input_contents for %d inputs", ErrBadRequest, len(rawIn), len(r.GetInputs()))
	}
	req = &inferRequest{ID: r.GetId(), Inputs: make([]*onnx.Tensor, len(ins))}
	for i, in := range r.GetInputs() {
		k := slices.IndexFunc(ins, func(s tensorSpec) bool { return s.Name == in.GetName() })
		if k < 0 {
			return nil, false, fmt.Errorf("%w: unknown input %q", ErrBadRequest, in.GetName())
		}
		if req.Inputs[k] != nil {
			return nil, false, fmt.Errorf("%w: input %q given twice", ErrBadRequest, in.GetName())
		}
		spec := ins[k]
		if err := checkInput(in.GetName(), in.GetDatatype(), in.GetShape(), spec); err != nil {
			return nil, false, err
		}
		var t *onnx.Tensor
		switch {
		case len(rawIn) > 0 && in.GetContents() != nil:
			return nil, false, fmt.Errorf("%w: input %q has contents and the request raw_input_contents", ErrBadRequest, in.GetName())
		case len(rawIn) > 0:
			t, err = binaryTensor(spec.Name, spec.Type, spec.Shape, rawIn[i])
		case in.GetContents() == nil:
			return nil, false, fmt.Errorf("%w: input %q has no contents and the request no raw_input_contents", ErrBadRequest, in.GetName())
		default:
			t, err = contentsTensor(spec, in.GetContents())
		}
		if err != nil {
			return nil, false, err
		}
		req.Inputs[k] = t
	}
	for k, t := range req.Inputs {
		if t == nil {
			return nil, false, fmt.Errorf("%w: input %q missing", ErrBadRequest, ins[k].Name)
		}
	}
	if req.Outputs, err = grpcOutputs(r, outs); err != nil {
		return nil, false, err
	}
	raw = len(rawIn) > 0 || slices.ContainsFunc(req.Outputs, func(o requestedOutput) bool { return o.binary })
	return req, raw, nil
}

// grpcOutputs returns the outputs a request asks for, read by the REST
// side's parseOutputs from the same parameters written as JSON.
func grpcOutputs(r *inferencepb.ModelInferRequest, outs []tensorSpec) ([]requestedOutput, error) {
	w := wireRequest{Parameters: jsonParams(r.GetParameters())}
	for _, o := range r.GetOutputs() {
		w.Outputs = append(w.Outputs, wireOutputRequest{Name: o.GetName(), Parameters: jsonParams(o.GetParameters())})
	}
	return parseOutputs(w, outs)
}

// jsonParams writes gRPC parameters as the JSON values a REST request
// carries: a boolean, a number or a string.
func jsonParams(p map[string]*inferencepb.InferParameter) map[string]json.RawMessage {
	if len(p) == 0 {
		return nil
	}
	out := make(map[string]json.RawMessage, len(p))
	for name, v := range p {
		var x any // an unset parameter_choice stays null, which counts as not given
		switch c := v.GetParameterChoice().(type) {
		case *inferencepb.InferParameter_BoolParam:
			x = c.BoolParam
		case *inferencepb.InferParameter_Int64Param:
			x = c.Int64Param
		case *inferencepb.InferParameter_StringParam:
			x = c.StringParam
		}
		b, _ := json.Marshal(x) // booleans, integers and strings always marshal
		out[name] = b
	}
	return out
}

// contentsTensor turns the typed contents of an input into a tensor of
// the spec's type and shape. The contents must be in the field of the
// spec's datatype (fp32_contents for FP32, int_contents for INT8 to INT32,
// bytes_contents for BYTES, and so on) and in no other.
func contentsTensor(spec tensorSpec, c *inferencepb.InferTensorContents) (*onnx.Tensor, error) {
	var n int // elements in the datatype's field
	var ints []int64
	switch spec.Type {
	case onnx.Float:
		n = len(c.GetFp32Contents())
	case onnx.Bool:
		n = len(c.GetBoolContents())
		for _, b := range c.GetBoolContents() {
			ints = append(ints, map[bool]int64{false: 0, true: 1}[b])
		}
	case onnx.Int8, onnx.Int16, onnx.Int32:
		n = len(c.GetIntContents())
		for _, v := range c.GetIntContents() {
			ints = append(ints, int64(v))
		}
	case onnx.Int64:
		n, ints = len(c.GetInt64Contents()), c.GetInt64Contents()
	case onnx.Uint8, onnx.Uint16, onnx.Uint32:
		n = len(c.GetUintContents())
		for _, v := range c.GetUintContents() {
			ints = append(ints, int64(v))
		}
	case onnx.Uint64:
		n = len(c.GetUint64Contents())
	case onnx.String:
		n = len(c.GetBytesContents())
	default:
		return nil, fmt.Errorf("%w: input %q: %s has no typed contents here", ErrBadRequest, spec.Name, datatypeName(spec.Type))
	}
	total := len(c.GetBoolContents()) + len(c.GetIntContents()) + len(c.GetInt64Contents()) + len(c.GetUintContents()) +
		len(c.GetUint64Contents()) + len(c.GetFp32Contents()) + len(c.GetFp64Contents()) + len(c.GetBytesContents())
	if total != n {
		return nil, fmt.Errorf("%w: input %q is %s, but its contents hold other types' fields", ErrBadRequest, spec.Name, datatypeName(spec.Type))
	}
	if want := elemCount(spec.Shape); int64(n) != want {
		return nil, fmt.Errorf("%w: input %q: %d elements for shape %v, which holds %d", ErrBadRequest, spec.Name, n, spec.Shape, want)
	}
	switch spec.Type {
	case onnx.Float:
		return onnx.NewFloat32(spec.Name, spec.Shape, c.GetFp32Contents()), nil
	case onnx.Uint64:
		return onnx.NewUint64(spec.Name, spec.Shape, c.GetUint64Contents())
	case onnx.String:
		return onnx.NewString(spec.Name, spec.Shape, c.GetBytesContents())
	}
	t, err := onnx.NewInt(spec.Name, spec.Type, spec.Shape, ints)
	if err != nil {
		return nil, fmt.Errorf("%w: input %q: %v", ErrBadRequest, spec.Name, err)
	}
	return t, nil
}

// grpcResponse builds the answer to req from the run's outputs, in the
// model's output order: raw_output_contents when raw, else typed contents.
func grpcResponse(model, ver string, req *inferRequest, raw bool, outs []*onnx.Tensor) (*inferencepb.ModelInferResponse, error) {
	resp := &inferencepb.ModelInferResponse{ModelName: model, ModelVersion: ver, Id: req.ID}
	for _, o := range req.Outputs {
		if o.index >= len(outs) {
			return nil, fmt.Errorf("the run returned %d outputs, output %d was asked for", len(outs), o.index)
		}
		t := outs[o.index]
		out := &inferencepb.ModelInferResponse_InferOutputTensor{Name: t.Name, Datatype: datatypeName(t.DataType), Shape: t.Dims}
		var err error
		if raw {
			var b []byte
			b, err = tensorBytes(t)
			resp.RawOutputContents = append(resp.RawOutputContents, b)
		} else {
			out.Contents, err = tensorContents(t)
		}
		if err != nil {
			return nil, fmt.Errorf("output %q: %w", t.Name, err)
		}
		resp.Outputs = append(resp.Outputs, out)
	}
	return resp, nil
}

// tensorContents is t's data in the typed contents field of its datatype.
func tensorContents(t *onnx.Tensor) (*inferencepb.InferTensorContents, error) {
	switch t.DataType {
	case onnx.Float:
		f, err := t.Float32s()
		return &inferencepb.InferTensorContents{Fp32Contents: f}, err
	case onnx.Uint64:
		u, err := t.Uint64s()
		return &inferencepb.InferTensorContents{Uint64Contents: u}, err
	case onnx.String:
		s, err := t.Strings()
		return &inferencepb.InferTensorContents{BytesContents: s}, err
	}
	v, err := t.Int64s()
	if err != nil {
		return nil, err
	}
	c := &inferencepb.InferTensorContents{}
	switch t.DataType {
	case onnx.Bool:
		for _, x := range v {
			c.BoolContents = append(c.BoolContents, x != 0)
		}
	case onnx.Int8, onnx.Int16, onnx.Int32:
		for _, x := range v {
			c.IntContents = append(c.IntContents, int32(x))
		}
	case onnx.Int64:
		c.Int64Contents = v
	case onnx.Uint8, onnx.Uint16, onnx.Uint32:
		for _, x := range v {
			c.UintContents = append(c.UintContents, uint32(x))
		}
	default:
		return nil, fmt.Errorf("%s has no typed contents here", datatypeName(t.DataType))
	}
	return c, nil
}
