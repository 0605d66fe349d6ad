package sim_test

import (
	"bytes"
	"context"
	"slices"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/loopback"
	"github.com/fpga-faas/faas/shell"
	"github.com/fpga-faas/faas/shell/bitfile"
	"github.com/fpga-faas/faas/shell/sim"
)

// maxFuzzStream bounds the stream a fuzz input streams, so that 4-byte
// chunks stay quick.
const maxFuzzStream = 64 << 10

// fuzzSeeds are the seed streams of FuzzPRStream: valid bitstreams of the
// registered roles and the classic ways to break one.
func fuzzSeeds(t testing.TB) map[string][]byte {
	lb, err := loopback.Bitstream(part, 256)
	if err != nil {
		t.Fatal(err)
	}
	beta := bitstreamRem(t, betaName, part, 200, 3)
	flip := func(b []byte, off int) []byte {
		b = slices.Clone(b)
		b[off] ^= 0x40
		return b
	}
	noSync := slices.Clone(lb)
	i := bytes.Index(noSync, []byte{0xaa, 0x99, 0x55, 0x66})
	copy(noSync[i:], []byte{0x55, 0x99, 0xaa, 0x66})
	// A header of a length multiple of 4 declaring one byte of data: 4-byte
	// chunks end exactly at the header, one chunk runs into the padding.
	var shortHdr []byte
	for k := 0; len(shortHdr)%4 != 0 || k == 0; k++ {
		short := header(alphaName, part, "Pad="+string(bytes.Repeat([]byte{'x'}, k)))
		short.DataLen = 1
		if shortHdr, err = short.MarshalBinary(); err != nil {
			t.Fatal(err)
		}
	}
	return map[string][]byte{
		"loopback":     lb,
		"beta":         beta,
		"alpha":        bitstream(t, alphaName, part, 64),
		"broken":       bitstream(t, brokenName, part, 64),
		"unknown":      bitstream(t, "gamma", part, 64),
		"truncated":    lb[:len(lb)-13],
		"bad CRC":      flip(lb, len(lb)-100),
		"wrong part":   bitstream(t, betaName, shell.PartKU15P, 64),
		"no sync":      noSync,
		"not partial":  bytes.Replace(slices.Clone(beta), []byte("PARTIAL=TRUE"), []byte("PARTIAL=NONE"), 1),
		"overflow":     append(slices.Clone(beta), 0, 0, 0, 0, 0, 0, 0, 1),
		"header only":  lb[:120],
		"short data":   append(shortHdr, 0xaa),
		"empty":        {},
		"garbage":      bytes.Repeat([]byte{0xaa, 0x99, 0x55, 0x66}, 300),
		"bad preamble": flip(lb, 3),
	}
}

// fuzzChunks turns the chunking input into chunk sizes for a stream of n
// bytes: each byte b is a chunk of 4(b+1) bytes, 0xff the rest of the
// stream, cycling; no bytes means one chunk.
func fuzzChunks(spec []byte, n int) []int {
	var sizes []int
	for off, i := 0, 0; off < n; i++ {
		size := n - off
		if len(spec) > 0 && spec[i%len(spec)] != 0xff {
			size = min(size, 4*(int(spec[i%len(spec)])+1))
		}
		sizes = append(sizes, size)
		off += size
	}
	return sizes
}

// fuzzBoard is a board for one fuzz input: alpha loaded on chip 0 with its
// SCRATCH set, beta on chip 1.
type fuzzBoard struct {
	b         *sim.Board
	log       *roleLog
	reg       *sim.Registry
	c0, c1    *sim.Chip
	alphaRole *probeRole
	preloaded int // roles instantiated by newFuzzBoard
}

