package alidnn_test

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// mnist is the compiled MNIST model and its two reference sets.
type mnist struct {
	prog      *alidnn.Program
	ins, outs []*onnx.Tensor
}

func loadMNIST(t *testing.T) mnist {
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
	r := mnist{prog: p}
	for _, s := range []string{"test_data_set_0", "test_data_set_1"} {
		in, out := readSet(t, filepath.Join(dir, s))
		in.Name = m.Graph.Inputs[0].Name
		r.ins, r.outs = append(r.ins, in), append(r.outs, out)
	}
	return r
}

// check fails t unless res holds reference k's logits within the MNIST
// tolerance (testdata README: 5e-3 absolute).
func (m mnist) check(t *testing.T, what string, k int, res *alidnn.Result) {
	t.Helper()
	if len(res.Outputs) != 1 {
		t.Fatalf("%s: %d outputs, want 1", what, len(res.Outputs))
	}
	if d := maxAbsDiff(t, res.Outputs[0], m.outs[k]); d > 5e-3 {
		t.Errorf("%s: logits differ from reference %d by %g, want ≤ 5e-3", what, k, d)
	}
}

// TestSessionConcurrent runs MNIST from many goroutines at once on the
// default session (batches of up to 4, two jobs in flight): every run gets
// its own input's logits back.
func TestSessionConcurrent(t *testing.T) {
	m := loadMNIST(t)
	ctx := context.Background()
	s, err := alidnn.Open(ctx, alidnn.NewLocal(local(t)), m.prog)
	if err != nil {
		t.Fatal(err)
	}
	const runs = 24
	var wg sync.WaitGroup
	batches := make([]int, runs)
	for n := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s.Run(ctx, m.ins[n%2])
			if err != nil {
				t.Errorf("run %d: %v", n, err)
				return
			}
			m.check(t, "concurrent run", n%2, res)
			batches[n] = res.Batch
		}()
	}
	wg.Wait()
	t.Logf("runs per job: %v", batches)
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(ctx, m.ins[0]); !errors.Is(err, alidnn.ErrClosed) {
		t.Errorf("Run after Close: %v, want ErrClosed", err)
	}
}

// gated holds the first job's submission until released, so that the
// runs arriving meanwhile pile up.
type gated struct {
	alidnn.Engine
	entered, release chan struct{}
	once             sync.Once
}

func (g *gated) Program(ctx context.Context, insns []isa.Insn) (alidnn.Code, error) {
	c, err := g.Engine.Program(ctx, insns)
	return gatedCode{c, g}, err
}

type gatedCode struct {
	alidnn.Code
	g *gated
}

func (c gatedCode) Submit(ctx context.Context) (alidnn.Job, error) {
	c.g.once.Do(func() {
		close(c.g.entered)
		<-c.g.release
	})
	return c.Code.Submit(ctx)
}

// gatedSession opens p with batches of 4 and one job slot on an engine
// whose first job waits at a gate (see holdAndQueue).
func gatedSession(t *testing.T, p *alidnn.Program) (*alidnn.Session, *gated) {
	t.Helper()
	ctx := context.Background()
	g := &gated{Engine: alidnn.NewLocal(local(t)), entered: make(chan struct{}), release: make(chan struct{})}
	s, err := alidnn.Open(ctx, g, p, alidnn.WithBatch(4), alidnn.WithPipeline(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(ctx) })
	return s, g
}

// queuedRun is the end of run n of holdAndQueue.
type queuedRun struct {
	n   int
	res *alidnn.Result
	err error
}

