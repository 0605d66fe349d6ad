package isa

import (
	"errors"
	"strings"
	"testing"
)

const example = `# conv tile: load, multiply, requantize, store
load.uop int32 sram=0 dram=0x0 y=1 x=8 stride=8
load.param int32 sram=0 dram=0x100 y=1 x=1 stride=1   # per-channel M, S
load.inp int8 sram=0 dram=0x1000 y=4 x=16 stride=16 pad=1,1,1,1 ; push_next
load.wgt int8 sram=0 dram=0x2000 y=1 x=9 stride=9 ; push_next

gemm reset uop=0:8 iter=4,16 dst=16,1 src=0,1 wgt=1,0 ; pop_prev
alu.requant uop=0:1 iter=1,16 dst=0,1 src=0,0 zp=-3 per_channel
alu.relu uop=0:1 iter=1,16 dst=0,1
alu.clip uop=0:1 iter=1,16 dst=0,1 src=0,0 imm=127 ; push_next
store.acc int8 sram=0 dram=0x3000 y=4 x=16 stride=16 ; pop_prev push_prev
nop.compute ; pop_next
finish job=0x2a
`

func TestAssembleExample(t *testing.T) {
	p, err := Assemble(example)
	if err != nil {
		t.Fatal(err)
	}
	if len(p) != 11 {
		t.Fatalf("got %d instructions", len(p))
	}
	if p[2].PadY0 != 1 || !p[2].PushNext || p[2].DRAM != 0x1000 || p[2].Queue() != QueueLoad {
		t.Errorf("load.inp = %+v", p[2])
	}
	if p[5].Alu != AluRequant || p[5].Imm != -3 || !p[5].PerChannel || p[5].UseImm {
		t.Errorf("requant = %+v", p[5])
	}
	if p[10].JobID != 42 {
		t.Errorf("finish = %+v", p[10])
	}
	q, err := Assemble(Disassemble(p))
	if err != nil {
		t.Fatalf("%v\n%s", err, Disassemble(p))
	}
	if !equal(p, q) {
		t.Fatalf("disasm round trip changed the program:\n%s", Disassemble(q))
	}
}

func equal(a, b []Insn) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if a[k] != b[k] {
			return false
		}
	}
	return true
}

func TestDisasmRoundTripSamples(t *testing.T) {
	p := samples()
	text := Disassemble(p)
	q, err := Assemble(text)
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if !equal(p, q) {
		t.Fatalf("round trip changed the program:\n%s\n%s", text, Disassemble(q))
	}
}

