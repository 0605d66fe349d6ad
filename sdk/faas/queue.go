package faas

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/agentapi/session"
)

// spinWait is how long Job.Wait polls the completion ring before it asks
// faasd for a doorbell and blocks: long enough to catch a short job
// without a system call, short enough not to burn a core on a long one.
const spinWait = 200 * time.Microsecond

// Program is an instruction stream faasd checked and stored for the
// session: every DRAM access of it lies inside one of the session's
// buffers.
type Program struct {
	d      *Device
	handle uint64
	n      int

	mu    sync.Mutex
	freed bool
}

// Program checks insns and stores them on the device. A stream that reaches
// outside the session's buffers, or does not end with FINISH, is refused
// (ErrRefused).
func (d *Device) Program(ctx context.Context, insns []isa.Insn) (*Program, error) {
	b, err := session.EncodeProgram(insns)
	if err != nil {
		return nil, &Error{Code: agentapi.CodeBadRequest, Message: err.Error()}
	}
	r, err := d.do(ctx, session.OpProgram, b)
	if err != nil {
		return nil, err
	}
	v, _, err := session.ParseU64s(r.payload, 1, false)
	if err != nil {
		return nil, fmt.Errorf("faas: program: %w", err)
	}
	if r := d.recorder(); r != nil {
		r.RecordProgram(v[0], insns)
	}
	return &Program{d: d, handle: v[0], n: len(insns)}, nil
}

// Len is the number of instructions.
func (p *Program) Len() int { return p.n }

// Free releases the program's place in the session's program area, and
// with it the hold it has on the buffers it reaches. A program with jobs
// queued or running cannot be freed (ErrInUse).
func (p *Program) Free(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.freed {
		return &Error{Code: agentapi.CodeBadHandle, Message: "program freed twice"}
	}
	if _, err := p.d.do(ctx, session.OpFree, session.U64s(p.handle)); err != nil {
		return err
	}
	p.freed = true
	if r := p.d.recorder(); r != nil {
		r.RecordFreeProgram(p.handle)
	}
	return nil
}

// Queue is a device's job queue: jobs run in the order submitted, sharing
// the engine with other tenants' sessions at job boundaries.
type Queue struct{ d *Device }

// Job is a submitted run of a program.
type Job struct {
	d    *Device
	id   uint64
	done chan struct{}

	submitted time.Duration // clock() at Submit; 0 with profiling off
	stats     alidnn.Stats
	prof      Profile
	err       error
}

// Submit queues a run of p. It blocks while the session has as many jobs in
// flight as its rings hold (256 by default), until one completes or ctx
// ends. The job's outcome, including a refusal by faasd, comes from Wait.
func (q *Queue) Submit(ctx context.Context, p *Program) (*Job, error) {
	d := q.d
	if p == nil || p.d != d {
		return nil, &Error{Code: agentapi.CodeBadHandle, Message: "program of another device"}
	}
	select {
	case d.inflight <- struct{}{}:
	default:
		select {
		case d.inflight <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-d.done:
			d.mu.Lock()
			defer d.mu.Unlock()
			return nil, d.endedErr()
		}
	}
	j := &Job{d: d, id: d.nextJob.Add(1), done: make(chan struct{})}
	if !d.prof.off.Load() {
		j.submitted = clock()
	}
	d.mu.Lock()
	if d.closed {
		err := d.endedErr()
		d.mu.Unlock()
		<-d.inflight
		return nil, err
	}
	d.jobs[j.id] = j
	d.mu.Unlock()

	if r := d.recorder(); r != nil {
		r.RecordSubmit(j.id, p.handle)
	}
	e := session.SubmitEntry{Prog: p.handle, Job: j.id}
	var err error
	if d.shm {
		d.sqMu.Lock()
		ok, wake := false, false
		if d.ctl != nil {
			ok, wake = d.ctl.PushSubmit(e)
		}
		d.sqMu.Unlock()
		switch {
		case !ok:
			err = fmt.Errorf("faas: submission ring full or unmapped")
		case wake:
			err = d.writeFrame(session.OpDoorbell, 0)
		}
	} else {
		err = d.writeFrame(session.OpSubmit, 0, session.U64s(e.Prog, e.Job))
	}
	if err != nil {
		d.mu.Lock()
		_, mine := d.jobs[j.id]
		delete(d.jobs, j.id)
		d.mu.Unlock()
		if mine {
			<-d.inflight
		}
		d.conn.Close()
		return nil, &sessionEnded{err: err}
	}
	return j, nil
}

// ID is the job's id, unique in its session.
func (j *Job) ID() uint64 { return j.id }

// finish records the outcome of the job and wakes its waiters.
func (j *Job) finish(cp session.Completion, err error) {
	if err == nil {
		j.stats = cp.Stats
		switch cp.Kind {
		case session.EngineFault:
			err = &alidnn.EngineError{Cause: cp.Cause, PC: cp.PC}
		case session.Failed:
			code := cp.Code
			if code == "" {
				code = agentapi.CodeInternal
			}
			msg := cp.Message
			if msg == "" {
				msg = string(code)
			}
			err = &Error{Code: code, Message: fmt.Sprintf("job %d: %s", j.id, msg)}
		}
	}
	j.d.prof.record(j, cp, err != nil)
	if r := j.d.recorder(); r != nil {
		r.RecordDone(j.id, j.prof.Stats, err != nil)
	}
	j.err = err
	close(j.done)
	<-j.d.inflight
}

// Cancel asks faasd to stop the job: a queued job does not run, a running
// one is aborted, and Wait then returns an error matching context.Canceled.
// It is best effort: a job that ends before the abort reaches the engine
// keeps its outcome. Cancel returns once faasd has acted; it is a no-op for
// a job that has ended.
func (j *Job) Cancel(ctx context.Context) error {
	select {
	case <-j.done:
		return nil
	default:
	}
	_, err := j.d.do(ctx, session.OpCancel, session.U64s(j.id))
	return err
}

// Wait waits for the job to end and returns the engine's counters of the
// run. A job the engine stopped returns *alidnn.EngineError (errors.Is
// alidnn.ErrEngine); one faasd refused or cut short returns *Error
// (ErrBadHandle, ErrClosed, ErrJobTimeout, context.Canceled after Cancel,
// …). If ctx ends first Wait returns ctx's error; the job goes on (Cancel
// stops it).
func (j *Job) Wait(ctx context.Context) (alidnn.Stats, error) {
	select {
	case <-j.done:
		return j.stats, j.err
	default:
	}
	d := j.d
	if d.shm {
		start := time.Now()
		for {
			d.tryDrain()
			select {
			case <-j.done:
				return j.stats, j.err
			default:
			}
			if time.Since(start) > spinWait || ctx.Err() != nil {
				break
			}
			runtime.Gosched()
		}
		d.waiters.Add(1)
		defer d.waiters.Add(-1)
		d.withCQ(func(c *session.Control) { c.SleepCompletions() })
		d.drain()
	}
	select {
	case <-j.done:
		return j.stats, j.err
	case <-ctx.Done():
		return alidnn.Stats{}, ctx.Err()
	}
}

func closeFD(fd int) { unix.Close(fd) }
