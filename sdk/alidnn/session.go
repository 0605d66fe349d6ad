package alidnn

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// Session is a program loaded on an engine: constants uploaded once, run
// any number of times, from any number of goroutines.
//
// # Batching
//
// The compiler builds programs for the model's own input shapes, so a model
// whose batch dimension is 1 (like MNIST's [1,1,28,28]) infers one sample
// per run. What a Session batches is runs: it keeps several lanes of
// activations in its buffer, each with its own copy of the instruction
// stream, and
//
//   - coalesces runs: when every job slot is busy, the runs that arrive
//     meanwhile (up to WithBatch of them) go to the engine as one job whose
//     stream runs their lanes one after the other — one submission,
//     interrupt and completion instead of one each, while the engine time
//     per inference stays what it is;
//   - pipelines jobs: WithPipeline job slots (two by default) hold separate
//     lanes, so one job's inputs are written while the previous job runs,
//     and the engine's queue finds the next job waiting when one finishes.
//
// A program compiled ForBatch(n) holds n samples a run. Its Session takes
// one sample a Run (the program's input shapes with a leading 1) and
// coalesces up to n Runs into one lane and one run of the program: one
// pass over the network for all of them, weights of fully connected layers
// loaded once. Missing samples are zeros; each Run gets its own sample of
// the outputs. WithBatch does not apply to it.
//
// By default a lone run is never held back to wait for others: it is
// submitted as soon as a job slot is free. WithMaxDelay holds it a while
// for others to share its job (hold.go). Result.Batch says how many runs
// shared a job.
//
// A job belongs to the engine once submitted: a Run whose ctx ends returns
// at once, but its job runs on, and its lanes are reused only after the
// job has ended.
type Session struct {
	eng   Engine
	prog  *Program
	buf   Buffer
	lay   memLayout
	batch int // lanes of a job slot
	// perJob is the most runs a job takes: batch lanes, or with a batched
	// program the samples of its one lane.
	perJob int

	mu      sync.Mutex
	pending []*request
	free    []int // job slots not running a job
	slots   int
	closed  bool
	idle    *sync.Cond // signalled when a job slot comes back

	// WithMaxDelay's hold (hold.go): the delay, the preferred sizes in
	// increasing order, and the timer that dispatches when a hold ends.
	delay     time.Duration
	preferred []int
	timer     *time.Timer
	wakeup    time.Time // when timer fires; zero when not armed

	codeMu sync.Mutex
	code   map[[2]int]Code // by job slot and number of lanes
}

// request is one Run waiting for its job.
type request struct {
	ctx    context.Context
	packed [][]byte                // by program input
	host   map[string]*onnx.Tensor // the caller's inputs, by name
	done   chan struct{}           // closed when res or err is set
	// holdUntil is when the run stops being held for others (zero: never
	// held; see WithMaxDelay).
	holdUntil time.Time
	res       *Result
	err       error
}

// SessionOption configures Open.
type SessionOption func(*sessionOptions)

type sessionOptions struct {
	batch, pipeline int
	delay           time.Duration
	preferred       []int
}

// WithBatch sets the most runs coalesced into one job (default 4; 1 turns
// coalescing off).
func WithBatch(n int) SessionOption { return func(o *sessionOptions) { o.batch = n } }

// WithPipeline sets how many jobs of the session may be on the engine at
// once (default 2; 1 runs one job at a time). Device memory grows with
// batch × pipeline lanes of activations.
func WithPipeline(n int) SessionOption { return func(o *sessionOptions) { o.pipeline = n } }

