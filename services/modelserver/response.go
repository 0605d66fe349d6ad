package modelserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// inferResponse is an $inference_response ready to send: its JSON, and the
// binary data of the outputs asked for as binary, in their order.
type inferResponse struct {
	header []byte
	binary [][]byte
}

type wireResponse struct {
	ModelName    string       `json:"model_name"`
	ModelVersion string       `json:"model_version"`
	ID           string       `json:"id,omitempty"`
	Outputs      []wireOutput `json:"outputs"`
}

type wireOutput struct {
	Name       string         `json:"name"`
	Shape      []int64        `json:"shape"`
	Datatype   string         `json:"datatype"`
	Parameters map[string]any `json:"parameters,omitempty"`
	Data       any            `json:"data,omitempty"`
}

// newResponse builds the answer to req from the run's outputs, in the
// model's output order.
func newResponse(model, ver string, req *inferRequest, outs []*onnx.Tensor) (*inferResponse, error) {
	w := wireResponse{ModelName: model, ModelVersion: ver, ID: req.ID, Outputs: []wireOutput{}}
	r := &inferResponse{}
	for _, o := range req.Outputs {
		if o.index >= len(outs) {
			return nil, fmt.Errorf("the run returned %d outputs, output %d was asked for", len(outs), o.index)
		}
		t := outs[o.index]
		out := wireOutput{Name: t.Name, Shape: t.Dims, Datatype: datatypeName(t.DataType)}
		if out.Shape == nil {
			out.Shape = []int64{}
		}
		if o.binary {
			b, err := tensorBytes(t)
			if err != nil {
				return nil, fmt.Errorf("output %q: %w", t.Name, err)
			}
			out.Parameters = map[string]any{"binary_data_size": len(b)}
			r.binary = append(r.binary, b)
		} else {
			data, err := tensorJSON(t)
			if err != nil {
				return nil, fmt.Errorf("output %q: %w", t.Name, err)
			}
			out.Data = data
		}
		w.Outputs = append(w.Outputs, out)
	}
	var err error
	r.header, err = json.Marshal(w)
	return r, err
}

// write sends the response: JSON alone, or with binary outputs the JSON
// followed by their data, Inference-Header-Content-Length giving the
// JSON's length.
func (r *inferResponse) write(w http.ResponseWriter) {
	if len(r.binary) == 0 {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(r.header)))
		_, _ = w.Write(r.header)
		return
	}
	n := len(r.header)
	for _, b := range r.binary {
		n += len(b)
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set(headerLength, strconv.Itoa(len(r.header)))
	w.Header().Set("Content-Length", strconv.Itoa(n))
	_, _ = w.Write(r.header)
	for _, b := range r.binary {
		_, _ = w.Write(b)
	}
}
