package sessions_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/services/agent/sessions"
)

// f32s is vs as little-endian fp32 bit patterns.
func f32s(vs ...float32) []byte {
	b := make([]byte, 4*len(vs))
	for k, v := range vs {
		binary.LittleEndian.PutUint32(b[4*k:], math.Float32bits(v))
	}
	return b
}

func rep(b []byte, n int) []byte { return bytes.Repeat(b, n) }

// put allocates a buffer of s holding p.
func put(tb testing.TB, s *sessions.Session, p []byte) sessions.Buffer {
	tb.Helper()
	b := alloc(tb, s, uint64(len(p)))
	if err := s.Write(context.Background(), b.Handle, 0, p); err != nil {
		tb.Fatal(err)
	}
	return b
}

func uopWord(tb testing.TB, u interface{ Encode() (uint32, error) }) []byte {
	tb.Helper()
	w, err := u.Encode()
	if err != nil {
		tb.Fatal(err)
	}
	return le32(int32(w))
}

// probe runs, as a job of s, loads then compute then a STORE of n acc
// elements from acc[0], and returns what the STORE wrote.
func probe(tb testing.TB, s *sessions.Session, loads, compute string, n int) []int32 {
	tb.Helper()
	out := alloc(tb, s, uint64(64*n))
	src := fmt.Sprintf(`%s
nop.load ; push_next
nop.compute ; pop_prev
%s
nop.compute ; push_next
store.acc int32 sram=0 dram=%#x y=1 x=%d stride=%d ; pop_prev push_prev
finish job=1 ; pop_next
`, loads, compute, out.Addr, n, n)
	if c := run(tb, s, program(tb, s, asm(tb, src)), 1); c.Err != nil {
		tb.Fatal(c.Err)
	}
	got := make([]byte, 64*n)
	if err := s.Read(context.Background(), out.Handle, 0, got); err != nil {
		tb.Fatal(err)
	}
	return i32s(got)
}

// leaveSecrets runs a job of a that loads a recognisable pattern into the
// first 8 elements of every SRAM bank.
func leaveSecrets(tb testing.TB, a *sessions.Session) {
	tb.Helper()
	uop := put(tb, a, rep(uopWord(tb, isa.GemmUop{Acc: 1, Inp: 1, Wgt: 1}), 16))
	inp := put(tb, a, rep([]byte{0x5e}, 8*16))
	inpF := put(tb, a, rep(f32s(1.5), 8*16))
	wgt := put(tb, a, rep([]byte{0x3c}, 8*256))
	wgtF := put(tb, a, rep(f32s(2.5), 8*256))
	acc := put(tb, a, rep(le32(0x5ec2e7), 8*16))
	prm := put(tb, a, rep(f32s(3.5, 0), 8*16))
	loads := fmt.Sprintf(`load.uop int32 sram=0 dram=%#x y=1 x=8 stride=8
load.inp int8 sram=0 dram=%#x y=1 x=8 stride=8
load.inp fp32 sram=0 dram=%#x y=1 x=8 stride=8
load.wgt int8 sram=0 dram=%#x y=1 x=8 stride=8
load.wgt fp32 sram=0 dram=%#x y=1 x=8 stride=8
load.acc int32 sram=0 dram=%#x y=1 x=8 stride=8
load.param int32 sram=0 dram=%#x y=1 x=8 stride=8`, uop.Addr, inp.Addr, inpF.Addr, wgt.Addr, wgtF.Addr, acc.Addr, prm.Addr)
	if got := probe(tb, a, loads, "", 1); got[0] != 0x5ec2e7 {
		tb.Fatalf("a's own acc: %#x, want its pattern", got[0])
	}
}

func allZero(vs []int32) bool {
	for _, v := range vs {
		if v != 0 {
			return false
		}
	}
	return true
}

