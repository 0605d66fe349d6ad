package devicetest

import (
	"bytes"
	"errors"
	"hash/crc32"
	"testing"
	"time"

	"github.com/fpga-faas/faas/bitstreams/loopback"
	"github.com/fpga-faas/faas/services/agent/device"
	"github.com/fpga-faas/faas/shell"
	"github.com/fpga-faas/faas/shell/bitfile"
)

// frameBytes sizes the loopback bitstreams of the suite: big enough to span
// several DMA chunks of the PR stream.
const frameBytes = 9<<20 + 12

func bitstream(t *testing.T, part shell.Part) []byte {
	t.Helper()
	bit, err := loopback.Bitstream(part, frameBytes)
	if err != nil {
		t.Fatal(err)
	}
	return bit
}

func program(t *testing.T, c *device.Chip, bit []byte) device.ProgramResult {
	t.Helper()
	var last int64
	res, err := c.Program(ctxT(t, time.Minute), bytes.NewReader(bit), func(n int64) { last = n })
	if err != nil {
		t.Fatalf("chip %d: program: %v", c.Index(), err)
	}
	if last != int64(len(bit)) || res.Bytes != int64(len(bit)) {
		t.Errorf("chip %d: progress ended at %d, result %d bytes, bitstream %d", c.Index(), last, res.Bytes, len(bit))
	}
	return res
}

func testProgram(t *testing.T, h Harness) {
	b := h.Open(t)
	for _, c := range b.Chips {
		role, err := c.Role()
		if err != nil || !role.Empty() {
			t.Fatalf("chip %d: fresh chip has role %v (%v)", c.Index(), role, err)
		}
		res := program(t, c, bitstream(t, c.Part()))
		if res.Role.ID != loopback.ID || res.Role.Version != loopback.Version || res.Role.Name != loopback.Name {
			t.Errorf("chip %d: loaded role %v", c.Index(), res.Role)
		}
		// Modeled at the part's configuration-port rate.
		want := time.Duration(float64(res.Bytes) / float64(c.Part().ConfigRate) * float64(time.Second))
		if d := res.ConfigTime - want; d < -time.Millisecond || d > time.Millisecond {
			t.Errorf("chip %d: config time %v, want %v for %d bytes at %d B/s", c.Index(), res.ConfigTime, want, res.Bytes, c.Part().ConfigRate)
		}
		if v, err := c.RoleRead32(loopback.RegMagic); err != nil || v != loopback.ID {
			t.Errorf("chip %d: role magic %#x, %v", c.Index(), v, err)
		}
		if v, err := c.Read32(shell.RegPRCount); err != nil || v != 1 {
			t.Errorf("chip %d: PR_COUNT %d, %v", c.Index(), v, err)
		}
		// A bitstream that fits one DMA chunk and whose length is not a
		// multiple of the DMA granularity: the padding is not data.
		small, err := loopback.Bitstream(c.Part(), 64<<10)
		if err != nil {
			t.Fatal(err)
		}
		if len(small)%shell.DMAAlign == 0 {
			t.Fatalf("small bitstream is %d bytes, want a length needing padding", len(small))
		}
		program(t, c, small)
	}
}

