package sim_test

import (
	"context"
	"crypto/sha256"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/loopback"
	loopbackmodel "github.com/fpga-faas/faas/bitstreams/loopback/model"
	"github.com/fpga-faas/faas/shell"
	"github.com/fpga-faas/faas/shell/sim"
)

const dmaBytes = 64 << 20

// BenchmarkDMA measures host-side DMA throughput of a simulated chip for
// 64 MiB transfers; compare with BenchmarkMemcpy64MiB of the same run.
func BenchmarkDMA(b *testing.B) {
	board, _ := newBoard(b, sim.Config{})
	c := board.Chip(0)
	buf := frames(dmaBytes, 1)
	ctx := context.Background()
	// Touch the DDR once so that both directions measure copies, not page
	// allocation.
	if err := c.H2C(ctx, 0, buf, 1<<30); err != nil {
		b.Fatal(err)
	}
	b.Run("H2C", func(b *testing.B) {
		b.SetBytes(dmaBytes)
		for b.Loop() {
			if err := c.H2C(ctx, 0, buf, 1<<30); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("C2H", func(b *testing.B) {
		b.SetBytes(dmaBytes)
		for b.Loop() {
			if err := c.C2H(ctx, 1, buf, 1<<30); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkMemcpy64MiB is the baseline of BenchmarkDMA: a copy of the same
// size between two Go slices.
func BenchmarkMemcpy64MiB(b *testing.B) {
	src, dst := frames(dmaBytes, 2), make([]byte, dmaBytes)
	copy(dst, src) // fault the pages in
	b.SetBytes(dmaBytes)
	for b.Loop() {
		copy(dst, src)
	}
}

// BenchmarkProgram streams a 38 MiB loopback bitstream through the PR
// controller in 4 MiB chunks, as the agent does (the configuration port's
// modeled time is not slept).
func BenchmarkProgram(b *testing.B) {
	reg, err := sim.NewRegistry(loopbackmodel.Model)
	if err != nil {
		b.Fatal(err)
	}
	board, _ := newBoard(b, sim.Config{Roles: reg})
	c := board.Chip(0)
	bit, err := loopback.Bitstream(c.Part(), 38<<20)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(bit)))
	for b.Loop() {
		if state, cause := program(b, c, bit, 4<<20); state != shell.PRDone {
			b.Fatalf("state %d cause %v", state, cause)
		}
	}
}

// BenchmarkSHA256Program is BenchmarkProgram's floor: the configuration
// engine hashes every frame byte (its FrameDigest), so it cannot beat SHA-256
// over the same bitstream.
func BenchmarkSHA256Program(b *testing.B) {
	bit, err := loopback.Bitstream(shell.PartVU9P, 38<<20)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(bit)))
	for b.Loop() {
		sha256.Sum256(bit)
	}
}

// BenchmarkMMIO reads a shell register through the Go API: the cost of one
// simulated register access, which bounds how fast a doorbell or a status
// poll can be on a simulated board.
func BenchmarkMMIO(b *testing.B) {
	bd, err := sim.NewBoard(sim.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer bd.Close()
	c := bd.Chip(0)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.ReadUser(shell.RegScratch); err != nil {
			b.Fatal(err)
		}
	}
}