// TestScrubBetweenSessions: a's job leaves a pattern in every SRAM bank;
// b's jobs then read each bank without loading it and must see zeros.
func TestScrubBetweenSessions(t *testing.T) {
	e, _ := newEngine(t, sessions.Config{})
	a, b := open(t, e, "a"), open(t, e, "b")
	leaveSecrets(t, a)

	ones8 := put(t, b, rep([]byte{1}, 16*256))
	onesF := put(t, b, rep(f32s(1), 16*256))
	gemmUop := func(k uint32) sessions.Buffer {
		return put(t, b, uopWord(t, isa.GemmUop{Acc: 0, Inp: k, Wgt: k}))
	}
	const gemm = "gemm reset uop=0:1 iter=1,1 dst=0,0 src=0,0 wgt=0,0\ngemm %s uop=0:1 iter=1,1 dst=0,0 src=0,0 wgt=0,0"

	// acc: a STORE of what b never computed.
	if got := probe(t, b, "", "", 8); !allZero(got) {
		t.Errorf("acc: b read %#x", got)
	}
	// uop: a GEMM with the micro-op b never loaded; inp and wgt b's ones.
	// a's micro-op would send the result to acc[1] and leave acc[0] as a
	// left it.
	if got := probe(t, b, fmt.Sprintf("load.inp int8 sram=0 dram=%#x y=1 x=2 stride=2\nload.wgt int8 sram=0 dram=%#x y=1 x=2 stride=2", ones8.Addr, ones8.Addr),
		fmt.Sprintf(gemm, ""), 2); fmt.Sprint(got[:16]) != fmt.Sprint(rep32(16, 16)) || !allZero(got[16:]) {
		t.Errorf("uop: b read %v", got)
	}
	// inp and wgt, int8 and fp32: a GEMM of b's ones with the other
	// operand unloaded.
	for _, c := range []struct {
		name, load string
		k          uint32
		fp32       string
	}{
		{"inp", "load.wgt int8 sram=5 dram=%#x y=1 x=1 stride=1", 5, ""},
		{"wgt", "load.inp int8 sram=6 dram=%#x y=1 x=1 stride=1", 6, ""},
		{"inp fp32", "load.wgt fp32 sram=5 dram=%#x y=1 x=1 stride=1", 5, "fp32"},
		{"wgt fp32", "load.inp fp32 sram=6 dram=%#x y=1 x=1 stride=1", 6, "fp32"},
	} {
		ones := ones8
		if c.fp32 != "" {
			ones = onesF
		}
		u := gemmUop(c.k)
		loads := fmt.Sprintf("load.uop int32 sram=0 dram=%#x y=1 x=1 stride=1\n"+c.load, u.Addr, ones.Addr)
		if got := probe(t, b, loads, fmt.Sprintf(gemm, c.fp32), 1); !allZero(got) {
			t.Errorf("%s: b read %#x", c.name, got)
		}
	}
	// param: dequantize b's ones with the scales b never loaded.
	u := put(t, b, uopWord(t, isa.AluUop{Dst: 0, Src: 7}))
	accOnes := put(t, b, rep(le32(1), 16))
	loads := fmt.Sprintf("load.uop int32 sram=0 dram=%#x y=1 x=1 stride=1\nload.acc int32 sram=0 dram=%#x y=1 x=1 stride=1", u.Addr, accOnes.Addr)
	if got := probe(t, b, loads, "alu.dequantize uop=0:1 iter=1,1 dst=0,0 src=0,0 zp=0 per_channel", 1); !allZero(got) {
		t.Errorf("param: b read %#x", got)
	}

	// One scrub before a's first job (the SRAMs held what an unknown
	// earlier user left) and one before b's first; none between b's jobs.
	for _, us := range e.Usage() {
		if us.Scrubs != 1 || us.ScrubDeviceNS == 0 {
			t.Errorf("%s: %d scrubs (%d ns device time), want 1", us.Tenant, us.Scrubs, us.ScrubDeviceNS)
		}
		t.Logf("%s: %d scrubs, %d ns device time, %d ns wall time", us.Tenant, us.Scrubs, us.ScrubDeviceNS, us.ScrubNS)
	}
}

func rep32(v int32, n int) []int32 {
	out := make([]int32, n)
	for k := range out {
		out[k] = v
	}
	return out
}

// TestScrubOnlyOnSwitch: consecutive jobs of one session pay no scrub; a
// job of another session, even of the same tenant, does, and a job that
// writes no SRAM leaves nothing to scrub.
func TestScrubOnlyOnSwitch(t *testing.T) {
	e, _ := newEngine(t, sessions.Config{})
	a1, a2, b, c := open(t, e, "a"), open(t, e, "a"), open(t, e, "b"), open(t, e, "c")
	scrubs := func() map[string]uint64 {
		m := map[string]uint64{}
		for _, u := range e.Usage() {
			if u.Scrubs > 0 {
				m[u.Tenant] = u.Scrubs
			}
		}
		return m
	}
	check := func(step string, want map[string]uint64) {
		t.Helper()
		if got := scrubs(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("after %s: scrubs %v, want %v", step, got, want)
		}
	}
	ga1, ga2, gb := setupGEMM(t, a1, 1), setupGEMM(t, a2, 2), setupGEMM(t, b, 3)
	pc := program(t, c, finishOnly)
	for i := range 5 {
		run(t, a1, ga1.prog, uint64(i))
	}
	ga1.check(t, a1)
	check("5 jobs of a1", map[string]uint64{"a": 1}) // the initial scrub
	for i := range 3 {
		run(t, b, gb.prog, uint64(i))
	}
	gb.check(t, b)
	check("3 jobs of b", map[string]uint64{"a": 1, "b": 1})
	run(t, a2, ga2.prog, 0)
	ga2.check(t, a2)
	check("a2, same tenant as a1", map[string]uint64{"a": 2, "b": 1})
	run(t, c, pc, 0)
	check("c's FINISH", map[string]uint64{"a": 2, "b": 1, "c": 1})
	run(t, a1, program(t, a1, finishOnly), 9)
	check("a1's FINISH after c's, which wrote nothing", map[string]uint64{"a": 2, "b": 1, "c": 1})
}
