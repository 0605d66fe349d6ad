package model

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
)

// Test layout of the tenant window: the program at progAddr, data above.
const (
	windowBytes = 16 << 20
	progAddr    = 0x0
	dataAddr    = 0x10000
)

func newLocal(t testing.TB) *Local {
	t.Helper()
	l, err := NewLocal(windowBytes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// assemble assembles a program and encodes it.
func assemble(t testing.TB, text string) []byte {
	t.Helper()
	p, err := isa.Assemble(text)
	if err != nil {
		t.Fatal(err)
	}
	b, err := isa.EncodeProgram(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func put(t testing.TB, l *Local, addr uint64, p []byte) {
	t.Helper()
	if err := l.WriteAt(context.Background(), p, addr); err != nil {
		t.Fatal(err)
	}
}

func get(t testing.TB, l *Local, addr uint64, n int) []byte {
	t.Helper()
	p := make([]byte, n)
	if err := l.ReadAt(context.Background(), p, addr); err != nil {
		t.Fatal(err)
	}
	return p
}

// runBytes runs an encoded program placed at progAddr.
func runBytes(t testing.TB, l *Local, prog []byte) (alidnn.Stats, error) {
	t.Helper()
	put(t, l, progAddr, prog)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return alidnn.Exec(ctx, l, alidnn.Run{Insns: progAddr, Count: len(prog) / isa.InsnBytes, Window: 0})
}

// run assembles and runs a program and fails the test if the engine does.
func run(t testing.TB, l *Local, text string) alidnn.Stats {
	t.Helper()
	st, err := runBytes(t, l, assemble(t, text))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// wantFault runs a program and checks the engine's error cause and PC.
func wantFault(t testing.TB, l *Local, prog []byte, cause alidnn.Cause, pc uint32) {
	t.Helper()
	_, err := runBytes(t, l, prog)
	var ee *alidnn.EngineError
	if !errors.As(err, &ee) {
		t.Fatalf("run: %v, want engine error %v", err, cause)
	}
	if ee.Cause != cause || ee.PC != pc {
		t.Fatalf("engine error %v at %d, want %v at %d", ee.Cause, ee.PC, cause, pc)
	}
}

func i8s(v []int8) []byte {
	b := make([]byte, len(v))
	for i, x := range v {
		b[i] = byte(x)
	}
	return b
}

func i32s(v []int32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

func f32s(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func u64s(v []uint64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], x)
	}
	return b
}

func asI32(b []byte) []int32 {
	v := make([]int32, len(b)/4)
	for i := range v {
		v[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

func asI8(b []byte) []int8 {
	v := make([]int8, len(b))
	for i := range b {
		v[i] = int8(b[i])
	}
	return v
}

// uops encodes micro-op words.
func uops(v ...uint32) []byte {
	b := make([]byte, 4*len(v))
	for i, w := range v {
		binary.LittleEndian.PutUint32(b[4*i:], w)
	}
	return b
}

func gemmUop(t testing.TB, acc, inp, wgt uint32) uint32 {
	t.Helper()
	w, err := isa.GemmUop{Acc: acc, Inp: inp, Wgt: wgt}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func aluUop(t testing.TB, dst, src uint32) uint32 {
	t.Helper()
	w, err := isa.AluUop{Dst: dst, Src: src}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return w
}