func newFuzzBoard(t *testing.T, alpha, beta []byte) *fuzzBoard {
	log := &roleLog{}
	reg := testRegistry(t, log)
	if err := reg.Register(probeModel(log, loopback.Name, loopback.ID, loopback.Version)); err != nil {
		t.Fatal(err)
	}
	b, err := sim.NewBoard(sim.Config{DDRSize: 1 << 20, Roles: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	fb := &fuzzBoard{b: b, log: log, reg: reg, c0: b.Chip(0), c1: b.Chip(1)}
	mustProgram(t, fb.c0, alpha)
	fb.alphaRole = log.last(t)
	wr(t, fb.c0, shell.RoleBase+probeScratch, 0x5eed)
	mustProgram(t, fb.c1, beta)
	fb.preloaded = len(log.all())
	return fb
}

// stream runs BEGIN, the stream in the given chunks (the last padded with
// zeros to the DMA alignment) and END on chip 0, and recouples.
func (fb *fuzzBoard) stream(t *testing.T, data []byte, sizes []int) (uint32, shell.PRCause) {
	c := fb.c0
	prBegin(t, c)
	off := 0
	for _, n := range sizes {
		p := data[off : off+n]
		off += n
		if pad := len(p) % shell.DMAAlign; pad != 0 {
			if off != len(data) {
				t.Fatalf("chunk of %d bytes inside the stream", n)
			}
			p = append(slices.Clone(p), make([]byte, shell.DMAAlign-pad)...)
		}
		if err := c.H2C(context.Background(), 0, p, shell.PRStreamAddr); err != nil {
			t.Fatalf("H2C of a %d-byte chunk at %d to the PR port: %v", len(p), off-n, err)
		}
	}
	state, cause := prEnd(t, c)
	wr(t, c, shell.RegPRControl, 0)
	return state, cause
}

// snapshot reads every shell register of c (all eight windows' too) and
// the start of its role window.
func snapshot(t *testing.T, c *sim.Chip) []uint32 {
	var s []uint32
	for _, r := range shell.Registers {
		for i := range r.Count {
			s = append(s, rd(t, c, uint64(r.Offset)+4*uint64(i)))
		}
	}
	for off := uint64(shell.RegWindowBase); off < uint64(shell.WindowBase(shell.Windows)); off += 4 {
		s = append(s, rd(t, c, off))
	}
	for off := uint64(0); off < 0x10; off += 4 {
		s = append(s, rd(t, c, shell.RoleBase+off))
	}
	return append(s, uint32(c.DDRResident()))
}

func FuzzPRStream(f *testing.F) {
	seeds := fuzzSeeds(f)
	alpha, beta := seeds["alpha"], seeds["beta"]
	for _, s := range seeds {
		for _, chunks := range [][]byte{nil, {0}, {2}, {0, 5, 0xff}, {1, 0, 0x40}} {
			f.Add(s, chunks)
		}
	}
	f.Fuzz(func(t *testing.T, data, chunks []byte) {
		if len(data) > maxFuzzStream {
			data = data[:maxFuzzStream]
		}
		sizes := fuzzChunks(chunks, len(data))
		fb := newFuzzBoard(t, alpha, beta)
		before := snapshot(t, fb.c1)
		drainIRQs(fb.c0)
		drainIRQs(fb.c1)

		state, cause := fb.stream(t, data, sizes)
		c := fb.c0

		if state != shell.PRDone && state != shell.PRError {
			t.Fatalf("PR state %d after END, want done or error", state)
		}
		if !slices.Contains(shell.PRCauses(), cause) {
			t.Fatalf("undefined PR cause %d", cause)
		}
		if (state == shell.PRDone) != (cause == shell.PROK) {
			t.Fatalf("state %d with cause %v", state, cause)
		}
		if !fired(c, shell.IRQPR) {
			t.Error("no PR interrupt")
		}
		// Until the header is in, the controller cannot tell padding from
		// the file: PR_BYTES may count the padding, never more.
		streamed := (len(data) + shell.DMAAlign - 1) / shell.DMAAlign * shell.DMAAlign
		if n := rd(t, c, shell.RegPRBytes); int(n) > streamed {
			t.Errorf("PR_BYTES %d of a %d-byte stream", n, streamed)
		}

		if state == shell.PRError {
			if c.PRError() == nil {
				t.Error("PRError nil after an error")
			}
			if v := rd(t, c, shell.RegRoleID); v != alphaID {
				t.Errorf("ROLE_ID %#x after a failed PR (%v), want alpha", v, cause)
			}
			if v := rd(t, c, shell.RoleBase+probeMagic); v != alphaID {
				t.Errorf("old role's MAGIC %#x after a failed PR", v)
			}
			if v := rd(t, c, shell.RoleBase+probeScratch); v != 0x5eed {
				t.Errorf("old role's SCRATCH %#x after a failed PR", v)
			}
			if fb.alphaRole.closed.Load() || len(fb.log.all()) != fb.preloaded {
				t.Error("a failed PR closed the old role or left a new one")
			}
			if v := rd(t, c, shell.RegPRCount); v != 1 {
				t.Errorf("PR_COUNT %d after a failed PR", v)
			}
		} else {
			h, err := bitfile.ReadHeader(bytes.NewReader(data))
			if err != nil {
				t.Fatalf("a stream with an unreadable header loaded: %v", err)
			}
			model, ok := fb.reg.Lookup(h.DesignName())
			if !ok {
				t.Fatalf("design %q loaded without a model", h.DesignName())
			}
			if v := rd(t, c, shell.RegRoleID); v != model.ID {
				t.Errorf("ROLE_ID %#x, want %#x of %q", v, model.ID, model.Name)
			}
			if v := rd(t, c, shell.RegRoleVersion); v != model.Version {
				t.Errorf("ROLE_VERSION %#x, want %#x", v, model.Version)
			}
			if name := words(t, c, shell.RegRoleName, 6); string(bytes.TrimRight(name, "\x00")) != model.Name {
				t.Errorf("ROLE_NAME %q, want %q", name, model.Name)
			}
			if v := rd(t, c, shell.RoleBase+probeMagic); v != model.ID {
				t.Errorf("new role's MAGIC %#x", v)
			}
			if !fb.alphaRole.closed.Load() {
				t.Error("the replaced role was not closed")
			}
			size := 13 + 4*3 + len(h.Design) + 1 + len(h.Part) + 1 + len(h.Date) + 1 + len(h.Time) + 1 + 5 + int(h.DataLen)
			// What followed the file was alignment padding only.
			if v := rd(t, c, shell.RegPRBytes); int(v) != size || size > len(data) || streamed-size >= shell.DMAAlign {
				t.Errorf("PR_BYTES %d of a %d-byte stream, file size %d", v, len(data), size)
			}
			if v := rd(t, c, shell.RegPRCount); v != 2 {
				t.Errorf("PR_COUNT %d", v)
			}
		}

		// The chunking does not matter: the same stream in one chunk ends
		// the same way.
		if len(sizes) > 1 {
			ref := newFuzzBoard(t, alpha, beta)
			if rs, rc := ref.stream(t, data, fuzzChunks(nil, len(data))); rs != state || rc != cause {
				t.Errorf("chunks %v: state %d cause %v; in one chunk: state %d cause %v", sizes, state, cause, rs, rc)
			}
		}

		// Chip 1 saw none of it.
		if after := snapshot(t, fb.c1); !slices.Equal(before, after) {
			for i := range before {
				if before[i] != after[i] {
					t.Errorf("chip 1 changed: snapshot word %d %#x -> %#x", i, before[i], after[i])
				}
			}
		}
		for l := range shell.IRQLines {
			if fired(fb.c1, l) {
				t.Errorf("chip 1 IRQ %d fired", l)
			}
		}

		fb.b.Close()
		for _, r := range fb.log.all() {
			if !r.closed.Load() {
				t.Errorf("role %#x still running after Board.Close", r.id)
			}
		}
	})
}

// TestFuzzSeedsAreMeaningful checks that the seeds still say what their
// names say, so that the fuzzer starts from valid bitstreams and from each
// kind of broken one.
func TestFuzzSeedsAreMeaningful(t *testing.T) {
	seeds := fuzzSeeds(t)
	for name, want := range map[string]shell.PRCause{
		"loopback": shell.PROK, "beta": shell.PROK, "alpha": shell.PROK,
		"broken": shell.PRRoleFailed, "unknown": shell.PRUnknownRole, "truncated": shell.PRTruncated,
		"bad CRC": shell.PRBadCRC, "wrong part": shell.PRPartMismatch, "no sync": shell.PRNoSync,
		"not partial": shell.PRNotPartial, "overflow": shell.PROverflow, "header only": shell.PRTruncated,
		"short data": shell.PRNoSync, "empty": shell.PRTruncated, "garbage": shell.PRBadHeader,
		"bad preamble": shell.PRBadHeader,
	} {
		fb := newFuzzBoard(t, seeds["alpha"], seeds["beta"])
		if _, cause := fb.stream(t, seeds[name], fuzzChunks([]byte{0}, len(seeds[name]))); cause != want {
			t.Errorf("seed %q: cause %v, want %v", name, cause, want)
		}
	}
	if got := fuzzChunks([]byte{0, 0xff}, 20); !slices.Equal(got, []int{4, 16}) {
		t.Errorf("chunks %v", got)
	}
	if got := fuzzChunks([]byte{2}, 30); !slices.Equal(got, []int{12, 12, 6}) {
		t.Errorf("chunks %v", got)
	}
}