// runLoopback starts a loopback operation and waits for its interrupt.
func runLoopback(t *testing.T, c *device.Chip, op uint32, src, dst, n uint64, win int) (status, crc uint32) {
	t.Helper()
	for _, w := range loopback.Start(op, src, dst, n, win) {
		if err := c.RoleWrite32(w.Off, w.Value); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.WaitIRQ(ctxT(t, time.Minute), shell.IRQRole0); err != nil {
		t.Fatalf("chip %d: waiting for the loopback interrupt: %v", c.Index(), err)
	}
	status, err := c.RoleRead32(loopback.RegStatus)
	if err != nil {
		t.Fatal(err)
	}
	crc, err = c.RoleRead32(loopback.RegCRC)
	if err != nil {
		t.Fatal(err)
	}
	return status, crc
}

func testLoopback(t *testing.T, h Harness, n int) {
	b := h.Open(t)
	c := b.Chips[1]
	ctx := ctxT(t, 5*time.Minute)
	data := randBytes(n, 64)
	src, dst := uint64(0), uint64(2*n)
	if err := c.Write(ctx, src, data); err != nil {
		t.Fatal(err)
	}
	program(t, c, bitstream(t, c.Part()))
	if err := c.SetWindow(0, 0, uint64(4*n)); err != nil {
		t.Fatal(err)
	}
	status, crc := runLoopback(t, c, loopback.Copy, src, dst, uint64(n), 0)
	if status != loopback.StatusDone {
		t.Fatalf("loopback status %#x", status)
	}
	if want := crc32.ChecksumIEEE(data); crc != want {
		t.Errorf("loopback CRC %#08x, want %#08x", crc, want)
	}
	// A block read of the role's registers (one access where the backend
	// can) reads what single reads do.
	block := make([]uint32, 8)
	if err := c.RoleReadBlock(0, block); err != nil {
		t.Fatalf("RoleReadBlock: %v", err)
	}
	for i, v := range block {
		if w, err := c.RoleRead32(uint32(4 * i)); err != nil || v != w {
			t.Errorf("role register %#x: %#x in a block, %#x (%v) alone", 4*i, v, w, err)
		}
	}
	if err := c.RoleReadBlock(shell.RoleSize-4, block[:2]); !errors.Is(err, device.ErrOutOfRange) {
		t.Errorf("RoleReadBlock past the role window: %v, want ErrOutOfRange", err)
	}
	got := make([]byte, n)
	if err := c.Read(ctx, dst, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		i := 0
		for got[i] == data[i] {
			i++
		}
		t.Fatalf("copied %d bytes differ from byte %d on", n, i)
	}
}

// corrupt returns the loopback bitstream for c's part after mangle.
func corrupt(t *testing.T, c *device.Chip, mangle func([]byte) []byte) []byte {
	bit := bitstream(t, c.Part())
	return mangle(bytes.Clone(bit))
}

// rehead returns the loopback bitstream for part with its header's design
// field replaced: the configuration data stays valid, so only the header
// check can refuse it.
func rehead(t *testing.T, part shell.Part, design string) []byte {
	t.Helper()
	bit := bitstream(t, part)
	h, err := bitfile.ReadHeader(bytes.NewReader(bit))
	if err != nil {
		t.Fatal(err)
	}
	old, err := h.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	h.Design = design
	head, err := h.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return append(head, bit[len(old):]...)
}

func testProgramRefused(t *testing.T, h Harness) {
	b := h.Open(t)
	c := b.Chips[0]
	program(t, c, bitstream(t, c.Part()))
	if err := c.Write(ctxT(t, time.Minute), 0, randBytes(4096, 5)); err != nil {
		t.Fatal(err)
	}
	if err := c.SetWindow(2, 0, 4096); err != nil {
		t.Fatal(err)
	}
	other := shell.PartKU15P
	if c.Part() == other {
		other = shell.PartVU9P
	}
	sync := []byte{0xaa, 0x99, 0x55, 0x66}
	for _, tc := range []struct {
		name  string
		bit   []byte
		cause shell.PRCause
	}{
		{"garbage", []byte("this is not a bitstream at all.."), shell.PRBadHeader},
		{"wrong part", bitstream(t, other), shell.PRPartMismatch},
		{"no sync", corrupt(t, c, func(b []byte) []byte {
			i := bytes.Index(b, sync)
			copy(b[i:], []byte{0xaa, 0x99, 0x55, 0x67})
			return b
		}), shell.PRNoSync},
		{"truncated", corrupt(t, c, func(b []byte) []byte { return b[:len(b)*2/3] }), shell.PRTruncated},
		{"bad crc", corrupt(t, c, func(b []byte) []byte { b[len(b)/2] ^= 0x10; return b }), shell.PRBadCRC},
		{"trailing data", corrupt(t, c, func(b []byte) []byte { return append(b, make([]byte, 64)...) }), shell.PROverflow},
		{"not partial", rehead(t, c.Part(), loopback.Name+";UserID=0XFFFFFFFF"), shell.PRNotPartial},
		{"unknown role", rehead(t, c.Part(), "nosuchrole;PARTIAL=TRUE"), shell.PRUnknownRole},
	} {
		_, err := c.Program(ctxT(t, time.Minute), bytes.NewReader(tc.bit), nil)
		var pe *device.ProgramError
		if !errors.As(err, &pe) || !errors.Is(err, device.ErrProgram) || pe.Cause != tc.cause {
			t.Errorf("%s: Program = %v, want cause %q", tc.name, err, tc.cause)
			continue
		}
		// The previous role is untouched and works.
		role, err := c.Role()
		if err != nil || role.ID != loopback.ID {
			t.Errorf("%s: role after refusal %v (%v)", tc.name, role, err)
		}
		status, crc := runLoopback(t, c, loopback.CRC, 0, 0, 4096, 2)
		if status != loopback.StatusDone || crc != crc32.ChecksumIEEE(randBytes(4096, 5)) {
			t.Errorf("%s: loopback after refusal: status %#x crc %#x", tc.name, status, crc)
		}
	}
}

func testWindows(t *testing.T, h Harness) {
	b := h.Open(t)
	c := b.Chips[0]
	ctx := ctxT(t, time.Minute)
	program(t, c, bitstream(t, c.Part()))
	const mib = 1 << 20
	if err := c.Write(ctx, 0, randBytes(mib, 1)); err != nil {
		t.Fatal(err)
	}
	// No window is open after power-up.
	if status, _ := runLoopback(t, c, loopback.CRC, 0, 0, 4096, 0); status&loopback.StatusError == 0 || status>>8 != loopback.ErrCodeWindow {
		t.Errorf("role DMA without a window: status %#x, want window error", status)
	}
	if err := c.Health(); !errors.Is(err, device.ErrWindowFault) {
		t.Errorf("Health after a window fault = %v", err)
	}
	if err := c.ClearAlarms(); err != nil {
		t.Fatal(err)
	}
	if err := c.SetWindow(1, 2*mib, 4*mib); err != nil {
		t.Fatal(err)
	}
	// A copy from outside the window into it moves nothing.
	if status, _ := runLoopback(t, c, loopback.Copy, 0, 2*mib, mib, 1); status>>8 != loopback.ErrCodeWindow {
		t.Errorf("copy from outside the window: status %#x", status)
	}
	got := make([]byte, mib)
	if err := c.Read(ctx, 2*mib, got); err != nil || !bytes.Equal(got, make([]byte, mib)) {
		t.Errorf("window destination written by a refused copy (%v)", err)
	}
	// Straddling the limit faults too.
	if status, _ := runLoopback(t, c, loopback.CRC, 4*mib-4096, 0, 8192, 1); status>>8 != loopback.ErrCodeWindow {
		t.Errorf("access straddling the window limit: status %#x", status)
	}
	c.ClearAlarms()
	if status, _ := runLoopback(t, c, loopback.Copy, 2*mib, 3*mib, mib, 1); status != loopback.StatusDone {
		t.Errorf("copy inside the window: status %#x", status)
	}
	if err := c.Health(); err != nil {
		t.Errorf("Health after good accesses: %v", err)
	}
	for _, bad := range [][3]uint64{{8, 0, 1}, {0, 1, 0}, {0, 0, c.DDRSize() + 4096}} {
		if err := c.SetWindow(int(bad[0]), bad[1], bad[2]); !errors.Is(err, device.ErrOutOfRange) {
			t.Errorf("SetWindow(%d, %#x, %#x) = %v, want ErrOutOfRange", bad[0], bad[1], bad[2], err)
		}
	}
}

func testSensors(t *testing.T, h Harness) {
	b := h.Open(t)
	for _, c := range b.Chips {
		s, err := c.Sensors()
		if err != nil {
			t.Fatal(err)
		}
		if s.TempC <= 0 || s.TempC >= s.TempLimitC || s.PowerW <= 0 || s.VCCIntV <= 0 || s.Clock0MHz <= 0 {
			t.Errorf("chip %d: implausible sensors %+v", c.Index(), s)
		}
		if !s.LinkUp || s.LinkLanes == 0 || s.Alarms != 0 {
			t.Errorf("chip %d: link or alarms %+v", c.Index(), s)
		}
		if err := c.Health(); err != nil {
			t.Errorf("chip %d: fresh chip unhealthy: %v", c.Index(), err)
		}
	}
}

func testDigest(t *testing.T, h Harness) {
	b := h.Open(t)
	c := b.Chips[1]
	var d [32]byte
	copy(d[:], randBytes(32, 32))
	if err := c.SetImageDigest(d); err != nil {
		t.Fatal(err)
	}
	if got, err := c.ImageDigest(); err != nil || got != d {
		t.Fatalf("digest %x (%v), want %x", got, err, d)
	}
	if got, _ := b.Chips[0].ImageDigest(); got != [32]byte{} {
		t.Errorf("other chip's digest changed: %x", got)
	}
	program(t, c, bitstream(t, c.Part()))
	if got, _ := c.ImageDigest(); got != [32]byte{} {
		t.Errorf("digest survived a reconfiguration: %x", got)
	}
}

func testScrub(t *testing.T, h Harness) {
	b := h.Open(t)
	ctx := ctxT(t, time.Minute)
	for _, c := range b.Chips {
		if err := c.Write(ctx, 4096, randBytes(8192, 7)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Chips[0].Scrub(ctx); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 8192)
	b.Chips[0].Read(ctx, 4096, got)
	if !bytes.Equal(got, make([]byte, 8192)) {
		t.Error("DDR not zero after scrub")
	}
	b.Chips[1].Read(ctx, 4096, got)
	if !bytes.Equal(got, randBytes(8192, 7)) {
		t.Error("scrubbing chip 0 touched chip 1")
	}
}

// otherChipWorks checks that a fault on one chip left the other usable.
func otherChipWorks(t *testing.T, c *device.Chip) {
	t.Helper()
	ctx := ctxT(t, time.Minute)
	data := randBytes(64<<10, uint64(c.Index())+77)
	if err := c.Write(ctx, 1<<20, data); err != nil {
		t.Fatalf("chip %d after a fault on its neighbour: %v", c.Index(), err)
	}
	got := make([]byte, len(data))
	if err := c.Read(ctx, 1<<20, got); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("chip %d DMA after a fault on its neighbour: %v", c.Index(), err)
	}
	program(t, c, bitstream(t, c.Part()))
	if err := c.SetWindow(0, 1<<20, 2<<20); err != nil {
		t.Fatal(err)
	}
	if status, crc := runLoopback(t, c, loopback.CRC, 1<<20, 0, uint64(len(data)), 0); status != loopback.StatusDone || crc != crc32.ChecksumIEEE(data) {
		t.Fatalf("chip %d loopback after a fault on its neighbour: status %#x", c.Index(), status)
	}
}

var healthErrors = []error{device.ErrOverTemp, device.ErrLinkDown, device.ErrPowerLost, device.ErrWindowFault}

// onlyHealth checks that err reports want and no other health condition.
func onlyHealth(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: Health = %v, want %v", what, err, want)
	}
	for _, e := range healthErrors {
		if e != want && errors.Is(err, e) {
			t.Errorf("%s: Health also reports %v", what, e)
		}
	}
}