// Open loads p on eng: it allocates one buffer holding p's constants and
// batch × pipeline lanes of activations, and uploads the constants.
// Instruction streams are relocated to the buffer and uploaded through
// eng.Program when a job of their shape is first needed.
func Open(ctx context.Context, eng Engine, p *Program, opts ...SessionOption) (*Session, error) {
	o := sessionOptions{batch: 4, pipeline: 2}
	for _, opt := range opts {
		opt(&o)
	}
	if o.batch < 1 || o.pipeline < 1 {
		return nil, fmt.Errorf("session: batch %d and pipeline %d must be at least 1", o.batch, o.pipeline)
	}
	if p.Batch > 1 {
		if len(p.Derived) > 0 {
			return nil, fmt.Errorf("session: a program compiled for batch %d with tensors derived from its inputs", p.Batch)
		}
		for _, b := range p.Inputs {
			if !b.IsConst && (len(b.Shape) == 0 || b.Shape[0] != p.Batch) {
				return nil, fmt.Errorf("session: input %q of a program compiled for batch %d has shape %v", b.Name, p.Batch, b.Shape)
			}
		}
		o.batch = 1
	}
	s := &Session{eng: eng, prog: p, lay: newLanes(p, o.batch*o.pipeline), batch: o.batch, perJob: o.batch, slots: o.pipeline, code: map[[2]int]Code{}}
	if p.Batch > 1 {
		s.perJob = p.Batch
	}
	if err := checkHold(&o, s.perJob); err != nil {
		return nil, err
	}
	s.delay, s.preferred = o.delay, o.preferred
	s.idle = sync.NewCond(&s.mu)
	for k := range o.pipeline {
		s.free = append(s.free, o.pipeline-1-k) // slot 0 first
	}
	buf, err := eng.Alloc(ctx, int64(s.lay.size()))
	if err != nil {
		return nil, fmt.Errorf("allocating %d bytes for %d lanes: %w", s.lay.size(), s.lay.n, err)
	}
	s.buf = buf
	if len(p.Consts) > 0 {
		if err := buf.Write(ctx, p.Consts, 0); err != nil {
			_ = buf.Free(ctx)
			return nil, fmt.Errorf("uploading constants: %w", err)
		}
	}
	// Upload the one-lane stream now, so that a program the engine refuses
	// fails here rather than at the first Run.
	if len(p.Insns) > 0 {
		if _, err := s.codeFor(ctx, 0, 1); err != nil {
			_ = buf.Free(ctx)
			return nil, err
		}
	}
	return s, nil
}

// Close fails the runs still waiting with ErrClosed, waits for the jobs on
// the engine to end (however long the engine takes) and frees the
// session's device memory and, where the engine can, its streams' place
// in the program area.
func (s *Session) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	if s.timer != nil {
		s.timer.Stop()
	}
	for _, r := range s.pending {
		r.err = ErrClosed
		close(r.done)
	}
	s.pending = nil
	for len(s.free) < s.slots {
		s.idle.Wait()
	}
	s.mu.Unlock()
	// The streams first: the engine keeps a buffer a stream reaches.
	s.codeMu.Lock()
	var errs []error
	for key, c := range s.code {
		if f, ok := c.(codeFreer); ok {
			errs = append(errs, f.Free(ctx))
		}
		delete(s.code, key)
	}
	s.codeMu.Unlock()
	return errors.Join(append(errs, s.buf.Free(ctx))...)
}

func (s *Session) enqueue(r *request) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	r.holdUntil = s.holdUntil(r, time.Now())
	s.pending = append(s.pending, r)
	s.dispatch()
	return nil
}

// withdraw takes r out of the waiting runs, if it has not been given to a
// job yet.
func (s *Session) withdraw(r *request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := slices.Index(s.pending, r); i >= 0 {
		s.pending = slices.Delete(s.pending, i, i+1)
	}
}

// dispatch gives waiting runs to free job slots, up to perJob runs a job,
// unless they are held (jobSize). Callers hold mu.
func (s *Session) dispatch() {
	for len(s.free) > 0 && len(s.pending) > 0 {
		now := time.Now()
		n := s.jobSize(now)
		if n == 0 {
			return
		}
		slot := s.free[len(s.free)-1]
		s.free = s.free[:len(s.free)-1]
		reqs := slices.Clone(s.pending[:n])
		s.pending = slices.Delete(s.pending, 0, n)
		go s.job(slot, reqs, now)
	}
}

// job runs reqs as one job in job slot slot, formed at started, hands each
// its result and gives the slot back.
func (s *Session) job(slot int, reqs []*request, started time.Time) {
	// The job must end before its lanes are reused, whoever stops waiting
	// for it: it runs on no caller's cancellation.
	ctx := context.WithoutCancel(reqs[0].ctx)
	err := s.exec(ctx, slot, reqs)
	for _, r := range reqs {
		if err != nil {
			r.err = err
		}
		if r.res != nil {
			r.res.Started = started
		}
		close(r.done)
	}
	s.mu.Lock()
	s.free = append(s.free, slot)
	s.idle.Broadcast()
	if !s.closed {
		s.dispatch()
	}
	s.mu.Unlock()
}