func TestAssembleErrors(t *testing.T) {
	cases := []struct {
		src       string
		line, col int
		want      string
	}{
		{"frob x=1", 1, 1, "unknown mnemonic"},
		{"\n\nload.inp int8 sram=0 dram=0 y=1 x=1", 3, 1, `missing operand "stride"`},
		{"load.inp sram=0 dram=0 y=1 x=1 stride=1", 1, 1, "missing data type"},
		{"load.foo int8", 1, 1, "needs a variant"},
		{"gemm.x uop=0:1", 1, 1, "takes no variant"},
		{"# c\nload.inp int8 sram=0 dram=0 y=1 x=1 stride=1 bogus=3", 2, 46, `unknown operand "bogus"`},
		{"load.inp int8 sram=0 dram=0 y=abc x=1 stride=1", 1, 29, "bad number"},
		{"load.inp int8 sram=70000 dram=0 y=1 x=1 stride=1", 1, 15, "sram does not fit in 16 bits"},
		{"load.inp int8 sram=0 sram=1", 1, 22, "given twice"},
		{"load.inp int8 int32 sram=0", 1, 15, "data type given twice"},
		{"load.inp int8 sram=0 dram=0 y=1 x=1 stride=1 pad=1,1", 1, 46, "want 4 values"},
		{"load.inp int8 sram=0 dram=0 y=1 x=1 stride=1 ; push_next bogus", 1, 58, "unknown token"},
		{"nop.load ; push_next push_next", 1, 22, "given twice"},
		{"load.inp int8 sram=0 dram=0 y=1 x=1 stride=1 ; pop_prev", 1, 48, "pop_prev"},
		{"store.inp int8 sram=0 dram=0 y=1 x=1 stride=1", 1, 1, "mem"},
		{"load.uop int8 sram=0 dram=0 y=1 x=1 stride=1", 1, 10, "dtype"},
		{"load.inp int8 sram=0 dram=0 y=1 x=2 stride=1", 1, 37, "x_stride"},
		{"alu.clip uop=0:1 iter=1,1 dst=0,0 src=0,0", 1, 0, "use_imm"},
		{"alu.requant uop=0:1 iter=1,1 dst=0,0 src=0,0 imm=1", 1, 46, `unknown operand "imm"`},
		{"alu.add uop=0:1 iter=1,1 dst=0,0 src=0,0 zp=1", 1, 42, `unknown operand "zp"`},
		{"  ; push_next", 1, 3, "without an instruction"},
		{"finish job=1\nfinish job=0x100000000", 2, 8, "job_id does not fit"},
		{"gemm uop=1:1 iter=1,1 dst=0,0 src=0,0 wgt=0,0", 1, 6, "uop_end"},
		{"alu.exp uop=0:1 iter=1,1 dst=0,0", 1, 0, "exp has no int32 form; fp32 must be set"},
		{"alu.log uop=0:1 iter=1,1 dst=0,0 fp32 imm=1", 1, 39, "log has no second operand"},
		{"alu.exp uop=0:1 iter=1,1 dst=0,0 src=0,1 fp32", 1, 34, "src_in"},
		{"alu.log uop=0:1 iter=1,1 dst=0,0 zp=1 fp32", 1, 34, `unknown operand "zp"`},
		{"alu.dequantize uop=0:1 iter=1,1 dst=0,0 src=0,0 fp32", 1, 49, "only add, mul, min, max, relu, exp, log, div, lt, eq, round"},
		{"alu.div uop=0:1 iter=1,1 dst=0,0 src=0,0", 1, 0, "div has no int32 form; fp32 must be set"},
		{"alu.div uop=0:1 iter=1,1 dst=0,0 fp32", 1, 1, `missing operand "src"`},
		{"alu.lt uop=0:1 iter=1,1 dst=0,0 src=0,0", 1, 0, "lt has no int32 form; fp32 must be set"},
		{"alu.eq uop=0:1 iter=1,1 dst=0,0 fp32", 1, 1, `missing operand "src"`},
		{"alu.round uop=0:1 iter=1,1 dst=0,0 fp32 imm=1", 1, 41, "round has no second operand"},
		{"alu.round uop=0:1 iter=1,1 dst=0,0", 1, 0, "round has no int32 form; fp32 must be set"},
		{"pool.max win=1,1 stride=1,1 dst=0 src=1 ch=1 in=1,1 wgt=3", 1, 53, `unknown operand "wgt"`},
		{"pool.avg win=1,1 stride=1,1 dst=0 src=1 ch=1 in=1,1 bias", 1, 53, `unknown operand "bias"`},
		{"pool.max win=1,1 stride=1,1 dst=0 src=1 ch=1 in=1,1 clamp", 1, 53, `unknown operand "clamp"`},
		{"pool.dw win=3,3 stride=1,1 dst=0 src=1 ch=1 in=3,3", 1, 1, `missing operand "wgt"`},
		{"pool.dw win=3,3 stride=1,1 dst=0 src=1 ch=1 in=4,3 gap=1,0 wgt=0", 1, 45, "in_h"},
		{"pool.dw win=3,3 stride=1,1 dst=0 src=1 ch=1 in=3,3 gap=16,0 wgt=0", 1, 52, "gap_h does not fit in 4 bits"},
	}
	for _, c := range cases {
		_, err := Assemble(c.src)
		var ae *AsmError
		if !errors.As(err, &ae) {
			t.Errorf("%q: err = %v, want an AsmError", c.src, err)
			continue
		}
		if ae.Line != c.line || ae.Col != c.col || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err = %v (line %d col %d), want line %d col %d containing %q", c.src, err, ae.Line, ae.Col, c.line, c.col, c.want)
		}
	}
}

func TestAssembleErrorUnwraps(t *testing.T) {
	_, err := Assemble("nop.load ; pop_prev")
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "pop_prev" {
		t.Fatalf("err = %v, want a FieldError naming pop_prev", err)
	}
}

func TestAssembleEmpty(t *testing.T) {
	p, err := Assemble("\n# nothing\n   \t\n")
	if err != nil || len(p) != 0 {
		t.Fatalf("got %v, %v", p, err)
	}
}
