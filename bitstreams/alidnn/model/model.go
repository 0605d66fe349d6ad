// Package model is the functional and cycle model of the AliDNN
// deep-learning engine role for the board simulator. Register Model with a
// sim.Registry to make AliDNN bitstreams programmable on simulated boards;
// NewLocal runs one engine in process for tools that cannot reach an agent.
//
// The model follows bitstreams/alidnn (registers, causes, Config) and the
// instruction set of bitstreams/alidnn/isa (ISA.md). A run fetches and
// decodes the whole stream first (an undecodable instruction or a stream not
// ending in FINISH fails the run before anything executes), then executes it
// as a discrete-event simulation that is also the cycle model: each queue
// (load, compute, store) has a cursor, the cycle it is free from; an
// instruction starts when its queue is free and the tokens it pops have been
// pushed (a token carries the cycle its producer ended), runs functionally,
// and its pushes carry its end cycle. Of the queue heads whose tokens are
// available, the one that can start first executes next, ties going load,
// compute, store. When no head can start and instructions remain, the run
// fails with CauseDeadlock at the earliest blocked head.
//
// # Cycle model
//
// With L = Config.DDRLatency and B = Config.DDRBytesPerCycle:
//
//	fetch        L + ⌈16·INSN_COUNT / B⌉, before any queue starts
//	LOAD, STORE  L + ⌈bytes / B⌉, bytes = y_size·x_size·element bytes in DRAM
//	             (padding is generated on the SRAM side and costs nothing)
//	GEMM         iter_out·iter_in·(uop_end−uop_begin), one 16×16 block per
//	             cycle; ×Config.FP32Rate with fp32 (a reset is never scaled)
//	ALU          iter_out·iter_in·(uop_end−uop_begin), one element per cycle
//	POOL         out_h·out_w·channels·win_h·win_w (max, avg);
//	             out_h·out_w·channels·⌈win_h·win_w / 9⌉ (dw, dwacc: 9
//	             taps per pass), ×Config.FP32Rate with fp32
//	FINISH, NOP  1
//
// A token is usable in the cycle its producer ends. CYCLES is the end of the
// last instruction (or of the fetch); BUSY_* sum the durations of each
// queue's instructions; MACS counts 256 per block of every non-reset GEMM
// and 16 per tap and output vector of a depthwise POOL;
// LOAD_BYTES counts fetched instruction bytes and LOAD's DRAM bytes,
// STORE_BYTES STORE's.
//
// # Choices where ISA.md leaves room
//
//   - fp32 GEMM: each product is rounded to fp32 (never fused), the 16
//     products of a lane are summed in index order starting from the first,
//     and that sum is added to the accumulator lane.
//   - shr adds its rounding term in 64 bits (no overflow near 2³¹−1).
//   - quantize of NaN gives the zero point; ±Inf and large values saturate.
//     dequantize converts dst − zp (exact in 64 bits) to fp32, then
//     multiplies by the scale in fp32.
//   - exp and log of a NaN return it, quieted, with its payload truncated
//     to fp32 (Go's float64 round trip); a NaN they make (log of a negative
//     number) is the one Go's float64 → float32 conversion gives.
//   - fp32 min/max (and relu, POOL max) return the destination when the
//     operands compare equal, so max(−0, +0) is −0.
//   - POOL checks tile ranges (CauseSRAM) before overlap (CauseIllegal);
//     a depthwise POOL checks inp, acc and param ranges, then its int8
//     weights (CauseIllegal), before writing anything.
//   - Bits 63:40 of a requant parameter and 63:32 of a scale are ignored.
//   - Reserved bits of an ALU micro-op are CauseIllegal at the ALU.
//   - A LOAD reads its whole tile from DRAM before writing SRAM, so a
//     window fault leaves SRAM unchanged. A STORE writes row by row (the
//     whole tile at once when its rows are contiguous); each access is
//     wholly inside the window or refused, so a STORE that leaves the
//     window mid-tile fails with CauseWindow after writing the rows before
//     it, and no byte outside the window is touched.
//   - DRAM addresses are card addresses: the window only admits or refuses
//     them, it does not relocate them.
//   - A push into a token FIFO that already holds isa.TokenDepth tokens
//     fails the run with CauseIllegal when the pushing instruction
//     completes (its function has run, its counters are not counted).
//   - Every FINISH but the run's last completing instruction raises the
//     interrupt when it completes; the run's end raises once more after
//     STATUS and the counters are final.
package model

import (
	"sync"
	"sync/atomic"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/shell/sim"
)

// Model registers the AliDNN engine with a simulator registry.
var Model = sim.RoleModel{
	Name:    alidnn.Name,
	ID:      alidnn.ID,
	Version: alidnn.Version,
	New: func(env *sim.Env, _ sim.RoleConfig) (sim.Role, error) {
		return newRole(env, alidnn.Default)
	},
}

type role struct {
	env  *sim.Env
	cfg  alidnn.Config
	eng  *engine // used by the run goroutine only
	stop atomic.Bool
	shut atomic.Bool // Close was called
	wg   sync.WaitGroup
	// starts carries each START to the engine's goroutine, which lives as
	// long as the role: a goroutine per run would grow a fresh stack for
	// every run, more work than a short run itself. Closed by Close.
	starts chan start

	mu       sync.Mutex
	insnAddr uint64
	count    uint32
	window   uint32
	status   uint32
	jobID    uint32
	errPC    uint32
	c        counters
}

