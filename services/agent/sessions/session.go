package sessions

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Session is one tenant process's view of the engine.
type Session struct {
	e      *Engine
	t      *tenant
	window int
	region extent // [Base, Limit) of the window
	prog   uint64 // start of the program area, the top of region
	agent  uint64 // start of the agent area, the agentBytes below prog

	// ctx is the context of the session's runs; Close cancels it to abort
	// a running job.
	ctx    context.Context
	cancel context.CancelFunc

	// io counts Write, Read, Alloc and Program calls moving data, which
	// Close waits for before it zeroes the region.
	io sync.WaitGroup

	// closeDone is closed when Close has finished: the region zeroed
	// and freed (or retired), the window disabled. A second Close, the
	// engine's shutdown among them, waits for it: until then the region
	// is being written by the first.
	closeDone chan struct{}

	// Guarded by e.mu.
	closed   bool
	bufs     arena // [region.base, prog)
	progs    arena // [prog, region.end)
	buffers  map[Handle]*buffer
	byAddr   []*buffer // live buffers sorted by address
	programs map[Handle]*program
	memory   uint64 // bytes of buffers
	jobs     int    // submitted, completion not yet in the channel
	out      outbox
}

// buffer is a live allocation. Guarded by e.mu.
type buffer struct {
	Buffer
	refs int // programs referencing it
	io   int // Write/Read/zeroing in flight
}

// program is an uploaded instruction stream. Guarded by e.mu.
type program struct {
	h     Handle
	addr  uint64
	size  uint64 // bytes reserved in the program area
	count int
	bufs  []*buffer // buffers its LOADs and STOREs reach, each once
	// writes is what its jobs may leave in SRAM.
	writes sramSet
	jobs   int // queued or running
}

func newSession(e *Engine, t *tenant, win int, base, limit, prog uint64) *Session {
	s := &Session{
		e: e, t: t, window: win,
		region:    extent{base, limit},
		prog:      prog,
		agent:     prog - agentBytes,
		bufs:      newArena(base, prog-agentBytes),
		progs:     newArena(prog, limit),
		buffers:   map[Handle]*buffer{},
		programs:  map[Handle]*program{},
		closeDone: make(chan struct{}),
	}
	s.ctx, s.cancel = context.WithCancel(e.base)
	s.out.init(s)
	return s
}

// Tenant is the session's tenant.
func (s *Session) Tenant() string { return s.t.name }

// Region describes a session's place on the chip.
type Region struct {
	Window int    // shell tenant window index
	Base   uint64 // the window: [Base, Limit)
	Limit  uint64
	// Agent is the start of the agent area, [Agent, Programs): the program
	// and zeros of the SRAM scrub. No buffer lies there and no instruction
	// of the tenant may reach it.
	Agent uint64
	// Programs is the start of the program area, [Programs, Limit): no
	// buffer lies there and no instruction may reach it.
	Programs uint64
}

// Region reports the session's window and DDR region.
func (s *Session) Region() Region {
	return Region{Window: s.window, Base: s.region.base, Limit: s.region.end, Agent: s.agent, Programs: s.prog}
}

// newHandle returns a random handle unused in the session. e.mu held.
func (s *Session) newHandle() Handle {
	var b [8]byte
	for {
		rand.Read(b[:]) // never fails (crypto/rand panics instead)
		h := Handle(binary.LittleEndian.Uint64(b[:]))
		if h == 0 || s.buffers[h] != nil || s.programs[h] != nil {
			continue
		}
		return h
	}
}