func testFaults(t *testing.T, h Harness, f Faults) {
	t.Run("FailNextProgram", func(t *testing.T) {
		b := h.Open(t)
		c := b.Chips[0]
		program(t, c, bitstream(t, c.Part()))
		f.FailNextProgram(b, 0)
		_, err := c.Program(ctxT(t, time.Minute), bytes.NewReader(bitstream(t, c.Part())), nil)
		var pe *device.ProgramError
		if !errors.As(err, &pe) || pe.Cause != shell.PRConfigError {
			t.Fatalf("Program with an injected failure = %v, want cause %q", err, shell.PRConfigError)
		}
		if role, _ := c.Role(); role.ID != loopback.ID {
			t.Errorf("previous role lost: %v", role)
		}
		program(t, c, bitstream(t, c.Part())) // the fault was one-shot
		otherChipWorks(t, b.Chips[1])
	})
	t.Run("StallDMA", func(t *testing.T) {
		b := h.Open(t)
		f.StallDMA(b, 1, true)
		err := b.Chips[1].Write(ctxT(t, time.Minute), 0, make([]byte, 4096))
		if !errors.Is(err, device.ErrTimeout) {
			t.Fatalf("DMA on a stalled engine = %v, want ErrTimeout", err)
		}
		otherChipWorks(t, b.Chips[0])
		f.StallDMA(b, 1, false)
		if err := b.Chips[1].Write(ctxT(t, time.Minute), 0, make([]byte, 4096)); err != nil {
			t.Errorf("DMA after the stall ended: %v", err)
		}
	})
	t.Run("DropLink", func(t *testing.T) {
		b := h.Open(t)
		f.DropLink(b)
		for _, c := range b.Chips {
			onlyHealth(t, "link dropped", c.Health(), device.ErrLinkDown)
			s, _ := c.Sensors()
			if s.LinkUp || s.LinkErrors != 1 {
				t.Errorf("chip %d: link sensors %+v", c.Index(), s)
			}
		}
		otherChipWorks(t, b.Chips[1]) // the chips themselves still work
	})
	t.Run("OverTemperature", func(t *testing.T) {
		b := h.Open(t)
		c := b.Chips[0]
		program(t, c, bitstream(t, c.Part()))
		f.SetTemperature(b, 0, 110_000)
		onlyHealth(t, "overheated", c.Health(), device.ErrOverTemp)
		if v, _ := c.RoleRead32(loopback.RegMagic); v != 0xffffffff {
			t.Errorf("role of an overheated chip answers %#x, want decoupled (0xffffffff)", v)
		}
		_, err := c.Program(ctxT(t, time.Minute), bytes.NewReader(bitstream(t, c.Part())), nil)
		var pe *device.ProgramError
		if !errors.As(err, &pe) || pe.Cause != shell.PROverTemp || !errors.Is(err, device.ErrOverTemp) {
			t.Errorf("Program while overheated = %v, want cause %q", err, shell.PROverTemp)
		}
		otherChipWorks(t, b.Chips[1])
		if err := b.Chips[1].Health(); err != nil {
			t.Errorf("neighbour of an overheated chip: %v", err)
		}
	})
	t.Run("PowerCycle", func(t *testing.T) {
		b := h.Open(t)
		ctx := ctxT(t, time.Minute)
		c := b.Chips[1]
		program(t, c, bitstream(t, c.Part()))
		if err := c.Write(ctx, 0, randBytes(4096, 11)); err != nil {
			t.Fatal(err)
		}
		f.PowerCycle(b, 1)
		onlyHealth(t, "power-cycled", c.Health(), device.ErrPowerLost)
		if role, _ := c.Role(); !role.Empty() {
			t.Errorf("role survived a power cycle: %v", role)
		}
		got := make([]byte, 4096)
		if err := c.Read(ctx, 0, got); err != nil || !bytes.Equal(got, make([]byte, 4096)) {
			t.Errorf("DDR survived a power cycle (%v)", err)
		}
		if err := c.ClearAlarms(); err != nil {
			t.Fatal(err)
		}
		if err := c.Health(); err != nil {
			t.Errorf("Health after acknowledging the power loss: %v", err)
		}
		otherChipWorks(t, b.Chips[0])
	})
}