// holdAndQueue starts run 0 of s on inputs ins(0), which holds the engine
// at g's gate, then runs 1 to n, and opens the gate once all n wait: they
// go as jobs of the session's batch. The n + 1 runs end on the channel
// returned, in any order.
func holdAndQueue(t *testing.T, s *alidnn.Session, g *gated, n int, ins func(k int) []*onnx.Tensor) <-chan queuedRun {
	t.Helper()
	results := make(chan queuedRun, n+1)
	run := func(k int) {
		res, err := s.Run(context.Background(), ins(k)...)
		results <- queuedRun{k, res, err}
	}
	go run(0)
	<-g.entered
	for k := 1; k <= n; k++ {
		go run(k)
	}
	deadline := time.Now().Add(time.Minute)
	for alidnn.Pending(s) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d runs waiting, want %d", alidnn.Pending(s), n)
		}
		time.Sleep(time.Millisecond)
	}
	close(g.release)
	return results
}

// TestSessionCoalesces checks that runs waiting for a busy engine go as
// one job, each with its own lane: with one job slot and batches of 4, a
// first run holds the slot while 5 more arrive; they run as a job of 4 and
// one of 1, and every run gets the logits of its own input.
func TestSessionCoalesces(t *testing.T) {
	m := loadMNIST(t)
	s, g := gatedSession(t, m.prog)
	results := holdAndQueue(t, s, g, 5, func(k int) []*onnx.Tensor { return []*onnx.Tensor{m.ins[k%2]} })
	count := map[int]int{}
	for range 6 {
		o := <-results
		if o.err != nil {
			t.Fatalf("run %d: %v", o.n, o.err)
		}
		m.check(t, "coalesced run", o.n%2, o.res)
		count[o.res.Batch]++
	}
	if count[1] != 2 || count[4] != 4 {
		t.Errorf("runs by job size %v, want 2 alone and 4 in one job", count)
	}
}

// TestLocalRefuses checks that the local engine refuses, like the agent,
// a program that reaches outside its buffers.
func TestLocalRefuses(t *testing.T) {
	ctx := context.Background()
	eng := alidnn.NewLocal(local(t))
	b, err := eng.Alloc(ctx, 4096)
	if err != nil {
		t.Fatal(err)
	}
	load := isa.Insn{Op: isa.OpLoad, Mem: isa.MemInp, DRAM: b.Addr() + 4096 - 16, YSize: 1, XSize: 2, XStride: 2}
	fin := isa.Insn{Op: isa.OpFinish}
	if _, err := eng.Program(ctx, []isa.Insn{load, fin}); !errors.Is(err, alidnn.ErrRefused) {
		t.Errorf("a load across the buffer's end: %v, want ErrRefused", err)
	}
	load.XSize = 1
	if _, err := eng.Program(ctx, []isa.Insn{load, fin}); err != nil {
		t.Errorf("a load inside the buffer: %v", err)
	}
}

// failing refuses every submission after the first ok ones.
type failing struct {
	alidnn.Engine
	ok *atomic.Int32
}

var errSubmit = errors.New("submission refused")

func (f failing) Program(ctx context.Context, insns []isa.Insn) (alidnn.Code, error) {
	c, err := f.Engine.Program(ctx, insns)
	return failingCode{c, f.ok}, err
}

type failingCode struct {
	alidnn.Code
	ok *atomic.Int32
}

func (c failingCode) Submit(ctx context.Context) (alidnn.Job, error) {
	if c.ok.Add(-1) < 0 {
		return nil, errSubmit
	}
	return c.Code.Submit(ctx)
}

