package ppocr

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/faas"
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
// open in a session. When the engine's program area is full (a tenant's
// window on a faasd slot holds about 1 MiB of programs), the session used
// longest ago is closed to make room; its program is kept, to be loaded
// again without compiling.
type Runner struct {
	eng      alidnn.Engine
	opts     []alidnn.Option
	sessions map[runKey]*alidnn.Session
	programs map[runKey]*alidnn.Program
	lastUse  map[runKey]int // Stats.Runs at the session's last run
	// calibOn and calib quantise each program after training (see
	// NewInt8Runner).
	calibOn alidnn.Engine
	calib   Calibrator
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
	return &Runner{eng: eng, opts: opts, sessions: map[runKey]*alidnn.Session{}, programs: map[runKey]*alidnn.Program{},
		lastUse: map[runKey]int{}}
}

// Calibrator returns how model m is quantised at input dims.
type Calibrator func(m *onnx.Model, dims []int64) (Int8Plan, error)

// Int8Plan is how a model is quantised after training: the inputs its
// ranges are calibrated on, and the nodes kept in fp32
// (alidnn.WithFloatNodes).
type Int8Plan struct {
	Inputs []Input
	Float  []string
}

// NewInt8Runner returns a Runner on eng whose programs are quantised to
// int8 after training (alidnn.QuantizeOn), calibrated with calib's inputs
// on calibOn: eng itself when it allocates per session (a faasd slot or
// attachment, alidnn.Agent: calibration then runs on the accelerator the
// programs run on), or an engine of its own (an in-process engine hands
// out memory it never takes back).
func NewInt8Runner(eng, calibOn alidnn.Engine, calib Calibrator, opts ...alidnn.Option) *Runner {
	r := NewRunner(eng, opts...)
	r.calibOn, r.calib = calibOn, calib
	return r
}

// compile compiles m for input name of dims, or quantises it.
func (r *Runner) compile(ctx context.Context, m *onnx.Model, name string, dims []int64) (*alidnn.Program, error) {
	shape := make([]int, len(dims))
	for i, d := range dims {
		shape[i] = int(d)
	}
	opts := append([]alidnn.Option{alidnn.WithShape(name, shape...)}, r.opts...)
	if r.calib == nil {
		return alidnn.Compile(m, opts...)
	}
	plan, err := r.calib(m, dims)
	if err != nil {
		return nil, fmt.Errorf("calibration inputs: %w", err)
	}
	samples := make([][]*onnx.Tensor, len(plan.Inputs))
	for k, in := range plan.Inputs {
		samples[k] = []*onnx.Tensor{onnx.NewFloat32(name, in.Dims, in.V)}
	}
	if len(plan.Float) > 0 {
		opts = append(opts, alidnn.WithFloatNodes(plan.Float...))
	}
	for {
		p, err := alidnn.QuantizeOn(ctx, r.calibOn, m, samples, opts...)
		// Calibrating on eng needs program room as running does.
		if err == nil || !errors.Is(err, faas.ErrQuota) || !r.evict(ctx) {
			return p, err
		}
	}
}

// Run runs m on in (its one input, named as the graph names it) and
// returns its first output.
func (r *Runner) Run(ctx context.Context, m *onnx.Model, in Input) (*onnx.Tensor, error) {
	if len(m.Graph.Inputs) != 1 || len(in.Dims) != 4 {
		return nil, fmt.Errorf("model of %d inputs run on an input of dims %v: want one NCHW input", len(m.Graph.Inputs), in.Dims)
	}
	name := m.Graph.Inputs[0].Name
	k := runKey{m, fmt.Sprint(in.Dims)}
	s, err := r.session(ctx, k, name, in.Dims)
	if err != nil {
		return nil, err
	}
	res, err := s.Run(ctx, onnx.NewFloat32(name, in.Dims, in.V))
	if err != nil {
		return nil, err
	}
	r.Stats.Runs++
	r.lastUse[k] = r.Stats.Runs
	r.Stats.Host += res.HostTime
	r.Stats.DeviceNS += res.Stats.DeviceNS()
	return res.Outputs[0], nil
}

// session returns the open session of k, compiling and loading its
// program if need be, and closing the sessions used longest ago while
// the engine has no room for it.
func (r *Runner) session(ctx context.Context, k runKey, name string, dims []int64) (*alidnn.Session, error) {
	if s, ok := r.sessions[k]; ok {
		return s, nil
	}
	p, ok := r.programs[k]
	if !ok {
		start := time.Now()
		var err error
		if p, err = r.compile(ctx, k.m, name, dims); err != nil {
			return nil, fmt.Errorf("compiling for %s %v: %w", name, dims, err)
		}
		r.Stats.Compile += time.Since(start)
		r.Stats.Compiles++
		r.programs[k] = p
	}
	for {
		// One run at a time: a second lane of activations would only
		// take device memory.
		s, err := alidnn.Open(ctx, r.eng, p, alidnn.WithBatch(1), alidnn.WithPipeline(1))
		if err == nil {
			r.sessions[k] = s
			return s, nil
		}
		if !errors.Is(err, faas.ErrQuota) || !r.evict(ctx) {
			return nil, fmt.Errorf("loading the program for %s %v: %w", name, dims, err)
		}
	}
}

// evict closes the session used longest ago; false if none is open.
func (r *Runner) evict(ctx context.Context) bool {
	var oldest runKey
	found := false
	for k := range r.sessions {
		if !found || r.lastUse[k] < r.lastUse[oldest] {
			oldest, found = k, true
		}
	}
	if found {
		r.sessions[oldest].Close(ctx)
		delete(r.sessions, oldest)
	}
	return found
}

// Close closes the Runner's sessions.
func (r *Runner) Close(ctx context.Context) {
	for _, s := range r.sessions {
		s.Close(ctx)
	}
}
