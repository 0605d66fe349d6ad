package alidnn

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
)

// ErrRefused is returned by a local engine's Program when an instruction
// reaches outside the engine's buffers, as the node agent refuses it.
var ErrRefused = errors.New("program refused")

// local is an Engine over a register-level Device: the in-process
// simulator, or a chip the caller drives itself. It hands out the device's
// window from its start, never reusing memory (Free only stops programs
// from naming a buffer), runs jobs in submission order, and checks programs
// the way the agent does, so code that runs here is accepted there too.
type local struct {
	dev Device

	mu   sync.Mutex
	next uint64 // first unallocated byte of the window, relative to its base
	bufs []*localBuffer
	last chan struct{} // closed when the last submitted job has ended
}

// NewLocal returns an Engine over dev. It owns dev's window: memory is
// allocated from the window's start, over whatever an earlier engine or Load
// left there.
func NewLocal(dev Device) Engine {
	done := make(chan struct{})
	close(done)
	return &local{dev: dev, last: done}
}

func (l *local) alloc(size uint64) (uint64, error) {
	base, wsize, _ := l.dev.Window()
	start := align(l.next, 4096)
	if size > wsize || start > wsize-size {
		return 0, fmt.Errorf("allocating %d bytes: %d of the window's %d bytes are left", size, wsize-min(start, wsize), wsize)
	}
	l.next = start + size
	return base + start, nil
}

func (l *local) Alloc(ctx context.Context, size int64) (Buffer, error) {
	if size <= 0 {
		return nil, fmt.Errorf("allocating %d bytes", size)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	addr, err := l.alloc(align(uint64(size), 64))
	if err != nil {
		return nil, err
	}
	b := &localBuffer{l: l, addr: addr, size: size}
	l.bufs = append(l.bufs, b)
	return b, nil
}

func (l *local) Program(ctx context.Context, insns []isa.Insn) (Code, error) {
	if len(insns) == 0 || insns[len(insns)-1].Op != isa.OpFinish {
		return nil, fmt.Errorf("%w: the stream does not end with FINISH", ErrRefused)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for n, i := range insns {
		if i.Op != isa.OpLoad && i.Op != isa.OpStore {
			continue
		}
		lo, hi := extent(i)
		if !l.inside(lo, hi) {
			return nil, fmt.Errorf("%w: instruction %d (%s) reaches [%#x, %#x), outside every buffer", ErrRefused, n, i.Op, lo, hi)
		}
	}
	b, err := isa.EncodeProgram(insns)
	if err != nil {
		return nil, err
	}
	addr, err := l.alloc(uint64(len(b)))
	if err != nil {
		return nil, fmt.Errorf("uploading instructions: %w", err)
	}
	if err := l.dev.WriteAt(ctx, b, addr); err != nil {
		return nil, fmt.Errorf("uploading instructions: %w", err)
	}
	return &localCode{l: l, addr: addr, count: len(insns)}, nil
}

// inside reports whether [lo, hi) lies in one live buffer. Callers hold mu.
func (l *local) inside(lo, hi uint64) bool {
	for _, b := range l.bufs {
		if !b.freed && lo >= b.addr && hi <= b.addr+uint64(b.size) {
			return true
		}
	}
	return false
}

type localBuffer struct {
	l     *local
	addr  uint64
	size  int64
	freed bool
}

func (b *localBuffer) Addr() uint64 { return b.addr }
func (b *localBuffer) Size() int64  { return b.size }

func (b *localBuffer) check(n int, off int64) error {
	if off < 0 || int64(n) > b.size-off {
		return fmt.Errorf("access of %d bytes at %d of a %d-byte buffer", n, off, b.size)
	}
	return nil
}

func (b *localBuffer) Write(ctx context.Context, p []byte, off int64) error {
	if err := b.check(len(p), off); err != nil {
		return err
	}
	return b.l.dev.WriteAt(ctx, p, b.addr+uint64(off))
}

func (b *localBuffer) Read(ctx context.Context, p []byte, off int64) error {
	if err := b.check(len(p), off); err != nil {
		return err
	}
	return b.l.dev.ReadAt(ctx, p, b.addr+uint64(off))
}

func (b *localBuffer) Free(ctx context.Context) error {
	b.l.mu.Lock()
	defer b.l.mu.Unlock()
	b.freed = true
	return nil
}

type localCode struct {
	l     *local
	addr  uint64
	count int
}

// Submit queues the run behind the engine's last job: each job waits for
// its predecessor to end, so jobs run one at a time in submission order, as
// the engine's queue runs them in the agent.
func (c *localCode) Submit(ctx context.Context) (Job, error) {
	_, _, win := c.l.dev.Window()
	j := &localJob{done: make(chan struct{})}
	c.l.mu.Lock()
	prev := c.l.last
	c.l.last = j.done
	c.l.mu.Unlock()
	go func() {
		defer close(j.done)
		<-prev
		// The job belongs to the engine once submitted, as in the agent:
		// the submitter's ctx does not abort it.
		j.stats, j.err = alidnn.Exec(context.WithoutCancel(ctx), c.l.dev, alidnn.Run{Insns: c.addr, Count: c.count, Window: win})
	}()
	return j, nil
}

type localJob struct {
	done  chan struct{}
	stats alidnn.Stats
	err   error
}

func (j *localJob) Wait(ctx context.Context) (alidnn.Stats, error) {
	select {
	case <-j.done:
		return j.stats, j.err
	case <-ctx.Done():
		return alidnn.Stats{}, ctx.Err()
	}
}
