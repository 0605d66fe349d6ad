// Package devicetest is the conformance suite of device backends: every
// backend (sim, xdma over the simulator's driver nodes, xdma over plain files)
// runs Run, so the agent can trust one behaviour whatever drives the board.
//
// A harness provides fresh boards; what else it can do is found by type
// assertion on optional interfaces (Interrupter, Coalescer, Shell, Faults),
// and the tests that need a capability run only where it exists. Which
// capabilities a harness must have is decided by the backend's own test, so
// nothing is skipped silently.
package devicetest

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fpga-faas/faas/services/agent/device"
	"github.com/fpga-faas/faas/shell"
)

// Harness makes boards for the suite.
type Harness interface {
	// Open returns a freshly powered-up board; the harness closes it when
	// the test ends.
	Open(t *testing.T) *device.Board
}

// Interrupter can fire a chip's user interrupt line from outside, as the
// hardware would.
type Interrupter interface {
	Interrupt(t *testing.T, b *device.Board, chip, line int)
}

// Coalescer marks harnesses whose event files coalesce interrupts that fire
// before a read, as the XDMA driver does (a FIFO standing in for an event
// file does not).
type Coalescer interface {
	Coalesces()
}

// Shell marks harnesses whose boards run a full shell (PR controller with the
// loopback role registered, sensors, windows, scrubber), not a register
// image.
type Shell interface {
	RunsShell()
}

// Faults can inject the simulator's faults into a board opened by Open.
type Faults interface {
	FailNextProgram(b *device.Board, chip int)
	StallDMA(b *device.Board, chip int, stall bool)
	DropLink(b *device.Board)
	SetTemperature(b *device.Board, chip int, milliC int32)
	PowerCycle(b *device.Board, chip int)
}

// Run runs the whole suite against h.
func Run(t *testing.T, h Harness) {
	t.Run("Identity", func(t *testing.T) { testIdentity(t, h) })
	t.Run("MMIO", func(t *testing.T) { testMMIO(t, h) })
	t.Run("DMA", func(t *testing.T) { testDMA(t, h) })
	t.Run("IRQTimeout", func(t *testing.T) { testIRQTimeout(t, h) })
	if ih, ok := h.(Interrupter); ok {
		t.Run("IRQ", func(t *testing.T) { testIRQ(t, h, ih) })
		if _, ok := h.(Coalescer); ok {
			t.Run("IRQCoalesce", func(t *testing.T) { testIRQCoalesce(t, h, ih) })
		}
	}
	if _, ok := h.(Shell); ok {
		t.Run("Program", func(t *testing.T) { testProgram(t, h) })
		t.Run("ProgramRefused", func(t *testing.T) { testProgramRefused(t, h) })
		t.Run("Loopback64MiB", func(t *testing.T) { testLoopback(t, h, 64<<20) })
		t.Run("Windows", func(t *testing.T) { testWindows(t, h) })
		t.Run("Sensors", func(t *testing.T) { testSensors(t, h) })
		t.Run("Digest", func(t *testing.T) { testDigest(t, h) })
		t.Run("Scrub", func(t *testing.T) { testScrub(t, h) })
		if fh, ok := h.(Faults); ok {
			t.Run("Faults", func(t *testing.T) { testFaults(t, h, fh) })
		}
	}
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func testIdentity(t *testing.T, h Harness) {
	b := h.Open(t)
	if b.Serial == "" {
		t.Error("board has no serial")
	}
	for i, c := range b.Chips {
		if c.Index() != i {
			t.Errorf("Chips[%d].Index() = %d", i, c.Index())
		}
		if c.Part() != b.Model.Parts[i] {
			t.Errorf("chip %d part %q, model says %q", i, c.Part().Name, b.Model.Parts[i].Name)
		}
		if c.DDRSize() == 0 || c.DDRSize()%4 != 0 {
			t.Errorf("chip %d DDR size %d", i, c.DDRSize())
		}
		if c.Serial() != b.Serial {
			t.Errorf("chip %d serial %q, board %q", i, c.Serial(), b.Serial)
		}
	}
}

func testMMIO(t *testing.T, h Harness) {
	b := h.Open(t)
	for i, c := range b.Chips {
		for _, v := range []uint32{0xdeadbeef, 0, 0x12345678 + uint32(i)} {
			if err := c.Write32(shell.RegScratch, v); err != nil {
				t.Fatalf("chip %d: write scratch: %v", i, err)
			}
			got, err := c.Read32(shell.RegScratch)
			if err != nil || got != v {
				t.Fatalf("chip %d: scratch = %#x, %v; want %#x", i, got, err, v)
			}
		}
		if v, err := c.Read32(shell.RegMagic); err != nil || v != shell.Magic {
			t.Errorf("chip %d: magic %#x, %v", i, v, err)
		}
	}
	// The chips are separate endpoints.
	b.Chips[0].Write32(shell.RegScratch, 1)
	b.Chips[1].Write32(shell.RegScratch, 2)
	if v, _ := b.Chips[0].Read32(shell.RegScratch); v != 1 {
		t.Errorf("chip 0 scratch %d after writing chip 1", v)
	}
	c := b.Chips[0]
	for _, off := range []uint32{1, 2, 3, shell.RegScratch + 2} {
		if _, err := c.Read32(off); !errors.Is(err, device.ErrMisaligned) {
			t.Errorf("Read32(%#x) = %v, want ErrMisaligned", off, err)
		}
		if err := c.Write32(off, 0); !errors.Is(err, device.ErrMisaligned) {
			t.Errorf("Write32(%#x) = %v, want ErrMisaligned", off, err)
		}
	}
	if _, err := c.Read32(shell.UserBARSize); !errors.Is(err, device.ErrOutOfRange) {
		t.Errorf("Read32 past the BAR = %v, want ErrOutOfRange", err)
	}
}

func randBytes(n int, seed uint64) []byte {
	p := make([]byte, n)
	rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)}).Read(p)
	return p
}

