package sessions_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/services/agent/sessions"
)

// gemmProgram computes out = x · wᵀ + 5 for one 16-lane int8 input vector
// x and a 16×16 int8 weight matrix w, as int32: LOADs of micro-ops, input
// and weights, GEMM, an ALU add and a STORE.
func gemmProgram(tb testing.TB, uop, x, w, out uint64) []isa.Insn {
	return asm(tb, fmt.Sprintf(`
load.uop int32 sram=0 dram=%#x y=1 x=1 stride=1
load.inp int8 sram=0 dram=%#x y=1 x=1 stride=1
load.wgt int8 sram=0 dram=%#x y=1 x=1 stride=1 ; push_next
gemm reset uop=0:1 iter=1,1 dst=0,0 src=0,0 wgt=0,0 ; pop_prev
gemm uop=0:1 iter=1,1 dst=0,0 src=0,0 wgt=0,0
alu.add uop=0:1 iter=1,1 dst=0,0 src=0,0 imm=5 ; push_next
store.acc int32 sram=0 dram=%#x y=1 x=1 stride=1 ; pop_prev push_prev
finish job=1 ; pop_next
`, uop, x, w, out))
}

// gemmJob is a session's buffers for gemmProgram and the expected result.
type gemmJob struct {
	prog sessions.Handle
	out  sessions.Buffer
	want []int32
}

func setupGEMM(tb testing.TB, s *sessions.Session, seed int) gemmJob {
	tb.Helper()
	ctx := context.Background()
	ub, xb, wb, ob := alloc(tb, s, 64), alloc(tb, s, 64), alloc(tb, s, 256), alloc(tb, s, 64)
	u, err := isa.GemmUop{}.Encode()
	if err != nil {
		tb.Fatal(err)
	}
	x, w := make([]byte, 16), make([]byte, 256)
	for i := range x {
		x[i] = byte(int8(i - 8 + seed))
	}
	for i := range w {
		w[i] = byte(int8(i%13 - 6 - seed))
	}
	want := make([]int32, 16)
	for o := range 16 {
		want[o] = 5
		for i := range 16 {
			want[o] += int32(int8(x[i])) * int32(int8(w[o*16+i]))
		}
	}
	for _, wr := range []struct {
		b sessions.Buffer
		p []byte
	}{{ub, le32(int32(u))}, {xb, x}, {wb, w}} {
		if err := s.Write(ctx, wr.b.Handle, 0, wr.p); err != nil {
			tb.Fatal(err)
		}
	}
	return gemmJob{prog: program(tb, s, gemmProgram(tb, ub.Addr, xb.Addr, wb.Addr, ob.Addr)), out: ob, want: want}
}

func (g gemmJob) check(tb testing.TB, s *sessions.Session) {
	tb.Helper()
	got := make([]byte, 64)
	if err := s.Read(context.Background(), g.out.Handle, 0, got); err != nil {
		tb.Fatal(err)
	}
	if fmt.Sprint(i32s(got)) != fmt.Sprint(g.want) {
		tb.Fatalf("result %v, want %v", i32s(got), g.want)
	}
}

func TestComputation(t *testing.T) {
	e, _ := newEngine(t, sessions.Config{})
	s := open(t, e, "a")
	g := setupGEMM(t, s, 0)
	c := run(t, s, g.prog, 99)
	if c.Err != nil {
		t.Fatal(c.Err)
	}
	if c.Stats.MACs == 0 || c.Stats.Insns != 8 || c.Stats.JobID != 1 {
		t.Errorf("stats %+v", c.Stats)
	}
	g.check(t, s)
	if u := e.Usage(); len(u) != 1 || u[0].Jobs != 1 || u[0].BusyNS == 0 {
		t.Errorf("Usage = %+v", u)
	}
}

