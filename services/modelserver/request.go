package modelserver

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// tensorSpec is a model's input or output as the protocol's metadata shows
// it: a name, an ONNX element type and a shape.
type tensorSpec struct {
	Name  string
	Type  onnx.DataType
	Shape []int64
}

// inferRequest is an $inference_request, checked against the model's
// inputs and outputs and turned into tensors.
type inferRequest struct {
	ID     string
	Inputs []*onnx.Tensor // in the model's input order
	// Outputs are the outputs to return, by index into the model's
	// outputs, each with whether it goes as binary data.
	Outputs []requestedOutput
}

type requestedOutput struct {
	index  int
	binary bool
}

// The JSON of an $inference_request. Parameters stay raw: the protocol
// lets a parameter be a string, a number or a boolean, and only the
// binary tensor data extension's are read.
type wireRequest struct {
	ID         string                     `json:"id"`
	Parameters map[string]json.RawMessage `json:"parameters"`
	Inputs     []wireInput                `json:"inputs"`
	Outputs    []wireOutputRequest        `json:"outputs"`
}

type wireInput struct {
	Name       string                     `json:"name"`
	Shape      []int64                    `json:"shape"`
	Datatype   string                     `json:"datatype"`
	Parameters map[string]json.RawMessage `json:"parameters"`
	Data       json.RawMessage            `json:"data"`
}

type wireOutputRequest struct {
	Name       string                     `json:"name"`
	Parameters map[string]json.RawMessage `json:"parameters"`
}

// parseInferRequest parses the body of an infer request for a model with
// inputs ins and outputs outs. headerLen is the Inference-Header-Content-
// Length header's value, or -1 without one: then the whole body is JSON.
// With it, the JSON is the body's first headerLen bytes and the binary
// data of the inputs that have a binary_data_size follows, in the order of
// the inputs in the JSON, with nothing after. Every error wraps
// ErrBadRequest.
func parseInferRequest(body []byte, headerLen int64, ins, outs []tensorSpec) (*inferRequest, error) {
	header, rest := body, []byte(nil)
	if headerLen >= 0 {
		if headerLen > int64(len(body)) {
			return nil, fmt.Errorf("%w: Inference-Header-Content-Length %d exceeds the body's %d bytes", ErrBadRequest, headerLen, len(body))
		}
		header, rest = body[:headerLen], body[headerLen:]
	}
	// Unknown fields are ignored, as the protocol's own examples send
	// "model_name" in the request.
	// json.Unmarshal refuses data after the object too; it reads the
	// bytes in place, where a Decoder copies them to a buffer first.
	var w wireRequest
	if err := json.Unmarshal(header, &w); err != nil {
		return nil, fmt.Errorf("%w: malformed inference request: %v", ErrBadRequest, err)
	}
	r := &inferRequest{ID: w.ID, Inputs: make([]*onnx.Tensor, len(ins))}
	for _, in := range w.Inputs {
		k := slices.IndexFunc(ins, func(s tensorSpec) bool { return s.Name == in.Name })
		if k < 0 {
			return nil, fmt.Errorf("%w: unknown input %q", ErrBadRequest, in.Name)
		}
		if r.Inputs[k] != nil {
			return nil, fmt.Errorf("%w: input %q given twice", ErrBadRequest, in.Name)
		}
		t, n, err := parseInput(in, ins[k], rest)
		if err != nil {
			return nil, err
		}
		r.Inputs[k], rest = t, rest[n:]
	}
	for k, t := range r.Inputs {
		if t == nil {
			return nil, fmt.Errorf("%w: input %q missing", ErrBadRequest, ins[k].Name)
		}
	}
	if len(rest) > 0 {
		return nil, fmt.Errorf("%w: %d bytes of binary data beyond the inputs' binary_data_size", ErrBadRequest, len(rest))
	}
	var err error
	r.Outputs, err = parseOutputs(w, outs)
	return r, err
}