// exec writes each request's inputs to its lane, runs the job and reads
// the outputs back.
func (s *Session) exec(ctx context.Context, slot int, reqs []*request) error {
	if s.batched() {
		return s.execSamples(ctx, slot, reqs)
	}
	lane0 := slot * s.batch
	uploads := append(slices.Clone(s.prog.Inputs), s.prog.Derived...)
	for k, r := range reqs {
		for n, b := range uploads {
			if len(r.packed[n]) == 0 {
				continue // an empty input (see empty.go)
			}
			if err := s.buf.Write(ctx, r.packed[n], int64(s.lay.act(lane0+k)+b.Addr-s.prog.ActBase)); err != nil {
				return fmt.Errorf("writing input %q: %w", b.Name, err)
			}
		}
	}
	res := Result{Batch: len(reqs)}
	var err error
	if res.Stats, err = s.run(ctx, slot, len(reqs)); err != nil {
		return err
	}
	for k, r := range reqs {
		out := res
		for _, b := range s.prog.Outputs {
			t, err := s.output(ctx, lane0+k, b, r.host)
			if err != nil {
				r.err = fmt.Errorf("output %q: %w", b.Name, err)
				break
			}
			out.Outputs = append(out.Outputs, t)
		}
		r.res = &out
	}
	return nil
}

// execSamples runs reqs, one sample each, as one run of a batched program
// in job slot slot's lane.
func (s *Session) execSamples(ctx context.Context, slot int, reqs []*request) error {
	lane := slot * s.batch
	d := newDict(s.prog.Strings) // the run's, its samples' strings together
	for _, b := range s.prog.Inputs {
		if b.IsConst || b.HostOnly {
			continue // nothing to upload (see empty.go, gatherinput.go); checked as the run was requested
		}
		ts := make([]*onnx.Tensor, len(reqs))
		for k, r := range reqs {
			ts[k] = r.host[b.Name]
		}
		t, err := stack(b, ts)
		if err != nil {
			return err
		}
		data, err := packInput(b, t, d)
		if err != nil {
			return err
		}
		if err := s.buf.Write(ctx, data, int64(s.lay.act(lane)+b.Addr-s.prog.ActBase)); err != nil {
			return fmt.Errorf("writing input %q: %w", b.Name, err)
		}
	}
	res := Result{Batch: len(reqs)}
	var err error
	if res.Stats, err = s.run(ctx, slot, 1); err != nil {
		return err
	}
	outs := make([]*onnx.Tensor, len(s.prog.Outputs))
	for n, b := range s.prog.Outputs {
		t, err := s.output(ctx, lane, b, reqs[0].host)
		if err != nil {
			return fmt.Errorf("output %q: %w", b.Name, err)
		}
		outs[n] = t
	}
	for k, r := range reqs {
		out := res
		for _, t := range outs {
			v, err := sample(t, k, s.prog.Batch)
			if err != nil {
				return fmt.Errorf("output %q: %w", t.Name, err)
			}
			out.Outputs = append(out.Outputs, v)
		}
		r.res = &out
	}
	return nil
}

// run runs lanes 0..n-1 of job slot slot as one job and returns its
// counters (none for a program without instructions).
func (s *Session) run(ctx context.Context, slot, n int) (alidnn.Stats, error) {
	if len(s.prog.Insns) == 0 {
		return alidnn.Stats{}, nil
	}
	code, err := s.codeFor(ctx, slot, n)
	if err != nil {
		return alidnn.Stats{}, err
	}
	job, err := code.Submit(ctx)
	if err != nil {
		return alidnn.Stats{}, fmt.Errorf("submitting: %w", err)
	}
	return job.Wait(ctx)
}

// batched reports whether the program holds several samples a run
// (ForBatch), each Run one of them.
func (s *Session) batched() bool { return s.prog.Batch > 1 }

// codeFor returns the uploaded stream that runs lanes 0..n-1 of job slot
// slot, relocating and uploading it the first time.
func (s *Session) codeFor(ctx context.Context, slot, n int) (Code, error) {
	s.codeMu.Lock()
	defer s.codeMu.Unlock()
	key := [2]int{slot, n}
	if c, ok := s.code[key]; ok {
		return c, nil
	}
	streams := make([][]isa.Insn, n)
	for k := range n {
		st, err := s.lay.relocate(s.prog.Insns, s.buf.Addr(), slot*s.batch+k)
		if err != nil {
			return nil, fmt.Errorf("relocating: %w", err)
		}
		streams[k] = st
	}
	c, err := s.eng.Program(ctx, chain(streams))
	if err != nil {
		return nil, fmt.Errorf("uploading the instruction stream: %w", err)
	}
	s.code[key] = c
	return c, nil
}

// errNoActivations is returned by readAct for sessions without lanes.
var errNoActivations = errors.New("the program has no activations")

// readAct reads activation bytes at offset off of lane 0, where a
// one-lane session's runs leave them (Quantize measures them there).
func (s *Session) readAct(ctx context.Context, p []byte, off uint64) error {
	if s.prog.ActSize == 0 {
		return errNoActivations
	}
	return s.buf.Read(ctx, p, int64(s.lay.act(0)+off))
}
