package sessions_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/services/agent/sessions"
	"github.com/fpga-faas/faas/shell"
)

func TestAllocWriteRead(t *testing.T) {
	e, _ := newEngine(t, sessions.Config{})
	s := open(t, e, "a")
	ctx := context.Background()

	b := alloc(t, s, 1000)
	if b.Size != 1024 || b.Addr%64 != 0 || b.Handle == 0 {
		t.Fatalf("Alloc(1000) = %+v, want 1024 bytes 64-aligned", b)
	}
	data := make([]byte, b.Size)
	for i := range data {
		data[i] = byte(i*7 + 1)
	}
	if err := s.Write(ctx, b.Handle, 0, data); err != nil {
		t.Fatal(err)
	}
	// Unaligned offsets and lengths go through whole words on the chip.
	if err := s.Write(ctx, b.Handle, 3, []byte{0xa1, 0xa2, 0xa3, 0xa4, 0xa5}); err != nil {
		t.Fatal(err)
	}
	copy(data[3:], []byte{0xa1, 0xa2, 0xa3, 0xa4, 0xa5})
	got := make([]byte, b.Size)
	if err := s.Read(ctx, b.Handle, 0, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("read back differs from what was written")
	}
	part := make([]byte, 6)
	if err := s.Read(ctx, b.Handle, 1, part); err != nil || !bytes.Equal(part, data[1:7]) {
		t.Fatalf("unaligned read = %x, %v; want %x", part, err, data[1:7])
	}

	for _, tc := range []struct {
		off uint64
		n   int
	}{{b.Size - 1, 2}, {b.Size + 1, 0}, {0, int(b.Size) + 1}, {1<<64 - 1, 2}} {
		if err := s.Write(ctx, b.Handle, tc.off, make([]byte, tc.n)); !errors.Is(err, sessions.ErrOutOfRange) {
			t.Errorf("Write of %d bytes at %d: %v, want ErrOutOfRange", tc.n, tc.off, err)
		}
		if err := s.Read(ctx, b.Handle, tc.off, make([]byte, tc.n)); !errors.Is(err, sessions.ErrOutOfRange) {
			t.Errorf("Read of %d bytes at %d: %v, want ErrOutOfRange", tc.n, tc.off, err)
		}
	}

	// Freed memory reads as zeros when it is allocated again.
	if err := s.Free(b.Handle); err != nil {
		t.Fatal(err)
	}
	b2 := alloc(t, s, 1024)
	if b2.Addr != b.Addr {
		t.Fatalf("first fit: %#x, want the freed %#x", b2.Addr, b.Addr)
	}
	if err := s.Read(ctx, b2.Handle, 0, got); err != nil || !bytes.Equal(got, make([]byte, len(got))) {
		t.Fatalf("reallocated buffer not zero (%v)", err)
	}
}

func TestBadHandles(t *testing.T) {
	e, _ := newEngine(t, sessions.Config{})
	a, b := open(t, e, "a"), open(t, e, "b")
	ctx := context.Background()
	ab, bb := alloc(t, a, 64), alloc(t, b, 64)
	freed := alloc(t, a, 64)
	if err := a.Free(freed.Handle); err != nil {
		t.Fatal(err)
	}
	p := program(t, a, finishOnly)
	for name, h := range map[string]sessions.Handle{
		"forged":            ab.Handle ^ 1,
		"zero":              0,
		"freed":             freed.Handle,
		"another session's": bb.Handle,
	} {
		if err := a.Write(ctx, h, 0, make([]byte, 4)); !errors.Is(err, sessions.ErrBadHandle) {
			t.Errorf("Write with a %s handle: %v", name, err)
		}
		if err := a.Read(ctx, h, 0, make([]byte, 4)); !errors.Is(err, sessions.ErrBadHandle) {
			t.Errorf("Read with a %s handle: %v", name, err)
		}
		if err := a.Free(h); !errors.Is(err, sessions.ErrBadHandle) {
			t.Errorf("Free of a %s handle: %v", name, err)
		}
		if err := a.Submit(h, 1); !errors.Is(err, sessions.ErrBadHandle) {
			t.Errorf("Submit of a %s handle: %v", name, err)
		}
	}
	// A buffer is not a program, nor a program another session's.
	if err := a.Submit(ab.Handle, 1); !errors.Is(err, sessions.ErrBadHandle) {
		t.Errorf("Submit of a buffer: %v", err)
	}
	if err := b.Submit(p, 1); !errors.Is(err, sessions.ErrBadHandle) {
		t.Errorf("Submit of another session's program: %v", err)
	}
	if err := a.Free(p); err != nil {
		t.Fatal(err)
	}
	if err := a.Submit(p, 1); !errors.Is(err, sessions.ErrBadHandle) {
		t.Errorf("Submit of a freed program: %v", err)
	}
}

func TestMemoryQuota(t *testing.T) {
	e, _ := newEngine(t, sessions.Config{Quotas: map[string]sessions.Quota{"small": {Memory: 1 << 20}}})
	s1, s2 := open(t, e, "small"), open(t, e, "small")
	b := alloc(t, s1, 1<<20)
	if _, err := s1.Alloc(64); !errors.Is(err, sessions.ErrQuota) {
		t.Fatalf("Alloc beyond the quota: %v, want ErrQuota", err)
	}
	// The quota is the tenant's, across its sessions.
	if _, err := s2.Alloc(64); !errors.Is(err, sessions.ErrQuota) {
		t.Fatalf("Alloc in a second session beyond the tenant's quota: %v, want ErrQuota", err)
	}
	if _, err := s1.Alloc(1 << 62); !errors.Is(err, sessions.ErrQuota) {
		t.Fatalf("Alloc(2^62): %v, want ErrQuota", err)
	}
	if u := e.Usage(); len(u) != 1 || u[0].Tenant != "small" || u[0].Memory != 1<<20 || u[0].Sessions != 2 {
		t.Fatalf("Usage = %+v", u)
	}
	if err := s1.Free(b.Handle); err != nil {
		t.Fatal(err)
	}
	alloc(t, s2, 512<<10)
	alloc(t, s1, 512<<10)
	// Another tenant has its own (default) quota.
	alloc(t, open(t, e, "other"), 1<<20)
}