func testDMA(t *testing.T, h Harness) {
	b := h.Open(t)
	ctx := ctxT(t, time.Minute)
	for i, c := range b.Chips {
		top := c.DDRSize()
		cases := []struct {
			addr uint64
			n    int
		}{{0, 4}, {4096, 1 << 20}, {3<<20 + 12345*4, 3 * 4096}, {top - 8192, 8192}, {top / 2, 256 << 10}}
		for k, tc := range cases {
			want := randBytes(tc.n, uint64(i*100+k))
			if err := c.Write(ctx, tc.addr, want); err != nil {
				t.Fatalf("chip %d: write %d bytes at %#x: %v", i, tc.n, tc.addr, err)
			}
		}
		// Read back after all writes: each transfer went to its own card
		// address, none moved a file position that a later one depended on.
		for k, tc := range cases {
			want := randBytes(tc.n, uint64(i*100+k))
			got := make([]byte, tc.n)
			for range 2 {
				if err := c.Read(ctx, tc.addr, got); err != nil {
					t.Fatalf("chip %d: read %d bytes at %#x: %v", i, tc.n, tc.addr, err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("chip %d: %d bytes at %#x read back differently", i, tc.n, tc.addr)
				}
			}
		}
		for _, bad := range []struct {
			addr uint64
			n    int
			want error
		}{
			{2, 4, device.ErrMisaligned},
			{0, 6, device.ErrMisaligned},
			{top - 4, 8, device.ErrOutOfRange},
			{top, 4, device.ErrOutOfRange},
			{1 << 63, 4, device.ErrOutOfRange},
		} {
			p := make([]byte, bad.n)
			if err := c.Write(ctx, bad.addr, p); !errors.Is(err, bad.want) {
				t.Errorf("chip %d: write %d bytes at %#x = %v, want %v", i, bad.n, bad.addr, err, bad.want)
			}
			if err := c.Read(ctx, bad.addr, p); !errors.Is(err, bad.want) {
				t.Errorf("chip %d: read %d bytes at %#x = %v, want %v", i, bad.n, bad.addr, err, bad.want)
			}
		}
	}
	// The driver wants the host buffer aligned like the card address.
	odd := make([]byte, 4096+8)[1 : 4096+1]
	if err := b.Chips[0].Write(ctx, 0, odd); !errors.Is(err, device.ErrMisaligned) {
		t.Errorf("write from a misaligned host buffer = %v, want ErrMisaligned", err)
	}
	// A refused transfer wrote nothing.
	got := make([]byte, 8192)
	if err := b.Chips[0].Read(ctx, b.Chips[0].DDRSize()-8192, got); err != nil || !bytes.Equal(got, randBytes(8192, 3)) {
		t.Errorf("top of DDR changed by refused transfers (err %v)", err)
	}
}

func testIRQTimeout(t *testing.T, h Harness) {
	b := h.Open(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := b.Chips[0].WaitIRQ(ctx, shell.IRQRole0+3); !errors.Is(err, device.ErrTimeout) {
		t.Errorf("WaitIRQ with nothing firing = %v, want ErrTimeout", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	if err := b.Chips[1].WaitIRQ(ctx, shell.IRQRole0+3); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitIRQ canceled = %v, want context.Canceled", err)
	}
	if err := b.Chips[0].WaitIRQ(context.Background(), shell.IRQLines); !errors.Is(err, device.ErrOutOfRange) {
		t.Errorf("WaitIRQ on line %d = %v, want ErrOutOfRange", shell.IRQLines, err)
	}
}

func testIRQ(t *testing.T, h Harness, ih Interrupter) {
	b := h.Open(t)
	line := shell.IRQRole0 + 1
	done := make(chan error, 1)
	go func() { done <- b.Chips[1].WaitIRQ(ctxT(t, 10*time.Second), line) }()
	time.Sleep(5 * time.Millisecond) // let the reader block first, as an agent would
	ih.Interrupt(t, b, 1, line)
	if err := <-done; err != nil {
		t.Fatalf("WaitIRQ after interrupt: %v", err)
	}
	// The event was consumed.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := b.Chips[1].WaitIRQ(ctx, line); !errors.Is(err, device.ErrTimeout) {
		t.Errorf("second WaitIRQ = %v, want ErrTimeout (event already consumed)", err)
	}
	// An interrupt before the read is not lost.
	ih.Interrupt(t, b, 0, line)
	if err := b.Chips[0].WaitIRQ(ctxT(t, 10*time.Second), line); err != nil {
		t.Errorf("WaitIRQ after an earlier interrupt: %v", err)
	}
}

func testIRQCoalesce(t *testing.T, h Harness, ih Interrupter) {
	b := h.Open(t)
	line := shell.IRQRole0 + 2
	for range 3 {
		ih.Interrupt(t, b, 0, line)
	}
	if err := b.Chips[0].WaitIRQ(ctxT(t, 10*time.Second), line); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := b.Chips[0].WaitIRQ(ctx, line); !errors.Is(err, device.ErrTimeout) {
		t.Errorf("three interrupts before a read gave more than one event (%v)", err)
	}
}
