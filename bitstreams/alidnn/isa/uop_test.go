package isa

import (
	"strings"
	"testing"
)

func TestUops(t *testing.T) {
	for _, u := range []GemmUop{{}, {2047, 2047, 1023}, {1, 2, 3}} {
		w, err := u.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if got := DecodeGemmUop(w); got != u {
			t.Errorf("gemm uop %+v -> %#x -> %+v", u, w, got)
		}
	}
	if w, _ := (GemmUop{Acc: 1, Inp: 2, Wgt: 3}).Encode(); w != 1|2<<11|3<<22 {
		t.Errorf("gemm uop layout changed: %#x", w)
	}
	for _, c := range []struct {
		u    GemmUop
		name string
	}{{GemmUop{Acc: 2048}, "acc"}, {GemmUop{Inp: 2048}, "inp"}, {GemmUop{Wgt: 1024}, "wgt"}} {
		if _, err := c.u.Encode(); err == nil || !strings.Contains(err.Error(), c.name+"=") {
			t.Errorf("%+v: err = %v", c.u, err)
		}
	}
	for _, u := range []AluUop{{}, {2047, 2047}, {5, 6}} {
		w, err := u.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if got, err := DecodeAluUop(w); err != nil || got != u {
			t.Errorf("alu uop %+v -> %#x -> %+v, %v", u, w, got, err)
		}
	}
	for _, c := range []struct {
		u    AluUop
		name string
	}{{AluUop{Dst: 2048}, "dst"}, {AluUop{Src: 2048}, "src"}} {
		if _, err := c.u.Encode(); err == nil || !strings.Contains(err.Error(), c.name+"=") {
			t.Errorf("%+v: err = %v", c.u, err)
		}
	}
	if _, err := DecodeAluUop(1 << 22); err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Errorf("alu uop reserved bits: err = %v", err)
	}
}
