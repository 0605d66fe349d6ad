package sessions

import (
	"context"
	"fmt"
	"sort"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
)

// access is the DRAM span of instruction idx.
type access struct {
	idx     int
	op      isa.Opcode
	addr, n uint64
}

// vet checks what does not depend on the session's buffers: the length,
// the final FINISH and every instruction's encoding. It returns the
// encoded stream and the DRAM accesses.
func vet(insns []isa.Insn) ([]byte, []access, error) {
	if len(insns) == 0 || len(insns) > alidnn.MaxInsns {
		return nil, nil, fmt.Errorf("%w: %d instructions, want 1..%d", ErrRefused, len(insns), alidnn.MaxInsns)
	}
	if last := len(insns) - 1; insns[last].Op != isa.OpFinish {
		return nil, nil, fmt.Errorf("%w: instruction %d: %v: the stream must end with FINISH", ErrRefused, last, insns[last].Op)
	}
	code, err := isa.EncodeProgram(insns) // names the instruction
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrRefused, err)
	}
	var acc []access
	for k, in := range insns {
		if in.Op != isa.OpLoad && in.Op != isa.OpStore {
			continue
		}
		addr, n, ok := in.DRAMSpan()
		if !ok { // Encode accepted it, so this cannot happen; refuse anyway
			return nil, nil, fmt.Errorf("%w: instruction %d: %v: no DRAM span", ErrRefused, k, in.Op)
		}
		acc = append(acc, access{k, in.Op, addr, n})
	}
	return code, acc, nil
}

// owner returns the buffer holding all of [addr, addr+n), or nil. e.mu held.
func (s *Session) owner(addr, n uint64) *buffer {
	k := sort.Search(len(s.byAddr), func(i int) bool { return s.byAddr[i].Addr > addr }) - 1
	if k < 0 {
		return nil
	}
	b := s.byAddr[k]
	if addr-b.Addr >= b.Size || n > b.Size-(addr-b.Addr) {
		return nil
	}
	return b
}

// Program checks insns (every DRAM access inside one of the session's
// buffers, the stream ending with FINISH) and uploads them to memory of the
// session that no instruction may touch. It returns the program's handle.
//
// A refusal wraps ErrRefused and names the instruction and the reason. A
// full program area is ErrQuota. The buffers the program reaches cannot be
// freed until the program is.
func (s *Session) Program(ctx context.Context, insns []isa.Insn) (Handle, error) {
	e := s.e
	// Refuse what cannot fit before encoding it.
	if area := s.region.end - s.prog; uint64(len(insns)) > area/isa.InsnBytes {
		return 0, fmt.Errorf("sessions: %d instructions do not fit the %d-byte program area: %w", len(insns), area, ErrQuota)
	}
	code, accs, err := vet(insns)
	if err != nil {
		return 0, err
	}
	e.mu.Lock()
	if s.closed {
		e.mu.Unlock()
		return 0, ErrClosed
	}
	p := &program{count: len(insns), size: roundUp(uint64(len(code)), bufAlign), writes: writes(insns, &e.sram)}
	seen := map[*buffer]bool{}
	for _, a := range accs {
		b := s.owner(a.addr, a.n)
		if b == nil {
			e.mu.Unlock()
			return 0, fmt.Errorf("%w: instruction %d: %v of DRAM [%#x, %#x) is not inside one buffer of this session",
				ErrRefused, a.idx, a.op, a.addr, a.addr+a.n)
		}
		if !seen[b] {
			seen[b] = true
			p.bufs = append(p.bufs, b)
		}
	}
	addr, ok := s.progs.alloc(p.size, bufAlign)
	if !ok {
		e.mu.Unlock()
		return 0, fmt.Errorf("sessions: no free %d bytes in the %d-byte program area: %w", p.size, s.region.end-s.prog, ErrQuota)
	}
	p.addr = addr
	for _, b := range p.bufs {
		b.refs++ // the buffers stay while the program is uploaded
	}
	s.io.Add(1)
	e.mu.Unlock()

	err = e.write(ctx, addr, code)

	e.mu.Lock()
	defer e.mu.Unlock()
	defer s.io.Done()
	if err == nil && s.closed {
		err = ErrClosed
	}
	if err != nil {
		for _, b := range p.bufs {
			b.refs--
		}
		if !s.closed {
			s.progs.release(p.addr, p.size)
		}
		return 0, err
	}
	p.h = s.newHandle()
	s.programs[p.h] = p
	return p.h, nil
}
