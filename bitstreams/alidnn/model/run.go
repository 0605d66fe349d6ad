package model

import (
	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
)

// counters are the engine's statistics of one run.
type counters struct {
	cycles, insns, macs, loadBytes, storeBytes uint64
	busy                                       [3]uint64 // per isa.Queue
	// stall counts the cycles each queue's next instruction waited for a
	// dependency token after the queue itself was free.
	stall [3]uint64
}

// fetchChunk bounds the host memory one fetch access needs.
const fetchChunk = 1 << 20

// fifo is one direction of token traffic between two adjacent queues; each
// token is the cycle it was pushed at.
type fifo struct {
	t    []uint64
	head int
}

func (f *fifo) empty() bool      { return f.head == len(f.t) }
func (f *fifo) front() uint64    { return f.t[f.head] }
func (f *fifo) full() bool       { return len(f.t)-f.head >= isa.TokenDepth }
func (f *fifo) push(at uint64)   { f.t = append(f.t, at) }
func (f *fifo) pop()             { f.head++ }
func ceilDiv(a, b uint64) uint64 { return (a + b - 1) / b }

// execute runs count instructions fetched from addr through window win. It
// calls finish for every FINISH that completes, with last set when nothing
// of the run is left after it. On failure it returns the fault and the index
// of the instruction that caused it; the counters cover what completed.
func execute(e *engine, d ddrPort, win int, addr uint64, count uint32, finish func(job uint32, last bool)) (counters, uint32, *fault) {
	var c counters
	if count == 0 || count > alidnn.MaxInsns {
		return c, 0, faultf(alidnn.CauseStream, "instruction count %d outside 1..%d", count, alidnn.MaxInsns)
	}

	// Fetch and decode the whole stream before dispatching any of it, so a
	// stream that does not decode has no effect at all.
	raw, f := fetchStream(e, d, win, addr, count)
	if f != nil {
		return c, 0, f
	}
	c.loadBytes = uint64(len(raw))
	fetched := uint64(e.cfg.DDRLatency) + ceilDiv(uint64(len(raw)), uint64(e.cfg.DDRBytesPerCycle))
	c.cycles = fetched
	decode := func(k uint32) (isa.Insn, error) {
		return isa.Decode([isa.InsnBytes]byte(raw[k*isa.InsnBytes:]))
	}
	queues, k, f := queueStream(count, decode)
	if f != nil {
		return c, k, f
	}

	// The discrete-event schedule: each queue has a cursor (the cycle it is
	// free from); of the queue heads whose tokens are available, the one
	// that can start first runs next (ties in load, compute, store order).
	// Start times so chosen never decrease, so executing instructions in
	// that order is a functional order the tokens allow.
	var (
		tok   tokens
		free  = [3]uint64{fetched, fetched, fetched}
		pos   [3]int
		heads [3]isa.Insn
		left  = int(count)
	)
	for q := range queues {
		if len(queues[q]) > 0 {
			heads[q], _ = decode(queues[q][0])
		}
	}
	for left > 0 {
		best, bestAt := -1, uint64(0)
		for q := range queues {
			if pos[q] == len(queues[q]) {
				continue
			}
			if at, ok := tok.start(q, &heads[q], free[q]); ok && (best < 0 || at < bestAt) {
				best, bestAt = q, at
			}
		}
		if best < 0 {
			return c, firstWaiting(queues, pos, count), faultf(alidnn.CauseDeadlock, "every queue waits for a token")
		}
		q, in, k := best, heads[best], queues[best][pos[best]]
		if e.stop.Load() {
			return c, k, errStopped
		}
		tok.pop(q, &in)
		if f := e.step(&in, d, win, &c); f != nil {
			return c, k, f
		}
		dur := e.cycles(&in)
		end := bestAt + dur
		c.stall[q] += bestAt - free[q]
		free[q] = end
		c.busy[q] += dur
		c.cycles = max(c.cycles, end)
		c.insns++
		if f := tok.push(q, &in, end); f != nil {
			return c, k, f
		}
		left--
		pos[q]++
		if pos[q] < len(queues[q]) {
			heads[q], _ = decode(queues[q][pos[q]])
		}
		if in.Op == isa.OpFinish {
			finish(in.JobID, left == 0)
		}
	}
	return c, 0, nil
}

// tokens are the token FIFOs between the queues: down[q] from queue q to
// q+1, up[q] from q+1 to q. Each holds the cycles its tokens were pushed at.
type tokens struct {
	down, up [2]fifo
}

// start is when queue q, free from cycle free, can start in: after the
// tokens it pops were pushed; ok is false while one is missing.
func (t *tokens) start(q int, in *isa.Insn, free uint64) (at uint64, ok bool) {
	at = free
	if in.PopPrev {
		if q == 0 || t.down[q-1].empty() {
			return 0, false
		}
		at = max(at, t.down[q-1].front())
	}
	if in.PopNext {
		if q == 2 || t.up[q].empty() {
			return 0, false
		}
		at = max(at, t.up[q].front())
	}
	return at, true
}

