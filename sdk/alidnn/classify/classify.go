// Package classify runs a classifier's reference inputs on an AliDNN
// session and checks the classes it predicts: the argmax of each output
// against the argmax of the reference output. Reference inputs are laid out
// as in ONNX test data: test_data_set_N/input_0.pb and output_0.pb, each a
// serialized onnx.TensorProto.
//
// Every run is started at once, so the session coalesces and pipelines
// them (see alidnn.Session): the outcome of each run says how many runs
// shared its job.
package classify

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// Case is one reference input and the output it should give.
type Case struct {
	Name  string // the data set's folder, e.g. "test_data_set_0"
	Input *onnx.Tensor
	Want  *onnx.Tensor
}

// ReadCases reads the reference sets of dir: its test_data_set_*/ folders,
// in name order, or dir itself when it is such a folder.
func ReadCases(dir string) ([]Case, error) {
	sets, err := filepath.Glob(filepath.Join(dir, "test_data_set_*"))
	if err != nil {
		return nil, err
	}
	sort.Strings(sets)
	if len(sets) == 0 {
		if _, err := os.Stat(filepath.Join(dir, "input_0.pb")); err != nil {
			return nil, fmt.Errorf("%s: no test_data_set_* folders and no input_0.pb", dir)
		}
		sets = []string{dir}
	}
	var cases []Case
	for _, set := range sets {
		in, err := onnx.ReadTensor(filepath.Join(set, "input_0.pb"))
		if err != nil {
			return nil, fmt.Errorf("reading reference input: %w", err)
		}
		want, err := onnx.ReadTensor(filepath.Join(set, "output_0.pb"))
		if err != nil {
			return nil, fmt.Errorf("reading reference output: %w", err)
		}
		cases = append(cases, Case{Name: filepath.Base(set), Input: in, Want: want})
	}
	return cases, nil
}

// Outcome is one run of a Case.
type Outcome struct {
	Case  string `json:"case"`
	Class int    `json:"class"` // the predicted class: argmax of the output
	Want  int    `json:"want"`  // argmax of the reference output
	Match bool   `json:"match"`
	// MaxAbsDiff is the largest |output − reference| over the scores.
	MaxAbsDiff float64       `json:"max_abs_diff"`
	Batch      int           `json:"batch"`     // runs that shared the job
	DeviceNS   uint64        `json:"device_ns"` // modeled engine time of the job
	HostTime   time.Duration `json:"host_ns"`
}

// ErrMismatch is wrapped by Check's error when a run predicted another
// class than its reference.
var ErrMismatch = errors.New("predicted class differs from the reference")

// Run runs every case repeat times on s, all runs started at once, and
// returns their outcomes in case order (a case's repeats together). The
// program's first input is bound to each case's input tensor.
func Run(ctx context.Context, s *alidnn.Session, p *alidnn.Program, cases []Case, repeat int) ([]Outcome, error) {
	if len(p.Inputs) != 1 || len(p.Outputs) < 1 {
		return nil, fmt.Errorf("classify: the model has %d inputs and %d outputs, want 1 and at least 1", len(p.Inputs), len(p.Outputs))
	}
	repeat = max(repeat, 1)
	out := make([]Outcome, len(cases)*repeat)
	errs := make([]error, len(out))
	var wg sync.WaitGroup
	for k, c := range cases {
		in := *c.Input
		in.Name = p.Inputs[0].Name
		want, err := argmax(c.Want)
		if err != nil {
			return nil, fmt.Errorf("%s: reference output: %w", c.Name, err)
		}
		for r := range repeat {
			n := k*repeat + r
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := s.Run(ctx, &in)
				if err != nil {
					errs[n] = fmt.Errorf("%s: %w", c.Name, err)
					return
				}
				out[n], errs[n] = outcome(c, want, res)
			}()
		}
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

func outcome(c Case, want int, res *alidnn.Result) (Outcome, error) {
	o := Outcome{Case: c.Name, Want: want, Batch: res.Batch, DeviceNS: res.Stats.DeviceNS(), HostTime: res.HostTime}
	got, err := res.Outputs[0].Float32s()
	if err != nil {
		return o, fmt.Errorf("%s: output: %w", c.Name, err)
	}
	ref, err := c.Want.Float32s()
	if err != nil {
		return o, fmt.Errorf("%s: reference output: %w", c.Name, err)
	}
	if len(got) != len(ref) {
		return o, fmt.Errorf("%s: %d scores, the reference has %d", c.Name, len(got), len(ref))
	}
	o.Class = argmaxOf(got)
	o.Match = o.Class == want
	for k := range ref {
		o.MaxAbsDiff = max(o.MaxAbsDiff, math.Abs(float64(got[k])-float64(ref[k])))
	}
	return o, nil
}

// Check returns an error wrapping ErrMismatch that names the runs whose
// class differs from the reference, or nil.
func Check(outcomes []Outcome) error {
	var bad []string
	for _, o := range outcomes {
		if !o.Match {
			bad = append(bad, fmt.Sprintf("%s: %d, want %d", o.Case, o.Class, o.Want))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %v", ErrMismatch, bad)
	}
	return nil
}

func argmax(t *onnx.Tensor) (int, error) {
	f, err := t.Float32s()
	if err != nil {
		return 0, err
	}
	if len(f) == 0 {
		return 0, errors.New("no scores")
	}
	return argmaxOf(f), nil
}

func argmaxOf(f []float32) int {
	best := 0
	for k := range f {
		if f[k] > f[best] {
			best = k
		}
	}
	return best
}
