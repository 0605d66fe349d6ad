package alidnn_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

func mnistProgram(t testing.TB) (*alidnn.Program, *onnx.Tensor, *onnx.Tensor) {
	t.Helper()
	dir := testenv.TestData(t, "onnx", "models", "mnist")
	m, err := onnx.ReadModel(filepath.Join(dir, "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := alidnn.Compile(m)
	if err != nil {
		t.Fatal(err)
	}
	in, out := readSet(t, filepath.Join(dir, "test_data_set_0"))
	in.Name = "Input3"
	return p, in, out
}

// TestProgramFileRoundTrip writes a compiled program, reads it back and runs
// it: the outputs are those of the original.
func TestProgramFileRoundTrip(t *testing.T) {
	p, in, want := mnistProgram(t)
	path := filepath.Join(t.TempDir(), "mnist.prog")
	if err := p.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	q, err := alidnn.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := alidnn.Load(ctx, local(t), q)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Run(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if d := maxAbsDiff(t, res.Outputs[0], want); d > 5e-3 {
		t.Fatalf("program read back: logits differ by %g", d)
	}
	// A program compiled for a batch keeps it.
	m, err := onnx.ReadModel(filepath.Join(testenv.TestData(t, "onnx", "models", "mnist"), "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := alidnn.Compile(m, alidnn.ForBatch(3))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	if q, err = alidnn.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	if q.Batch != 3 || q.Inputs[0].Shape[0] != 3 {
		t.Errorf("read back batch %d, input %v: want 3", q.Batch, q.Inputs[0].Shape)
	}
}

// TestProgramFileDamage flips bytes and truncates: every damaged file is
// refused with ErrProgram, never run.
func TestProgramFileDamage(t *testing.T) {
	p, _, _ := mnistProgram(t)
	var buf bytes.Buffer
	if _, err := p.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	for _, off := range []int{0, 7, 8, 11, 12, 40, len(good) / 2, len(good) - 100, len(good) - 1} {
		bad := bytes.Clone(good)
		bad[off] ^= 0x40
		if _, err := alidnn.ReadProgram(bytes.NewReader(bad)); !errors.Is(err, alidnn.ErrProgram) {
			t.Errorf("byte %d flipped: err = %v, want ErrProgram", off, err)
		}
	}
	for _, n := range []int{0, 5, 12, 100, len(good) - 1} {
		if _, err := alidnn.ReadProgram(bytes.NewReader(good[:n])); !errors.Is(err, alidnn.ErrProgram) {
			t.Errorf("truncated to %d bytes: err = %v, want ErrProgram", n, err)
		}
	}
}

func FuzzReadProgram(f *testing.F) {
	p := &alidnn.Program{}
	var buf bytes.Buffer
	if _, err := p.WriteTo(&buf); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte("ADNNPRG1\x02\x00\x00\x00{}"))
	m, err := onnx.ReadModel(testenv.TestData(f, "onnx", "node", "test_relu", "model.onnx"))
	if err != nil {
		f.Fatal(err)
	}
	q, err := alidnn.Compile(m)
	if err != nil {
		f.Fatal(err)
	}
	buf.Reset()
	if _, err := q.WriteTo(&buf); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	// A program with a tensor the runtime gathers from INT64 ids.
	buf.Reset()
	if _, err := embeddingProgram(f).WriteTo(&buf); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	// Programs with the bindings of the boundary: a read-back Cast to
	// float8 without saturation, a host-only input gathered by the runtime,
	// a host QuantizeLinear to INT4 and a blocked one to INT16, an empty
	// input, a host Cast of a DOUBLE input, UINT64 words staged and joined.
	for _, tc := range []struct {
		dir    string
		consts []int
		opts   []alidnn.Option
	}{
		{"test_cast_no_saturate_FLOAT_to_FLOAT8E4M3FN", nil, nil},
		{"test_gather_1", nil, nil},
		{"test_quantizelinear_int4", []int{1, 2}, nil},
		{"test_quantizelinear_blocked_symmetric", []int{1}, nil},
		{"test_cast_DOUBLE_to_FLOAT16", nil, nil},
		{"test_add_uint64", nil, nil},
		{"test_pow_types_int64_int64", []int{1}, nil},
		{"test_split_zero_size_splits_opset18", []int{1}, []alidnn.Option{alidnn.WithShape("input", 0)}},
	} {
		buf.Reset()
		if _, err := nodeProgram(f, tc.dir, tc.consts, tc.opts...).WriteTo(&buf); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := alidnn.ReadProgram(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, alidnn.ErrProgram) {
				t.Fatalf("error %v does not wrap ErrProgram", err)
			}
			return
		}
		var out bytes.Buffer
		if _, err := p.WriteTo(&out); err != nil {
			t.Fatalf("a program that was read cannot be written: %v", err)
		}
	})
}

// nodeProgram compiles onnx's node test dir with its inputs consts (by
// index) bound to the first data set's values.
func nodeProgram(f *testing.F, dir string, consts []int, opts ...alidnn.Option) *alidnn.Program {
	f.Helper()
	m, err := onnx.ReadModel(testenv.TestData(f, "onnx", "node", dir, "model.onnx"))
	if err != nil {
		f.Fatal(err)
	}
	for _, k := range consts {
		x, err := onnx.ReadTensor(testenv.TestData(f, "onnx", "node", dir, "test_data_set_0", fmt.Sprintf("input_%d.pb", k)))
		if err != nil {
			f.Fatal(err)
		}
		x.Name = m.Graph.Inputs[k].Name
		opts = append(opts, alidnn.WithConstants(x))
	}
	p, err := alidnn.Compile(m, opts...)
	if err != nil {
		f.Fatal(err)
	}
	return p
}

// throughFile is p written to its file form and read back, as a tenant's
// precompiled program reaches a runtime.
func throughFile(t *testing.T, p *alidnn.Program) *alidnn.Program {
	t.Helper()
	var buf bytes.Buffer
	if _, err := p.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	q, err := alidnn.ReadProgram(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// compileThroughFile compiles g at opset and returns the program read back
// from its file form (see throughFile).
func compileThroughFile(t *testing.T, opset int64, g *onnx.Graph) *alidnn.Program {
	t.Helper()
	p, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: opset}}, Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	return throughFile(t, p)
}