func TestProgramRefusals(t *testing.T) {
	e, _ := newEngine(t, sessions.Config{})
	a, b := open(t, e, "a"), open(t, e, "b")
	ctx := context.Background()
	ab, ab2 := alloc(t, a, 4096), alloc(t, a, 4096)
	bb := alloc(t, b, 4096)
	secret := bytes.Repeat([]byte("b's secret data!"), 256)
	if err := b.Write(ctx, bb.Handle, 0, secret); err != nil {
		t.Fatal(err)
	}
	ar, br := a.Region(), b.Region()
	if ab2.Addr != ab.Addr+ab.Size {
		t.Fatalf("buffers not adjacent: %+v %+v", ab, ab2)
	}

	ok := []string{
		fmt.Sprintf("load.inp int8 sram=0 dram=%#x y=1 x=1 stride=1", ab.Addr),
		fmt.Sprintf("load.inp int8 sram=0 dram=%#x y=4 x=16 stride=64", ab.Addr),              // ends at the buffer's end
		fmt.Sprintf("store.acc int32 sram=0 dram=%#x y=1 x=1 stride=1", ab2.Addr+ab2.Size-64), // last 64 bytes
	}
	for _, src := range ok {
		if _, err := a.Program(ctx, asm(t, src+"\nfinish job=1")); err != nil {
			t.Errorf("%s: %v", src, err)
		}
	}

	refused := map[string]string{
		"b's buffer":              fmt.Sprintf("load.inp int8 sram=0 dram=%#x y=1 x=1 stride=1", bb.Addr),
		"store into b's buffer":   fmt.Sprintf("store.acc int32 sram=0 dram=%#x y=1 x=1 stride=1", bb.Addr),
		"b's window":              fmt.Sprintf("load.acc int32 sram=0 dram=%#x y=1 x=1 stride=1", br.Base),
		"b's program area":        fmt.Sprintf("load.uop int32 sram=0 dram=%#x y=1 x=1 stride=1", br.Programs),
		"a's own program area":    fmt.Sprintf("load.uop int32 sram=0 dram=%#x y=1 x=4 stride=4", ar.Programs),
		"store into a's programs": fmt.Sprintf("store.acc int8 sram=0 dram=%#x y=1 x=1 stride=1", ar.Limit-16),
		"a's free memory":         fmt.Sprintf("load.inp int8 sram=0 dram=%#x y=1 x=1 stride=1", ab2.Addr+ab2.Size),
		"beyond DDR":              fmt.Sprintf("load.inp int8 sram=0 dram=%#x y=1 x=1 stride=1", uint64(1)<<34),
		"straddling a's end":      fmt.Sprintf("load.inp int8 sram=0 dram=%#x y=1 x=2 stride=2", ab2.Addr+ab2.Size-16),
		"straddling two buffers":  fmt.Sprintf("load.inp int8 sram=0 dram=%#x y=2 x=1 stride=1", ab.Addr+ab.Size-16),
		"rows striding out":       fmt.Sprintf("load.inp int8 sram=0 dram=%#x y=2 x=1 stride=256", ab.Addr),
		"fp32 elements too wide":  fmt.Sprintf("load.wgt fp32 sram=0 dram=%#x y=1 x=5 stride=5", ab2.Addr),
		"just below a's programs": fmt.Sprintf("load.inp int8 sram=0 dram=%#x y=1 x=1 stride=1", ar.Programs-16),
		"param lanes are 8 bytes": fmt.Sprintf("load.param int32 sram=0 dram=%#x y=1 x=33 stride=33", ab2.Addr),
		"store int32 is 64 bytes": fmt.Sprintf("store.acc int32 sram=0 dram=%#x y=1 x=1 stride=1", ab2.Addr+ab2.Size-32),
	}
	for name, src := range refused {
		prog := asm(t, "nop.compute\n"+src+"\nfinish job=1")
		_, err := a.Program(ctx, prog)
		if !errors.Is(err, sessions.ErrRefused) || !strings.Contains(err.Error(), "instruction 1") {
			t.Errorf("%s (%s): %v, want ErrRefused naming instruction 1", name, src, err)
		}
	}

	for name, prog := range map[string][]isa.Insn{
		"empty":            nil,
		"no final FINISH":  asm(t, "finish job=1\nnop.compute"),
		"invalid encoding": {{Op: isa.OpLoad, Mem: isa.MemInp, YSize: 0, XSize: 1, XStride: 1}, {Op: isa.OpFinish}},
		"illegal opcode":   {{Op: 7}, {Op: isa.OpFinish}},
	} {
		if _, err := a.Program(ctx, prog); !errors.Is(err, sessions.ErrRefused) {
			t.Errorf("%s: %v, want ErrRefused", name, err)
		}
	}

	got := make([]byte, len(secret))
	if err := b.Read(ctx, bb.Handle, 0, got); err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("b's data changed (%v)", err)
	}
}

