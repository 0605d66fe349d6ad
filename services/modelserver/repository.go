package modelserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// The files of a model repository (see the package comment).
const (
	ConfigFile  = "config.json"
	ONNXFile    = "model.onnx"
	ProgramFile = "model.alidnn"
)

// errNoModels: the repository folder is empty, which is an error only
// when no model comes from the registry either.
var errNoModels = fmt.Errorf("%w: no models", ErrRepository)

// maxConfigBytes bounds a config.json: it is a few lines.
const maxConfigBytes = 1 << 20

// ModelConfig is a model's config.json, the JSON counterpart of the part
// of Triton's config.pbtxt this server reads. Unknown fields are errors,
// so that a setting this server would ignore is not silently dropped.
type ModelConfig struct {
	// Name is the model's name in URLs; it must equal its folder's name.
	Name string `json:"name"`
	// MaxBatchSize is the most requests an instance runs as one job on the
	// engine (alidnn.WithBatch): 0 or 1, each request a job of its own.
	// Unlike Triton's, it adds no batch dimension to the inputs: requests
	// keep the model's shapes and are coalesced when they arrive together.
	MaxBatchSize int `json:"max_batch_size"`
	// MaxQueueSize is the most requests of the model admitted at once,
	// running or waiting; more are refused with 429. 0: Config.QueueSize.
	MaxQueueSize int `json:"max_queue_size"`
	// Input binds the shapes of inputs whose dimensions the ONNX model
	// leaves free (alidnn.WithShape by input name). For a precompiled
	// program, a listed input's dims must be the program's.
	Input []InputConfig `json:"input"`
	// Dims binds symbolic dimensions by name in every input that has them
	// ("batch": 1), alidnn.WithShape by dimension name.
	Dims map[string]int `json:"dims"`
	// DynamicBatching, Triton's dynamic_batching, holds requests for
	// others to share their engine job (alidnn.WithMaxDelay). Without it
	// no request is held.
	DynamicBatching *DynamicBatching `json:"dynamic_batching"`
}

// DynamicBatching is ModelConfig.DynamicBatching, with Triton's names.
type DynamicBatching struct {
	// MaxQueueDelayMicroseconds is the longest an instance holds a
	// request, while fewer wait than a preferred batch (or
	// max_batch_size), before its job goes to the engine; never past the
	// request's deadline.
	MaxQueueDelayMicroseconds int64 `json:"max_queue_delay_microseconds"`
	// PreferredBatchSize are the job sizes to form: a job goes at once
	// when the largest is filled, and when the delay has passed it takes
	// the largest one filled, else every request waiting. Each is at most
	// max_batch_size (or the batch of a precompiled batched program).
	PreferredBatchSize []int `json:"preferred_batch_size"`
}

// sessionOptions are the alidnn options of c's dynamic batching.
func (c *ModelConfig) sessionOptions() []alidnn.SessionOption {
	d := c.DynamicBatching
	if d == nil {
		return nil
	}
	return []alidnn.SessionOption{alidnn.WithMaxDelay(time.Duration(d.MaxQueueDelayMicroseconds)*time.Microsecond, d.PreferredBatchSize...)}
}

// checkDynamicBatching checks what can be checked without the program.
func (c *ModelConfig) checkDynamicBatching() error {
	d := c.DynamicBatching
	if d == nil {
		return nil
	}
	// An hour is far past any request's deadline; the bound keeps the
	// conversion to a Duration from overflowing.
	if d.MaxQueueDelayMicroseconds < 0 || d.MaxQueueDelayMicroseconds > int64(time.Hour/time.Microsecond) {
		return fmt.Errorf("%w: dynamic_batching: max_queue_delay_microseconds %d is not within 0 to an hour", ErrRepository, d.MaxQueueDelayMicroseconds)
	}
	for _, n := range d.PreferredBatchSize {
		if n < 1 || (c.MaxBatchSize > 0 && n > c.MaxBatchSize) {
			return fmt.Errorf("%w: dynamic_batching: preferred_batch_size %d is not within 1 to max_batch_size %d", ErrRepository, n, c.MaxBatchSize)
		}
	}
	return nil
}

// InputConfig is one entry of ModelConfig.Input.
type InputConfig struct {
	Name string `json:"name"`
	Dims []int  `json:"dims"`
}

// readConfig reads and checks the config.json of the model in dir.
func readConfig(dir string) (*ModelConfig, error) {
	path := filepath.Join(dir, ConfigFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRepository, err)
	}
	c, err := parseConfig(b, filepath.Base(dir))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// parseConfig parses a config.json of the model folder named name. Every
// error wraps ErrRepository.
func parseConfig(b []byte, name string) (*ModelConfig, error) {
	if len(b) > maxConfigBytes {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrRepository, maxConfigBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var c ModelConfig
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRepository, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: data after the JSON object", ErrRepository)
	}
	if c.Name != name {
		return nil, fmt.Errorf("%w: name %q differs from the folder's name %q", ErrRepository, c.Name, name)
	}
	if c.MaxBatchSize < 0 || c.MaxQueueSize < 0 {
		return nil, fmt.Errorf("%w: max_batch_size and max_queue_size must not be negative", ErrRepository)
	}
	for _, in := range c.Input {
		if in.Name == "" || len(in.Dims) == 0 || slices.ContainsFunc(in.Dims, func(d int) bool { return d < 1 }) {
			return nil, fmt.Errorf("%w: input %q: a name and dims of at least 1 are required", ErrRepository, in.Name)
		}
	}
	for sym, n := range c.Dims {
		if n < 1 {
			return nil, fmt.Errorf("%w: dims: %q is %d, not at least 1", ErrRepository, sym, n)
		}
	}
	if err := c.checkDynamicBatching(); err != nil {
		return nil, err
	}
	return &c, nil
}