func newRole(env *sim.Env, cfg alidnn.Config) (*role, error) {
	r := &role{env: env, cfg: cfg}
	eng, err := newEngine(cfg, &r.stop)
	if err != nil {
		return nil, err
	}
	r.eng = eng
	r.starts = make(chan start, 1)
	r.wg.Add(1)
	go r.loop()
	return r, nil
}

// start is one START: where the run's instructions are and its window.
type start struct {
	addr  uint64
	count uint32
	win   int
}

func sat32(v uint64) uint32 { return uint32(min(v, 1<<32-1)) }

func (r *role) ReadReg(off uint32) uint32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reg(off)
}

// ReadRegs reads a block of registers under one lock: the counters of a
// finished run read together are from the same run.
func (r *role) ReadRegs(off uint32, dst []uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range dst {
		dst[i] = r.reg(off + uint32(4*i))
	}
}

// reg is the value of register off. r.mu held.
func (r *role) reg(off uint32) uint32 {
	switch off {
	case alidnn.RegMagic:
		return alidnn.ID
	case alidnn.RegStatus:
		return r.status
	case alidnn.RegInsnAddr:
		return uint32(r.insnAddr)
	case alidnn.RegInsnAddr + 4:
		return uint32(r.insnAddr >> 32)
	case alidnn.RegInsnCount:
		return r.count
	case alidnn.RegWindow:
		return r.window
	case alidnn.RegJobID:
		return r.jobID
	case alidnn.RegErrorPC:
		return r.errPC
	case alidnn.RegCycles:
		return uint32(r.c.cycles)
	case alidnn.RegCycles + 4:
		return uint32(r.c.cycles >> 32)
	case alidnn.RegInsns:
		return sat32(r.c.insns)
	case alidnn.RegMACs:
		return uint32(r.c.macs)
	case alidnn.RegMACs + 4:
		return uint32(r.c.macs >> 32)
	case alidnn.RegLoadBytes:
		return uint32(r.c.loadBytes)
	case alidnn.RegLoadBytes + 4:
		return uint32(r.c.loadBytes >> 32)
	case alidnn.RegStoreBytes:
		return uint32(r.c.storeBytes)
	case alidnn.RegStoreBytes + 4:
		return uint32(r.c.storeBytes >> 32)
	case alidnn.RegBusyLoad:
		return sat32(r.c.busy[0])
	case alidnn.RegBusyComp:
		return sat32(r.c.busy[1])
	case alidnn.RegBusyStore:
		return sat32(r.c.busy[2])
	case alidnn.RegStallLoad:
		return sat32(r.c.stall[0])
	case alidnn.RegStallComp:
		return sat32(r.c.stall[1])
	case alidnn.RegStallStore:
		return sat32(r.c.stall[2])
	case alidnn.RegConfig:
		return r.cfg.ConfigWord()
	}
	return 0
}

func (r *role) WriteReg(off uint32, v uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch off {
	case alidnn.RegInsnAddr:
		r.insnAddr = r.insnAddr&^0xffffffff | uint64(v)
	case alidnn.RegInsnAddr + 4:
		r.insnAddr = r.insnAddr&0xffffffff | uint64(v)<<32
	case alidnn.RegInsnCount:
		r.count = v
	case alidnn.RegWindow:
		r.window = v
	case alidnn.RegControl:
		busy := r.status&alidnn.StatusBusy != 0
		if v&alidnn.Abort != 0 && busy {
			r.stop.Store(true)
		}
		if v&alidnn.Start == 0 || r.shut.Load() {
			return
		}
		if busy {
			// The running run goes on; its end overwrites STATUS.
			r.status = r.status&^0xff00 | alidnn.StatusError | uint32(alidnn.CauseBusy)<<8
			return
		}
		r.status = alidnn.StatusBusy
		r.stop.Store(false)
		// Never blocks: STATUS stays busy until the loop has taken the
		// previous start, so at most one is ever waiting.
		r.starts <- start{r.insnAddr, r.count, int(r.window)}
	}
}

// loop executes runs in the background, as the hardware would, until
// Close.
func (r *role) loop() {
	defer r.wg.Done()
	for st := range r.starts {
		if r.shut.Load() {
			continue // a start left in the channel at Close: the Env is dead
		}
		r.run(st.addr, st.count, st.win)
	}
}

// run executes one run.
func (r *role) run(addr uint64, count uint32, win int) {
	c, pc, f := execute(r.eng, r.env, win, addr, count, r.finished)
	if r.shut.Load() {
		return // Close stopped the run; the Env must not be used any more
	}
	r.mu.Lock()
	r.c = c
	if f != nil {
		r.status = alidnn.StatusError | uint32(f.cause)<<8
		r.errPC = pc
	} else {
		r.status = alidnn.StatusDone
	}
	r.mu.Unlock()
	r.env.Raise(0)
}

// finished reports a completed FINISH; the run's last one is raised by run
// once STATUS is final.
func (r *role) finished(job uint32, last bool) {
	r.mu.Lock()
	r.jobID = job
	r.mu.Unlock()
	if !last {
		r.env.Raise(0)
	}
}

func (r *role) Close() {
	// Under mu, so that a concurrent START either sees shut or has sent
	// its run before the channel closes.
	r.mu.Lock()
	if !r.shut.Swap(true) {
		close(r.starts)
	}
	r.stop.Store(true)
	r.mu.Unlock()
	r.wg.Wait()
}