// pop takes the tokens in of queue q waits for.
func (t *tokens) pop(q int, in *isa.Insn) {
	if in.PopPrev {
		t.down[q-1].pop()
	}
	if in.PopNext {
		t.up[q].pop()
	}
}

// push adds the tokens in of queue q signals, at cycle end.
func (t *tokens) push(q int, in *isa.Insn, end uint64) *fault {
	if in.PushPrev {
		if t.up[q-1].full() {
			return faultf(alidnn.CauseIllegal, "the %s → %s token FIFO is full (%d tokens)", isa.Queue(q), isa.Queue(q-1), isa.TokenDepth)
		}
		t.up[q-1].push(end)
	}
	if in.PushNext {
		if t.down[q].full() {
			return faultf(alidnn.CauseIllegal, "the %s → %s token FIFO is full (%d tokens)", isa.Queue(q), isa.Queue(q+1), isa.TokenDepth)
		}
		t.down[q].push(end)
	}
	return nil
}

// firstWaiting is the index of the earliest instruction at a queue's head
// when every queue waits.
func firstWaiting(queues [3][]uint32, pos [3]int, count uint32) uint32 {
	pc := count
	for q := range queues {
		if pos[q] < len(queues[q]) {
			pc = min(pc, queues[q][pos[q]])
		}
	}
	return pc
}

// fetchStream reads count instructions from addr through window win.
func fetchStream(e *engine, d ddrPort, win int, addr uint64, count uint32) ([]byte, *fault) {
	raw := make([]byte, uint64(count)*isa.InsnBytes)
	for off := 0; off < len(raw); off += fetchChunk {
		if e.stop.Load() {
			return nil, errStopped
		}
		p := raw[off:min(off+fetchChunk, len(raw))]
		if err := d.ReadAt(win, p, addr+uint64(off)); err != nil {
			return nil, ddrFault(err)
		}
	}
	return raw, nil
}

// queueStream decodes the count instructions and sorts their indices into
// the queues that run them. On a fault it returns the index of the
// instruction that caused it.
func queueStream(count uint32, decode func(k uint32) (isa.Insn, error)) ([3][]uint32, uint32, *fault) {
	var queues [3][]uint32
	var last isa.Insn
	for k := range count {
		in, err := decode(k)
		if err != nil {
			return queues, k, faultf(alidnn.CauseIllegal, "%v", err)
		}
		q := in.Queue()
		queues[q] = append(queues[q], k)
		last = in
	}
	if last.Op != isa.OpFinish {
		return queues, count - 1, faultf(alidnn.CauseStream, "the stream ends with %s, not finish", last.Op)
	}
	return queues, 0, nil
}

// step runs one instruction's function and adds to the byte and MAC
// counters.
func (e *engine) step(in *isa.Insn, d ddrPort, win int, c *counters) *fault {
	switch in.Op {
	case isa.OpLoad:
		n, f := e.load(in, d, win)
		c.loadBytes += n
		return f
	case isa.OpStore:
		n, f := e.store(in, d, win)
		c.storeBytes += n
		return f
	case isa.OpGEMM:
		if f := e.gemm(in); f != nil {
			return f
		}
		if !in.Reset {
			c.macs += loopCount(in) * lanes * lanes
		}
	case isa.OpALU:
		return e.alu(in)
	case isa.OpPool:
		if in.Pool.Depthwise() {
			n, f := e.depthwise(in)
			c.macs += n
			return f
		}
		return e.pool(in)
	}
	return nil // FINISH and NOP only move tokens
}

// loopCount is the number of micro-op executions of a GEMM or ALU.
func loopCount(in *isa.Insn) uint64 {
	return uint64(in.IterOut) * uint64(in.IterIn) * uint64(in.UopEnd-in.UopBegin)
}

// cycles is the modeled duration of an instruction; see the package doc.
func (e *engine) cycles(in *isa.Insn) uint64 {
	switch in.Op {
	case isa.OpLoad, isa.OpStore:
		n := tileBytes(in, elemBytes(in.Mem, in.DType, in.Op == isa.OpStore))
		return uint64(e.cfg.DDRLatency) + ceilDiv(n, uint64(e.cfg.DDRBytesPerCycle))
	case isa.OpGEMM:
		if in.FP32 && !in.Reset {
			return loopCount(in) * uint64(e.cfg.FP32Rate)
		}
		return loopCount(in)
	case isa.OpALU:
		return loopCount(in)
	case isa.OpPool:
		if in.Pool.Depthwise() {
			return e.dwCycles(in)
		}
		outH := (uint64(in.InH)-uint64(in.WinH))/uint64(in.StrideH) + 1
		outW := (uint64(in.InW)-uint64(in.WinW))/uint64(in.StrideW) + 1
		return outH * outW * uint64(in.Channels) * uint64(in.WinH) * uint64(in.WinW)
	}
	return 1
}
