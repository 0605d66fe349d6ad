package isa

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated tables in ISA.md")

const (
	beginMark = "<!-- BEGIN GENERATED LAYOUTS: go test -run TestISADoc -update -->\n"
	endMark   = "<!-- END GENERATED LAYOUTS -->\n"
)

// layoutDoc renders the bit-layout tables of every instruction group from the
// field tables.
func layoutDoc() string {
	groups := []struct {
		title string
		ops   []Opcode
	}{
		{"LOAD, STORE", []Opcode{OpLoad, OpStore}},
		{"GEMM", []Opcode{OpGEMM}},
		{"ALU", []Opcode{OpALU}},
		{"POOL", []Opcode{OpPool}},
		{"FINISH", []Opcode{OpFinish}},
		{"NOP", []Opcode{OpNop}},
	}
	var sb strings.Builder
	for _, g := range groups {
		var codes []string
		for _, op := range g.ops {
			codes = append(codes, fmt.Sprintf("%d", op))
		}
		fmt.Fprintf(&sb, "### %s (opcode %s)\n\n", g.title, strings.Join(codes, ", "))
		sb.WriteString("| Bits | Field | Width | Description |\n|---:|---|---:|---|\n")
		next := 0
		row := func(lo, width int, name, doc string) {
			bits := fmt.Sprintf("%d", lo)
			if width > 1 {
				bits = fmt.Sprintf("%d:%d", lo+width-1, lo)
			}
			fmt.Fprintf(&sb, "| %s | %s | %d | %s |\n", bits, name, width, doc)
		}
		for _, f := range Layout(g.ops[0]) {
			if f.Lo > next {
				row(next, f.Lo-next, "*reserved*", "must be zero")
			}
			doc := f.Doc
			if f.Signed {
				doc += " (signed)"
			}
			row(f.Lo, f.Width, "`"+f.Name+"`", doc)
			next = f.Lo + f.Width
		}
		if next < 128 {
			row(next, 128-next, "*reserved*", "must be zero")
		}
		sb.WriteString("\n")
	}
	return sb.String()
}

func TestISADoc(t *testing.T) {
	raw, err := os.ReadFile("ISA.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	b := strings.Index(doc, beginMark)
	e := strings.Index(doc, endMark)
	if b < 0 || e < b {
		t.Fatalf("ISA.md lacks the markers %q ... %q", beginMark, endMark)
	}
	want := doc[:b+len(beginMark)] + layoutDoc() + doc[e:]
	if want == doc {
		return
	}
	if *update {
		if err := os.WriteFile("ISA.md", []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("ISA.md layout tables are stale; run go test -run TestISADoc -update")
}

// TestISAExamples assembles every ```asm block of ISA.md.
func TestISAExamples(t *testing.T) {
	raw, err := os.ReadFile("ISA.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(raw), "```asm\n")[1:]
	if len(blocks) == 0 {
		t.Fatal("ISA.md has no asm example")
	}
	for _, b := range blocks {
		src, _, _ := strings.Cut(b, "```")
		p, err := Assemble(src)
		if err != nil {
			t.Errorf("ISA.md example: %v\n%s", err, src)
			continue
		}
		if q, err := Assemble(Disassemble(p)); err != nil || !equal(p, q) {
			t.Errorf("ISA.md example does not round-trip: %v", err)
		}
	}
}
