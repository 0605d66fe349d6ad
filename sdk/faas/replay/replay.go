// Package replay runs a recorded session trace (package sdk/faas/tracefile)
// again on a slot and checks that every result is bit-identical: each
// bytes read back after a job must equal what the recording read.
//
// A trace replays on a slot running the same role at the same major.minor
// version. Buffers are allocated afresh, so their device addresses differ
// from the recording's: the LOAD and STORE addresses of every program are
// moved to the new buffers (an address outside every recorded buffer is
// an error). Jobs run one after another in the recorded order.
package replay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/faas"
	"github.com/fpga-faas/faas/sdk/faas/tracefile"
)

// ErrIncompatible is returned when a trace was recorded on another role or
// role version than the slot's.
var ErrIncompatible = errors.New("replay: incompatible slot")

// maxMismatches bounds the mismatches a Report lists.
const maxMismatches = 32

// Mismatch is a read whose bytes differ from the recording's.
type Mismatch struct {
	Record int    // index of the read record
	Addr   uint64 // recorded buffer address
	Off    int64  // offset of the first differing byte in the buffer
	Want   byte
	Got    byte
}

// Report is the outcome of a replay.
type Report struct {
	Jobs, Reads int
	// Mismatched counts reads that differ; Mismatches lists the first 32.
	Mismatched int
	Mismatches []Mismatch
	// FailedJobs counts jobs whose failure differs from the recording's
	// (one failed and the other did not).
	FailedJobs int
	// Per job, submit to end: recorded and replayed, in submit order.
	Recorded, Replayed []time.Duration
	// Modeled device cycles, summed over the jobs.
	RecordedCycles, ReplayedCycles uint64
}

// Identical reports whether every read and every job's outcome matched.
func (r *Report) Identical() bool { return r.Mismatched == 0 && r.FailedJobs == 0 }

// Compatible checks that a trace recorded with h may replay on slot s.
func Compatible(h tracefile.Header, s agentapi.Slot) error {
	if s.Role == nil {
		return fmt.Errorf("%w: slot %d runs no role", ErrIncompatible, s.Index)
	}
	if s.Role.Name != h.Role || s.Role.Version != h.RoleVersion {
		return fmt.Errorf("%w: the trace was recorded on role %s %s, slot %d runs %s %s", ErrIncompatible,
			h.Role, h.RoleVersion, s.Index, s.Role.Name, s.Role.Version)
	}
	return nil
}

type buffer struct {
	old  uint64
	size uint64
	b    *faas.Buffer
}

type job struct {
	j        *faas.Job
	start    time.Time
	recorded uint64 // submit ns
}

// Run replays t on dev, a session on a compatible slot (see Compatible).
// An error means the replay could not go on (a refused program, a lost
// session); differences in results are in the Report.
func Run(ctx context.Context, dev *faas.Device, t *tracefile.Trace) (*Report, error) {
	p := &player{dev: dev, rep: &Report{}, progs: map[uint64]*faas.Program{}, jobs: map[uint64]*job{}}
	for i, r := range t.Records {
		var err error
		switch r.Kind {
		case tracefile.KindAlloc:
			err = p.alloc(ctx, r)
		case tracefile.KindFree:
			err = p.free(ctx, r)
		case tracefile.KindWrite, tracefile.KindRead:
			err = p.access(ctx, i, r)
		case tracefile.KindProgram:
			err = p.program(ctx, r)
		case tracefile.KindFreeProgram:
			err = p.freeProgram(ctx, r)
		case tracefile.KindSubmit:
			err = p.submit(ctx, r)
		case tracefile.KindDone:
			var cancelled bool
			if cancelled, err = p.done(ctx, r); cancelled {
				return p.rep, ctx.Err()
			}
		}
		if err != nil {
			return p.rep, fmt.Errorf("replay: record %d (kind %d): %w", i, r.Kind, err)
		}
	}
	return p.rep, nil
}

// player is a replay under way: the session's buffers, programs and jobs
// for the recorded ones, and the report so far.
type player struct {
	dev   *faas.Device
	rep   *Report
	bufs  []*buffer // live, by recorded address
	progs map[uint64]*faas.Program
	jobs  map[uint64]*job
}

// find is the live buffer holding recorded address addr, or nil.
func (p *player) find(addr uint64) *buffer {
	for _, b := range p.bufs {
		if addr >= b.old && addr < b.old+b.size {
			return b
		}
	}
	return nil
}