// shapeOptions are the compile options that bind c's shapes.
func (c *ModelConfig) shapeOptions() []alidnn.Option {
	var opts []alidnn.Option
	for name, n := range c.Dims {
		opts = append(opts, alidnn.WithShape(name, n))
	}
	for _, in := range c.Input { // after Dims: an input's binding wins anyway
		opts = append(opts, alidnn.WithShape(in.Name, in.Dims...))
	}
	return opts
}

// modelDirs lists the models of a repository: its folders, in name order,
// but for hidden ones.
func modelDirs(repo string) ([]string, error) {
	ents, err := os.ReadDir(repo)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRepository, err)
	}
	var dirs []string
	for _, e := range ents {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			dirs = append(dirs, filepath.Join(repo, e.Name()))
		}
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("%w: %s holds no model folders", errNoModels, repo)
	}
	return dirs, nil
}

// versionDirs lists a model's versions, its folders named by a positive
// integer as Triton's are, in increasing order; other entries are ignored.
func versionDirs(dir string) ([]int64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRepository, err)
	}
	var vs []int64
	for _, e := range ents {
		v, err := strconv.ParseInt(e.Name(), 10, 64)
		if e.IsDir() && err == nil && v > 0 && strconv.FormatInt(v, 10) == e.Name() {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return nil, fmt.Errorf("%w: %s has no version folders (1/, 2/, …)", ErrRepository, dir)
	}
	slices.Sort(vs)
	return vs, nil
}

// readProgram compiles the version folder's model.onnx with c's shape
// bindings, or reads its precompiled model.alidnn; exactly one must exist.
func readProgram(vdir string, c *ModelConfig) (*alidnn.Program, error) {
	onnxPath, progPath := filepath.Join(vdir, ONNXFile), filepath.Join(vdir, ProgramFile)
	hasONNX, hasProg := exists(onnxPath), exists(progPath)
	switch {
	case hasONNX && hasProg:
		return nil, fmt.Errorf("%w: %s holds both %s and %s", ErrRepository, vdir, ONNXFile, ProgramFile)
	case hasONNX:
		m, err := onnx.ReadModel(onnxPath)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrRepository, err)
		}
		p, err := alidnn.Compile(m, c.shapeOptions()...)
		if err != nil {
			return nil, fmt.Errorf("%w: compiling %s: %v", ErrRepository, onnxPath, err)
		}
		return p, nil
	case hasProg:
		p, err := alidnn.ReadFile(progPath)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrRepository, err)
		}
		return p, checkBound(p, c, progPath)
	}
	return nil, fmt.Errorf("%w: %s holds neither %s nor %s", ErrRepository, vdir, ONNXFile, ProgramFile)
}

// checkBound checks a precompiled program against the config's input
// shapes: they were bound when it was compiled and cannot change now.
func checkBound(p *alidnn.Program, c *ModelConfig, path string) error {
	if len(c.Dims) > 0 {
		return fmt.Errorf("%w: %s: dims bind nothing in a precompiled program", ErrRepository, path)
	}
	for _, in := range c.Input {
		k := slices.IndexFunc(p.Inputs, func(b alidnn.Binding) bool { return b.Name == in.Name })
		if k < 0 {
			return fmt.Errorf("%w: %s has no input %q", ErrRepository, path, in.Name)
		}
		want := slices.Clone(p.Inputs[k].Shape)
		if p.Batch > 1 && len(want) > 0 && len(in.Dims) > 0 && in.Dims[0] == 1 {
			want[0] = 1 // the compiler takes 1 or the batch for the leading dimension
		}
		if !slices.Equal(want, in.Dims) {
			return fmt.Errorf("%w: %s: input %q has shape %v, the config says %v", ErrRepository, path, in.Name, p.Inputs[k].Shape, in.Dims)
		}
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, fs.ErrNotExist)
}

// specs are a program's inputs or outputs as a request sees them. A
// program compiled for a batch of n (alidnn.ForBatch) takes one sample a
// request, its leading dimension of n becoming 1, as alidnn.Session runs
// it. A type the protocol cannot carry is an error: such a model cannot be
// served.
func specs(bs []alidnn.Binding, batch int) ([]tensorSpec, error) {
	out := make([]tensorSpec, len(bs))
	for k, b := range bs {
		if !convertible(b.Type) {
			return nil, fmt.Errorf("%w: tensor %q is %v, which this server does not convert", ErrRepository, b.Name, b.Type)
		}
		shape := make([]int64, len(b.Shape))
		for i, d := range b.Shape {
			shape[i] = int64(d)
		}
		if batch > 1 && len(shape) > 0 && shape[0] == int64(batch) && !b.IsConst {
			shape[0] = 1
		}
		out[k] = tensorSpec{Name: b.Name, Type: b.Type, Shape: shape}
	}
	return out, nil
}
