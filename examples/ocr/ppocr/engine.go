package ppocr

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// The model files of testdata/ocr/ppocrv4 (see testdata/README.md).
const (
	DetFile  = "ch_PP-OCRv4_det_infer.onnx"
	ClsFile  = "ch_ppocr_mobile_v2.0_cls_infer.onnx"
	RecFile  = "ch_PP-OCRv4_rec_infer.onnx"
	DictFile = "ppocr_keys_v1.txt"
)

// Models are the three ONNX models and the recogniser's dictionary.
type Models struct {
	Det, Cls, Rec *onnx.Model
	Dict          Dict
}

// ReadModels reads the models and dictionary from dir.
func ReadModels(dir string) (*Models, error) {
	var m Models
	for _, f := range []struct {
		name string
		dst  **onnx.Model
	}{{DetFile, &m.Det}, {ClsFile, &m.Cls}, {RecFile, &m.Rec}} {
		model, err := onnx.ReadModel(filepath.Join(dir, f.name))
		if err != nil {
			return nil, err
		}
		*f.dst = model
	}
	d, err := ReadDict(filepath.Join(dir, DictFile))
	if err != nil {
		return nil, err
	}
	m.Dict = d
	return &m, nil
}

// Runner runs models on an engine, each compiled once per input shape
// (the engine runs static shapes; the models leave H and W free) and kept
// open in a session.
type Runner struct {
	eng      alidnn.Engine
	opts     []alidnn.Option
	sessions map[runKey]*alidnn.Session
	// Stats add up the runs.
	Stats RunStats
}

// RunStats are a Runner's totals.
type RunStats struct {
	Runs, Compiles int
	Compile, Host  time.Duration // compiling; Run on this host
	DeviceNS       uint64        // the engine's modelled time
}

type runKey struct {
	m    *onnx.Model
	dims string
}

// NewRunner returns a Runner on eng compiling with opts.
func NewRunner(eng alidnn.Engine, opts ...alidnn.Option) *Runner {
	return &Runner{eng: eng, opts: opts, sessions: map[runKey]*alidnn.Session{}}
}

// Run runs m on in (its one input, named as the graph names it) and
// returns its first output.
func (r *Runner) Run(ctx context.Context, m *onnx.Model, in Input) (*onnx.Tensor, error) {
	if len(m.Graph.Inputs) != 1 || len(in.Dims) != 4 {
		return nil, fmt.Errorf("model of %d inputs run on an input of dims %v: want one NCHW input", len(m.Graph.Inputs), in.Dims)
	}
	name := m.Graph.Inputs[0].Name
	k := runKey{m, fmt.Sprint(in.Dims)}
	s, ok := r.sessions[k]
	if !ok {
		start := time.Now()
		dims := make([]int, len(in.Dims))
		for i, d := range in.Dims {
			dims[i] = int(d)
		}
		p, err := alidnn.Compile(m, append([]alidnn.Option{alidnn.WithShape(name, dims...)}, r.opts...)...)
		if err != nil {
			return nil, fmt.Errorf("compiling for %s %v: %w", name, in.Dims, err)
		}
		r.Stats.Compile += time.Since(start)
		r.Stats.Compiles++
		// One run at a time: a second lane of activations would only
		// take device memory.
		if s, err = alidnn.Open(ctx, r.eng, p, alidnn.WithBatch(1), alidnn.WithPipeline(1)); err != nil {
			return nil, fmt.Errorf("loading the program for %s %v: %w", name, in.Dims, err)
		}
		r.sessions[k] = s
	}
	res, err := s.Run(ctx, onnx.NewFloat32(name, in.Dims, in.V))
	if err != nil {
		return nil, err
	}
	r.Stats.Runs++
	r.Stats.Host += res.HostTime
	r.Stats.DeviceNS += res.Stats.DeviceNS()
	return res.Outputs[0], nil
}

// Close closes the Runner's sessions.
func (r *Runner) Close(ctx context.Context) {
	for _, s := range r.sessions {
		s.Close(ctx)
	}
}