// Alloc allocates size bytes (rounded up to 64) inside the session's window.
// The buffer reads as zeros. It fails with ErrQuota beyond the tenant's
// memory quota or when the session's region has no free run of that size.
func (s *Session) Alloc(size uint64) (Buffer, error) {
	e := s.e
	n := roundUp(max(size, 1), bufAlign)
	e.mu.Lock()
	if s.closed {
		e.mu.Unlock()
		return Buffer{}, ErrClosed
	}
	t := s.t
	if n < size || n > t.quota.Memory || t.memory > t.quota.Memory-n {
		e.mu.Unlock()
		return Buffer{}, fmt.Errorf("sessions: tenant %q: %d bytes more would exceed its %d-byte quota (%d in use): %w",
			t.name, n, t.quota.Memory, t.memory, ErrQuota)
	}
	addr, ok := s.bufs.alloc(n, bufAlign)
	if !ok {
		e.mu.Unlock()
		return Buffer{}, fmt.Errorf("sessions: tenant %q: no free %d bytes in the session's region: %w", t.name, n, ErrQuota)
	}
	b := &buffer{Buffer: Buffer{Handle: s.newHandle(), Addr: addr, Size: n}, io: 1}
	s.buffers[b.Handle] = b
	k := sort.Search(len(s.byAddr), func(i int) bool { return s.byAddr[i].Addr > addr })
	s.byAddr = append(s.byAddr, nil)
	copy(s.byAddr[k+1:], s.byAddr[k:])
	s.byAddr[k] = b
	s.memory += n
	t.memory += n
	s.io.Add(1)
	e.mu.Unlock()

	err := e.zero(context.Background(), addr, n)

	e.mu.Lock()
	b.io--
	if err != nil {
		s.drop(b)
	}
	e.mu.Unlock()
	s.io.Done()
	if err != nil {
		return Buffer{}, err
	}
	return b.Buffer, nil
}

// drop forgets buffer b and returns its memory. e.mu held.
func (s *Session) drop(b *buffer) {
	delete(s.buffers, b.Handle)
	k := sort.Search(len(s.byAddr), func(i int) bool { return s.byAddr[i].Addr >= b.Addr })
	s.byAddr = append(s.byAddr[:k], s.byAddr[k+1:]...)
	s.bufs.release(b.Addr, b.Size)
	s.memory -= b.Size
	s.t.memory -= b.Size
}

// Free releases a buffer, or a program. A buffer that a program still
// references, or that a Write or Read is using, is ErrInUse; so is a
// program with queued or running jobs. Freed bytes are zeroed when they are
// next allocated, and at Close.
func (s *Session) Free(h Handle) error {
	e := s.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if b := s.buffers[h]; b != nil {
		if b.refs > 0 || b.io > 0 {
			return fmt.Errorf("sessions: buffer at %#x: %d programs and %d transfers use it: %w", b.Addr, b.refs, b.io, ErrInUse)
		}
		s.drop(b)
		return nil
	}
	if p := s.programs[h]; p != nil {
		if p.jobs > 0 {
			return fmt.Errorf("sessions: program at %#x: %d jobs queued or running: %w", p.addr, p.jobs, ErrInUse)
		}
		s.dropProgram(p)
		return nil
	}
	return fmt.Errorf("sessions: free: %w", ErrBadHandle)
}

// dropProgram forgets program p. e.mu held.
func (s *Session) dropProgram(p *program) {
	delete(s.programs, p.h)
	for _, b := range p.bufs {
		b.refs--
	}
	s.progs.release(p.addr, p.size)
}

// begin looks up buffer h for a transfer of n bytes at off and marks it in
// use; end undoes that.
func (s *Session) begin(h Handle, off, n uint64) (*buffer, error) {
	e := s.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	b := s.buffers[h]
	if b == nil {
		return nil, fmt.Errorf("sessions: transfer: %w", ErrBadHandle)
	}
	if off > b.Size || n > b.Size-off {
		return nil, fmt.Errorf("sessions: %d bytes at offset %d of a %d-byte buffer: %w", n, off, b.Size, ErrOutOfRange)
	}
	b.io++
	s.io.Add(1)
	return b, nil
}

func (s *Session) end(b *buffer) {
	s.e.mu.Lock()
	b.io--
	s.e.mu.Unlock()
	s.io.Done()
}

// Write copies p into buffer h at off; Read the reverse.
func (s *Session) Write(ctx context.Context, h Handle, off uint64, p []byte) error {
	b, err := s.begin(h, off, uint64(len(p)))
	if err != nil {
		return err
	}
	defer s.end(b)
	return s.e.write(ctx, b.Addr+off, p)
}