func TestWindowExhaustion(t *testing.T) {
	e, chip := newEngine(t, sessions.Config{})
	var all []*sessions.Session
	used := map[int]bool{}
	for range shell.Windows - 1 {
		s := open(t, e, "t")
		r := s.Region()
		if r.Window == 0 || used[r.Window] {
			t.Fatalf("session got window %d (used %v)", r.Window, used)
		}
		used[r.Window] = true
		for _, o := range all {
			if or := o.Region(); r.Base < or.Limit && or.Base < r.Limit {
				t.Fatalf("regions overlap: %+v and %+v", r, or)
			}
		}
		if r.Limit > chip.DDRSize() || r.Programs <= r.Base || r.Programs >= r.Limit {
			t.Fatalf("region %+v", r)
		}
		all = append(all, s)
	}
	if _, err := e.Open("t"); !errors.Is(err, sessions.ErrQuota) {
		t.Fatalf("Open with every window in use: %v, want ErrQuota", err)
	}
	w := all[2].Region().Window
	if err := all[2].Close(); err != nil {
		t.Fatal(err)
	}
	s := open(t, e, "t")
	if s.Region().Window != w {
		t.Fatalf("new session got window %d, want the freed %d", s.Region().Window, w)
	}
}

func TestAllocCoalesces(t *testing.T) {
	e, _ := newEngine(t, sessions.Config{Quotas: map[string]sessions.Quota{"a": {Memory: 4096}}})
	s := open(t, e, "a")
	var bs []sessions.Buffer
	for range 4 {
		bs = append(bs, alloc(t, s, 1024))
	}
	if _, err := s.Alloc(64); !errors.Is(err, sessions.ErrQuota) {
		t.Fatalf("Alloc in a full region: %v", err)
	}
	for _, k := range []int{2, 1} {
		if err := s.Free(bs[k].Handle); err != nil {
			t.Fatal(err)
		}
	}
	if b := alloc(t, s, 2048); b.Addr != bs[1].Addr {
		t.Fatalf("2 KiB after freeing two neighbours at %#x, want %#x", b.Addr, bs[1].Addr)
	} else if err := s.Free(b.Handle); err != nil {
		t.Fatal(err)
	}
	for _, k := range []int{0, 3} {
		if err := s.Free(bs[k].Handle); err != nil {
			t.Fatal(err)
		}
	}
	if b := alloc(t, s, 4096); b.Addr != s.Region().Base {
		t.Fatalf("whole region at %#x, want %#x", b.Addr, s.Region().Base)
	}
}

func TestProgramAreaFull(t *testing.T) {
	e, _ := newEngine(t, sessions.Config{ProgramBytes: 4096})
	s := open(t, e, "a")
	big := make([]isa.Insn, 4096/isa.InsnBytes+1)
	big[len(big)-1] = isa.Insn{Op: isa.OpFinish}
	for k := range len(big) - 1 {
		big[k] = isa.Insn{Op: isa.OpNop, NopQueue: isa.QueueCompute}
	}
	if _, err := s.Program(context.Background(), big); !errors.Is(err, sessions.ErrQuota) {
		t.Fatalf("program larger than the area: %v, want ErrQuota", err)
	}
	var ps []sessions.Handle
	for range 4096 / 64 {
		ps = append(ps, program(t, s, finishOnly))
	}
	if _, err := s.Program(context.Background(), finishOnly); !errors.Is(err, sessions.ErrQuota) {
		t.Fatalf("program in a full area: %v, want ErrQuota", err)
	}
	if err := s.Free(ps[7]); err != nil {
		t.Fatal(err)
	}
	if c := run(t, s, program(t, s, finishOnly), 5); c.Err != nil {
		t.Fatal(c.Err)
	}
}

// TestCloseZeroesWhatWasWritten: Close zeroes every byte the session
// wrote — buffers still held, buffers freed before, programs — though it
// zeroes only the spans the session used, not the whole region.
func TestCloseZeroesWhatWasWritten(t *testing.T) {
	e, chip := newEngine(t, sessions.Config{})
	ctx := context.Background()
	s := open(t, e, "a")
	r := s.Region()
	secret := bytes.Repeat([]byte("secret!!"), 1024)
	var bs []sessions.Buffer
	for range 3 {
		b := alloc(t, s, uint64(len(secret)))
		if err := s.Write(ctx, b.Handle, 0, secret); err != nil {
			t.Fatal(err)
		}
		bs = append(bs, b)
	}
	if err := s.Free(bs[2].Handle); err != nil { // the highest, freed
		t.Fatal(err)
	}
	program(t, s, finishOnly)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	region := make([]byte, r.Limit-r.Base)
	if err := chip.Read(ctx, r.Base, region); err != nil {
		t.Fatal(err)
	}
	if i := bytes.IndexFunc(region, func(c rune) bool { return c != 0 }); i >= 0 {
		t.Fatalf("byte %#x of the closed session's region is not zero", r.Base+uint64(i))
	}
}