// TestWindowIsSecondLine plays a compromised agent whose program check let
// through a STORE into another session's buffer: the instruction stream is
// written straight into a's program area and run with a's window. The shell
// refuses the access and b's data stays as it was.
func TestWindowIsSecondLine(t *testing.T) {
	e, chip := newEngine(t, sessions.Config{})
	a, b := open(t, e, "a"), open(t, e, "b")
	ctx := context.Background()
	bb := alloc(t, b, 4096)
	secret := bytes.Repeat([]byte{0x5a}, 4096)
	if err := b.Write(ctx, bb.Handle, 0, secret); err != nil {
		t.Fatal(err)
	}
	evil := asm(t, fmt.Sprintf(`
store.acc int32 sram=0 dram=%#x y=1 x=1 stride=1
finish job=1
`, bb.Addr))
	if _, err := a.Program(ctx, evil); !errors.Is(err, sessions.ErrRefused) {
		t.Fatalf("agent check: %v, want ErrRefused", err)
	}
	code, err := isa.EncodeProgram(evil)
	if err != nil {
		t.Fatal(err)
	}
	ar := a.Region()
	at := ar.Limit - 4096 // unused top of a's program area
	if err := chip.Write(ctx, at, code); err != nil {
		t.Fatal(err)
	}
	_, err = alidnn.Exec(ctx, chip, alidnn.Run{Insns: at, Count: len(evil), Window: ar.Window})
	if !isEngineError(err, alidnn.CauseWindow) {
		t.Fatalf("run of the forged stream: %v, want a window fault", err)
	}
	got := make([]byte, len(secret))
	if err := b.Read(ctx, bb.Handle, 0, got); err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("b's data changed (%v)", err)
	}
	// The engine still serves a afterwards.
	if c := run(t, a, program(t, a, finishOnly), 1); c.Err != nil {
		t.Fatal(c.Err)
	}
}

func TestFreeInUse(t *testing.T) {
	chip := newChip(t)
	// No Run: submitted jobs stay queued.
	e, err := sessions.New(sessions.Config{Chip: chip, DDRSize: chip.DDRSize(), MaxJobs: 3})
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, e, "a")
	buf := alloc(t, s, 64)
	p := program(t, s, asm(t, fmt.Sprintf("load.inp int8 sram=0 dram=%#x y=1 x=1 stride=1\nfinish job=1", buf.Addr)))
	if err := s.Free(buf.Handle); !errors.Is(err, sessions.ErrInUse) {
		t.Fatalf("Free of a buffer a program uses: %v, want ErrInUse", err)
	}
	for id := range 3 {
		if err := s.Submit(p, uint64(id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Submit(p, 3); !errors.Is(err, sessions.ErrQuota) {
		t.Fatalf("Submit beyond MaxJobs: %v, want ErrQuota", err)
	}
	if err := s.Free(p); !errors.Is(err, sessions.ErrInUse) {
		t.Fatalf("Free of a program with queued jobs: %v, want ErrInUse", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	for c := range s.Completions() {
		if !errors.Is(c.Err, sessions.ErrClosed) {
			t.Errorf("job %d: %v, want ErrClosed", c.Job, c.Err)
		}
		ids = append(ids, c.Job)
	}
	if fmt.Sprint(ids) != "[0 1 2]" {
		t.Fatalf("completions %v", ids)
	}
	if err := s.Submit(p, 9); !errors.Is(err, sessions.ErrClosed) {
		t.Fatalf("Submit after Close: %v", err)
	}

	s2 := open(t, e, "a")
	buf = alloc(t, s2, 64)
	p = program(t, s2, asm(t, fmt.Sprintf("store.acc int8 sram=0 dram=%#x y=1 x=1 stride=1\nfinish job=1", buf.Addr)))
	if err := s2.Free(p); err != nil {
		t.Fatal(err)
	}
	if err := s2.Free(buf.Handle); err != nil {
		t.Fatalf("Free after the program was freed: %v", err)
	}
}