// parseInput checks one $request_input against the model's input spec and
// returns its tensor and how many bytes of binary data it took.
func parseInput(in wireInput, spec tensorSpec, binary []byte) (*onnx.Tensor, int, error) {
	if err := checkInput(in.Name, in.Datatype, in.Shape, spec); err != nil {
		return nil, 0, err
	}
	size, hasSize, err := intParam(in.Parameters, "binary_data_size")
	if err != nil {
		return nil, 0, fmt.Errorf("input %q: %w", in.Name, err)
	}
	if !hasSize {
		if in.Data == nil {
			return nil, 0, fmt.Errorf("%w: input %q has neither data nor binary_data_size", ErrBadRequest, in.Name)
		}
		t, err := jsonTensor(in.Name, spec.Type, spec.Shape, in.Data)
		return t, 0, err
	}
	if in.Data != nil {
		return nil, 0, fmt.Errorf("%w: input %q has both data and binary_data_size", ErrBadRequest, in.Name)
	}
	if size < 0 || size > int64(len(binary)) {
		return nil, 0, fmt.Errorf("%w: input %q: binary_data_size %d, but %d bytes of binary data are left", ErrBadRequest, in.Name, size, len(binary))
	}
	t, err := binaryTensor(in.Name, spec.Type, spec.Shape, binary[:size])
	return t, int(size), err
}

// checkInput checks an input's datatype and shape against the model's
// input spec.
func checkInput(name, datatype string, shape []int64, spec tensorSpec) error {
	if datatype != datatypeName(spec.Type) {
		return fmt.Errorf("%w: input %q is %s, the model takes %s", ErrBadRequest, name, datatype, datatypeName(spec.Type))
	}
	if !slices.Equal(shape, spec.Shape) {
		return fmt.Errorf("%w: input %q has shape %v, the model takes %v", ErrBadRequest, name, shape, spec.Shape)
	}
	return nil
}

// parseOutputs returns the outputs a request asks for: those it names, or
// all of the model's. binary_data on an output overrides the request's
// binary_data_output.
func parseOutputs(w wireRequest, outs []tensorSpec) ([]requestedOutput, error) {
	all, _, err := boolParam(w.Parameters, "binary_data_output")
	if err != nil {
		return nil, err
	}
	if len(w.Outputs) == 0 {
		r := make([]requestedOutput, len(outs))
		for k := range outs {
			r[k] = requestedOutput{index: k, binary: all}
		}
		return r, nil
	}
	var r []requestedOutput
	for _, o := range w.Outputs {
		k := slices.IndexFunc(outs, func(s tensorSpec) bool { return s.Name == o.Name })
		if k < 0 {
			return nil, fmt.Errorf("%w: unknown output %q", ErrBadRequest, o.Name)
		}
		if slices.ContainsFunc(r, func(q requestedOutput) bool { return q.index == k }) {
			return nil, fmt.Errorf("%w: output %q requested twice", ErrBadRequest, o.Name)
		}
		bin, set, err := boolParam(o.Parameters, "binary_data")
		if err != nil {
			return nil, fmt.Errorf("output %q: %w", o.Name, err)
		}
		if !set {
			bin = all
		}
		r = append(r, requestedOutput{index: k, binary: bin})
	}
	return r, nil
}

// intParam reads an int64 parameter; set says whether it was given.
func intParam(p map[string]json.RawMessage, name string) (v int64, set bool, err error) {
	raw, ok := p[name]
	if !ok || string(raw) == "null" {
		return 0, false, nil
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return 0, false, fmt.Errorf("%w: parameter %s is %s, not an int64", ErrBadRequest, name, raw)
	}
	return v, true, nil
}

// boolParam reads a boolean parameter; set says whether it was given.
func boolParam(p map[string]json.RawMessage, name string) (v, set bool, err error) {
	raw, ok := p[name]
	if !ok || string(raw) == "null" {
		return false, false, nil
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return false, false, fmt.Errorf("%w: parameter %s is %s, not a boolean", ErrBadRequest, name, raw)
	}
	return v, true, nil
}