// TestSessionErrorsAndCancel checks that a failed job fails every run of
// it and leaves the session usable, and that a run whose ctx ends while it
// waits for a job slot returns the ctx's error and never runs.
func TestSessionErrorsAndCancel(t *testing.T) {
	m := loadMNIST(t)
	ctx := context.Background()
	ok := &atomic.Int32{}
	g := &gated{Engine: failing{alidnn.NewLocal(local(t)), ok}, entered: make(chan struct{}), release: make(chan struct{})}
	s, err := alidnn.Open(ctx, g, m.prog, alidnn.WithPipeline(1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)

	// The first job waits at the gate; a second run gives up while queued.
	first := make(chan error)
	go func() {
		_, err := s.Run(ctx, m.ins[0])
		first <- err
	}()
	<-g.entered
	cctx, cancel := context.WithCancel(ctx)
	second := make(chan error)
	go func() {
		_, err := s.Run(cctx, m.ins[1])
		second <- err
	}()
	for alidnn.Pending(s) < 1 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-second; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled run: %v, want context.Canceled", err)
	}
	if n := alidnn.Pending(s); n != 0 {
		t.Errorf("%d runs waiting after the cancelled one left, want 0", n)
	}
	close(g.release)
	if err := <-first; !errors.Is(err, errSubmit) {
		t.Errorf("run of a refused job: %v, want the submission's error", err)
	}
	ok.Store(1)
	res, err := s.Run(ctx, m.ins[1])
	if err != nil {
		t.Fatalf("run after a failed job: %v", err)
	}
	m.check(t, "run after a failed job", 1, res)
}

// TestSessionForBatch runs MNIST compiled for 4 samples a run: concurrent
// Runs share one run of the program, each getting exactly the logits the
// batch-1 program gives its input, and a lone Run works with the other
// samples zero. Shapes that are not one sample are refused.
func TestSessionForBatch(t *testing.T) {
	m := loadMNIST(t)
	dir := testenv.TestData(t, "onnx", "models", "mnist")
	model, err := onnx.ReadModel(filepath.Join(dir, "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := alidnn.Compile(model, alidnn.ForBatch(4))
	if err != nil {
		t.Fatal(err)
	}
	if p.Batch != 4 || p.Inputs[0].Shape[0] != 4 || p.Outputs[0].Shape[0] != 4 {
		t.Fatalf("batch %d, input %v, output %v: want 4 samples", p.Batch, p.Inputs[0].Shape, p.Outputs[0].Shape)
	}
	ctx := context.Background()
	one, err := alidnn.Load(ctx, local(t), m.prog)
	if err != nil {
		t.Fatal(err)
	}
	want := make([][]float32, len(m.ins))
	for k, in := range m.ins {
		res, err := one.Run(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		want[k], _ = res.Outputs[0].Float32s()
	}
	s, err := alidnn.Open(ctx, alidnn.NewLocal(local(t)), p, alidnn.WithPipeline(1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	// Runs share a job only when they queue while the engine is busy. With
	// one P (go test -cpu 1) the scheduler runs the session's worker as soon
	// as the first caller wakes it, and the in-process engine's run never
	// blocks, so each caller would find the engine idle: the callers need
	// threads of their own, as a server's requests have.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(4, runtime.GOMAXPROCS(0))))
	var shared atomic.Int64
	var wg sync.WaitGroup
	for g := range 12 {
		wg.Go(func() {
			k := g % len(m.ins)
			res, err := s.Run(ctx, m.ins[k])
			if err != nil {
				t.Error(err)
				return
			}
			if res.Batch > 4 {
				t.Errorf("a job of %d runs on a program of 4 samples", res.Batch)
			}
			if res.Batch > 1 {
				shared.Add(1)
			}
			got, _ := res.Outputs[0].Float32s()
			if len(res.Outputs[0].Dims) != 2 || res.Outputs[0].Dims[0] != 1 {
				t.Errorf("output shape %v, want one sample", res.Outputs[0].Dims)
			}
			for i := range want[k] {
				if got[i] != want[k][i] {
					t.Errorf("run %d: logit %d is %g, the batch-1 program's %g", g, i, got[i], want[k][i])
					return
				}
			}
		})
	}
	wg.Wait()
	if shared.Load() == 0 {
		t.Error("no job took more than one run")
	}
	if _, err := s.Run(ctx, onnx.NewFloat32(m.ins[0].Name, []int64{4, 1, 28, 28}, make([]float32, 4*784))); !errors.Is(err, alidnn.ErrInput) {
		t.Errorf("Run with a whole batch: %v, want ErrInput", err)
	}
}