func (p *player) alloc(ctx context.Context, r tracefile.Record) error {
	b, err := p.dev.Alloc(ctx, int64(r.Size))
	if err != nil {
		return err
	}
	p.bufs = append(p.bufs, &buffer{old: r.Addr, size: r.Size, b: b})
	return nil
}

func (p *player) free(ctx context.Context, r tracefile.Record) error {
	k := slices.IndexFunc(p.bufs, func(b *buffer) bool { return b.old == r.Addr })
	if k < 0 {
		return fmt.Errorf("free of buffer %#x, which the trace did not allocate", r.Addr)
	}
	if err := p.bufs[k].b.Free(ctx); err != nil {
		return err
	}
	p.bufs = slices.Delete(p.bufs, k, k+1)
	return nil
}

func (p *player) freeProgram(ctx context.Context, r tracefile.Record) error {
	prog := p.progs[r.ID]
	if prog == nil {
		return fmt.Errorf("free of program %d, which the trace did not store", r.ID)
	}
	if err := prog.Free(ctx); err != nil {
		return err
	}
	delete(p.progs, r.ID)
	return nil
}

// access replays record i, a write, or a read whose bytes it compares
// with the recorded ones.
func (p *player) access(ctx context.Context, i int, r tracefile.Record) error {
	b := p.find(r.Addr)
	if b == nil || b.old != r.Addr {
		return fmt.Errorf("buffer %#x, which the trace did not allocate", r.Addr)
	}
	if r.Kind == tracefile.KindWrite {
		return b.b.Write(ctx, r.Data, int64(r.Off))
	}
	got := make([]byte, len(r.Data))
	if err := b.b.Read(ctx, got, int64(r.Off)); err != nil {
		return err
	}
	rep := p.rep
	rep.Reads++
	if k := firstDiff(got, r.Data); k >= 0 {
		rep.Mismatched++
		if len(rep.Mismatches) < maxMismatches {
			rep.Mismatches = append(rep.Mismatches, Mismatch{Record: i, Addr: r.Addr, Off: int64(r.Off) + int64(k), Want: r.Data[k], Got: got[k]})
		}
	}
	return nil
}

// program stores a recorded program, its LOADs and STOREs relocated from
// the recorded buffers to the live ones.
func (p *player) program(ctx context.Context, r tracefile.Record) error {
	insns := slices.Clone(r.Insns)
	for k := range insns {
		in := &insns[k]
		if in.Op != isa.OpLoad && in.Op != isa.OpStore {
			continue
		}
		b := p.find(in.DRAM)
		if b == nil {
			return fmt.Errorf("program %d, instruction %d: address %#x is in no recorded buffer", r.ID, k, in.DRAM)
		}
		in.DRAM = in.DRAM - b.old + b.b.Addr()
	}
	prog, err := p.dev.Program(ctx, insns)
	if err != nil {
		return err
	}
	p.progs[r.ID] = prog
	return nil
}

func (p *player) submit(ctx context.Context, r tracefile.Record) error {
	prog := p.progs[r.Program]
	if prog == nil {
		return fmt.Errorf("job %d runs program %d, which the trace did not store", r.Job, r.Program)
	}
	j, err := p.dev.Queue().Submit(ctx, prog)
	if err != nil {
		return err
	}
	p.jobs[r.Job] = &job{j: j, start: time.Now(), recorded: r.NS}
	return nil
}

// done waits for a job's end and adds it to the report; cancelled says ctx
// ended while it waited.
func (p *player) done(ctx context.Context, r tracefile.Record) (cancelled bool, err error) {
	jb := p.jobs[r.Job]
	if jb == nil {
		return false, fmt.Errorf("end of job %d, which the trace did not submit", r.Job)
	}
	delete(p.jobs, r.Job)
	st, err := jb.j.Wait(ctx)
	if ctx.Err() != nil {
		return true, nil
	}
	rep := p.rep
	rep.Jobs++
	if (err != nil) != r.Failed {
		rep.FailedJobs++
	}
	rep.Recorded = append(rep.Recorded, time.Duration(r.NS-min(jb.recorded, r.NS)))
	rep.Replayed = append(rep.Replayed, time.Since(jb.start))
	rep.RecordedCycles += r.Stats.Cycles
	rep.ReplayedCycles += st.Cycles
	return false, nil
}

func firstDiff(a, b []byte) int {
	for k := range a {
		if a[k] != b[k] {
			return k
		}
	}
	return -1
}