func (s *Session) Read(ctx context.Context, h Handle, off uint64, p []byte) error {
	b, err := s.begin(h, off, uint64(len(p)))
	if err != nil {
		return err
	}
	defer s.end(b)
	return s.e.read(ctx, b.Addr+off, p)
}

// Submit queues a run of program p as job id; the completion arrives on
// the session's Completions channel, in the order jobs ran. Beyond
// Config.MaxJobs jobs whose completion has not reached the channel it
// fails with ErrQuota.
func (s *Session) Submit(p Handle, id uint64) error {
	e := s.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	prog := s.programs[p]
	if prog == nil {
		return fmt.Errorf("sessions: submit: %w", ErrBadHandle)
	}
	if s.jobs >= e.maxJobs {
		return fmt.Errorf("sessions: %d jobs outstanding: read completions first: %w", s.jobs, ErrQuota)
	}
	prog.jobs++
	s.jobs++
	e.sched.push(s.t, job{s: s, p: prog, id: id, queued: time.Now()})
	return nil
}

// written is what the session may have written of its region: its buffers
// and programs up to the highest ever allocated, and the agent area.
// Nothing else of the region was reachable (Write and DMA reach buffers,
// uploads the program area, the engine only checked buffers), and Alloc
// zeroes what it hands out, so zeroing these spans at Close leaves the
// region as clean as zeroing it whole, at a fraction of the cost for the
// usual session that uses a little of its quota. e.mu held.
func (s *Session) written() []extent {
	out := []extent{{s.agent, s.agent + agentBytes}}
	if s.bufs.high > 0 {
		out = append(out, extent{s.region.base, s.bufs.high})
	}
	if s.progs.high > 0 {
		out = append(out, extent{s.prog, s.progs.high})
	}
	return out
}

// Completions delivers the session's completions; closed after Close.
// A reader should drain it until it is closed: completions wait for the
// reader for as long as the engine runs.
func (s *Session) Completions() <-chan Completion { return s.out.ch }

// Close cancels queued jobs (their completions carry ErrClosed), aborts the
// running one and waits for it to stop (its completion carries ErrClosed
// too), waits for the session's transfers, disables its window, then
// zeroes and frees the session's memory. Closing again, or at once from
// another goroutine, waits for the first Close to finish and returns nil.
//
// A region that could not be zeroed, or whose window could not be
// disabled, is never handed to another session.
func (s *Session) Close() error {
	e := s.e
	e.mu.Lock()
	if s.closed {
		e.mu.Unlock()
		<-s.closeDone
		return nil
	}
	s.closed = true
	queued := e.sched.cancel(s)
	if e.running == s {
		s.cancel()
		for e.running == s {
			e.jobDone.Wait()
		}
	}
	// After the running job's completion, which came before them.
	for _, j := range queued {
		j.p.jobs--
		s.deliver(Completion{Job: j.id, Err: fmt.Errorf("sessions: job %d not run: %w", j.id, ErrClosed)})
	}
	werr := e.chip.SetWindow(s.window, 0, 0)
	written := s.written()
	e.mu.Unlock()
	s.cancel()

	s.io.Wait()
	var zerr error
	for _, x := range written {
		if zerr = e.zero(context.Background(), x.base, x.end-x.base); zerr != nil {
			break
		}
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	t := s.t
	t.memory -= s.memory
	t.sessions--
	s.memory = 0
	clear(s.buffers)
	clear(s.programs)
	s.byAddr = nil
	delete(e.sessions, s)
	switch {
	case werr != nil:
		werr = fmt.Errorf("sessions: disabling window %d: %w", s.window, werr)
		e.log.Error("window of a closed session left open; window and region retired", "window", s.window, "err", werr)
	case zerr != nil:
		e.log.Error("region of a closed session not zeroed; region retired", "base", s.region.base, "err", zerr)
		e.windows = append(e.windows, s.window)
	default:
		e.windows = append(e.windows, s.window)
		e.ddr.release(s.region.base, s.region.end-s.region.base)
	}
	s.out.finish()
	close(s.closeDone)
	e.log.Debug("session closed", "tenant", t.name, "window", s.window)
	return errors.Join(werr, zerr)
}
