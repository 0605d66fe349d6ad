package sim_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fpga-faas/faas/shell"
	"github.com/fpga-faas/faas/shell/sim"
)

func openNode(t *testing.T, c *sim.Chip, name string) *sim.Node {
	t.Helper()
	n, err := c.Node(name)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func TestNodeOpen(t *testing.T) {
	b, _ := newBoard(t, sim.Config{DDRSize: smallDDR, Serial: "NODE01"})
	c := b.Chip(1)
	valid := []string{"user", "control", "h2c_0", "h2c_1", "c2h_0", "c2h_1"}
	for l := range shell.IRQLines {
		valid = append(valid, "events_"+strconv.Itoa(l))
	}
	for _, name := range valid {
		n, err := c.Node(name)
		if err != nil {
			t.Errorf("open %q: %v", name, err)
			continue
		}
		if !strings.HasSuffix(n.Name(), "chip1/xdma_"+name) || !strings.Contains(n.Name(), "NODE01") {
			t.Errorf("node %q is named %q", name, n.Name())
		}
		n.Close()
	}
	for _, name := range []string{
		"", "bogus", "user_0", "control_1", "h2c", "c2h", "events",
		"h2c_2", "c2h_2", "h2c_-1", "events_16", "events_-1", "events_x", "events_",
		// The driver's nodes have canonical decimal numbers only.
		"events_01", "events_+1", "h2c_00", "c2h_+0", "events_ 1",
	} {
		n, err := c.Node(name)
		if err == nil {
			t.Errorf("open %q succeeded (%s), want ENOENT", name, n.Name())
			continue
		}
		wantPathErrno(t, err, "open", syscall.ENOENT)
		var pe *fs.PathError
		if errors.As(err, &pe) && !strings.Contains(pe.Path, "chip1/xdma_") {
			t.Errorf("open %q: path %q does not name the chip's node", name, pe.Path)
		}
	}
}

func TestNodeUserMMIO(t *testing.T) {
	b, _ := newBoard(t, sim.Config{DDRSize: smallDDR})
	c := b.Chip(0)
	user := openNode(t, c, "user")
	ctl := openNode(t, c, "control")

	// Misaligned offsets are refused with EPROTO, reads and writes, on both
	// BARs, and the access does not happen.
	word := make([]byte, 4)
	for _, off := range []int64{1, 2, 3, shell.RegScratch + 2} {
		_, err := user.ReadAt(word, off)
		wantPathErrno(t, err, "read", syscall.EPROTO)
		_, err = user.WriteAt([]byte{1, 2, 3, 4}, off)
		wantPathErrno(t, err, "write", syscall.EPROTO)
		_, err = ctl.ReadAt(word, off)
		wantPathErrno(t, err, "read", syscall.EPROTO)
		_, err = ctl.WriteAt(word, off)
		wantPathErrno(t, err, "write", syscall.EPROTO)
	}
	if v := rd(t, c, shell.RegScratch); v != 0 {
		t.Errorf("SCRATCH %#x after refused misaligned writes", v)
	}

	// One word.
	if n, err := user.ReadAt(word, shell.RegMagic); n != 4 || err != nil || binary.LittleEndian.Uint32(word) != shell.Magic {
		t.Errorf("MAGIC: %d bytes %x, %v", n, word, err)
	}
	// Several words: looped word by word, little-endian each.
	uuid := make([]byte, 16)
	if n, err := user.ReadAt(uuid, shell.RegInterfaceID); n != 16 || err != nil || !bytes.Equal(uuid, shell.InterfaceUUID[:]) {
		t.Errorf("INTERFACE_ID: %d bytes %x, %v; want %x", n, uuid, err, shell.InterfaceUUID)
	}
	digest := bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef, 0x01, 0x02, 0x03, 0x04}, 4)
	if n, err := user.WriteAt(digest, shell.RegImageDigest); n != 32 || err != nil {
		t.Fatalf("IMAGE_DIGEST write: %d, %v", n, err)
	}
	for i := range 8 {
		want := binary.LittleEndian.Uint32(digest[4*i:])
		if v := rd(t, c, shell.RegImageDigest+4*uint64(i)); v != want {
			t.Errorf("IMAGE_DIGEST word %d = %#x, want %#x", i, v, want)
		}
	}
	back := make([]byte, 32)
	if n, err := user.ReadAt(back, shell.RegImageDigest); n != 32 || err != nil || !bytes.Equal(back, digest) {
		t.Errorf("IMAGE_DIGEST read back %x (%d, %v), want %x", back, n, err, digest)
	}

	// An access running off the end of the BAR stops at the first refused
	// word (ENXIO, as the driver's range check) and reports what was done.
	n, err := user.ReadAt(make([]byte, 8), shell.UserBARSize-4)
	if n != 4 {
		t.Errorf("read across the end of the BAR moved %d bytes, want 4", n)
	}
	wantPathErrno(t, err, "read", syscall.ENXIO)
	n, err = ctl.WriteAt(make([]byte, 8), shell.ControlBARSize-4)
	if n != 4 {
		t.Errorf("write across the end of the control BAR moved %d bytes, want 4", n)
	}
	wantPathErrno(t, err, "write", syscall.ENXIO)
	// A buffer that is not a whole number of words.
	_, err = user.ReadAt(make([]byte, 3), 0)
	wantPathErrno(t, err, "read", syscall.EINVAL)
	_, err = user.ReadAt(make([]byte, 0), -4)
	wantPathErrno(t, err, "read", syscall.EINVAL)

	// The control BAR: XDMA identifiers and the alignment register.
	if n, err := ctl.ReadAt(word, shell.XDMAC2HChannel+shell.XDMAChannelStride+shell.XDMAIdentifier); n != 4 || err != nil ||
		binary.LittleEndian.Uint32(word) != shell.XDMAIDC2H|1<<8 {
		t.Errorf("C2H 1 identifier %x, %v", word, err)
	}
	if _, err := ctl.ReadAt(word, shell.XDMAH2CChannel+shell.XDMAAlignments); err != nil {
		t.Fatal(err)
	}
	if a, g, bits := shell.ParseXDMAAlignment(binary.LittleEndian.Uint32(word)); a != shell.DMAAlign || g != shell.DMAAlign || bits != shell.DMAAddressBits {
		t.Errorf("alignment register: %d %d %d", a, g, bits)
	}
}

func TestNodeWrongDirection(t *testing.T) {
	b, _ := newBoard(t, sim.Config{DDRSize: smallDDR})
	c := b.Chip(0)
	buf := make([]byte, 4)
	_, err := openNode(t, c, "h2c_0").ReadAt(buf, 0)
	wantPathErrno(t, err, "read", syscall.EINVAL)
	_, err = openNode(t, c, "c2h_1").WriteAt(buf, 0)
	wantPathErrno(t, err, "write", syscall.EINVAL)
	ev := openNode(t, c, "events_2")
	_, err = ev.ReadAt(buf, 0)
	wantPathErrno(t, err, "read", syscall.EINVAL)
	_, err = ev.WriteAt(buf, 0)
	wantPathErrno(t, err, "write", syscall.EINVAL)
	_, err = ev.Write(buf)
	wantPathErrno(t, err, "write", syscall.EINVAL)
	_, err = openNode(t, c, "user").Read(buf)
	wantPathErrno(t, err, "read", syscall.EINVAL)

	// Events are read 4 bytes at a time, exactly.
	c.Interrupt(2)
	for _, n := range []int{0, 1, 3, 5, 8} {
		_, err = ev.Read(make([]byte, n))
		wantPathErrno(t, err, "read", syscall.EPROTO)
	}
	if !fired(c, 2) {
		t.Error("a refused events read consumed the event")
	}
}

func TestNodeDMA(t *testing.T) {
	b, _ := newBoard(t, sim.Config{DDRSize: smallDDR})
	c := b.Chip(0)
	h2c, c2h := openNode(t, c, "h2c_1"), openNode(t, c, "c2h_0")
	size := int64(c.DDRSize())

	data := frames(64<<10, 7)
	if n, err := h2c.WriteAt(data, 0x10_0000); n != len(data) || err != nil {
		t.Fatalf("h2c: %d, %v", n, err)
	}
	got := make([]byte, len(data))
	if n, err := c2h.ReadAt(got, 0x10_0000); n != len(got) || err != nil || !bytes.Equal(got, data) {
		t.Fatalf("c2h: %d, %v, equal %v", n, err, bytes.Equal(got, data))
	}
	// pread/pwrite semantics: the same offset again reads the same bytes.
	if _, err := c2h.ReadAt(got[:8], 0x10_0000); err != nil || !bytes.Equal(got[:8], data[:8]) {
		t.Errorf("second read at the same card address: %x, %v", got[:8], err)
	}

	for _, tc := range []struct {
		name  string
		off   int64
		n     int
		errno syscall.Errno
	}{
		{"misaligned address", 2, 4, syscall.EINVAL},
		{"misaligned address 1", 0x1001, 8, syscall.EINVAL},
		{"misaligned length", 0, 6, syscall.EINVAL},
		{"misaligned length 1", 0x1000, 1, syscall.EINVAL},
		{"negative offset", -4, 4, syscall.EINVAL},
		{"past DDR", size - 4, 8, syscall.EIO},
		{"at DDR end", size, 4, syscall.EIO},
		{"far past DDR", 1 << 40, 4, syscall.EIO},
		{"next to the PR port", shell.PRStreamAddr + 4, 4, syscall.EIO},
	} {
		p := bytes.Repeat([]byte{0xa5}, tc.n)
		_, err := h2c.WriteAt(p, tc.off)
		wantPathErrno(t, err, "write", tc.errno)
		_, err = c2h.ReadAt(p, tc.off)
		wantPathErrno(t, err, "read", tc.errno)
	}
	// The refused transfer across the end moved no byte; the last word of
	// DDR is reachable.
	last := make([]byte, 4)
	if _, err := c2h.ReadAt(last, size-4); err != nil || !bytes.Equal(last, make([]byte, 4)) {
		t.Errorf("last word of DDR after a refused write: %x, %v", last, err)
	}
	if _, err := h2c.WriteAt([]byte{1, 2, 3, 4}, size-4); err != nil {
		t.Errorf("write of the last word of DDR: %v", err)
	}
	// The PR stream port is write-only.
	_, err := c2h.ReadAt(last, shell.PRStreamAddr)
	wantPathErrno(t, err, "read", syscall.EIO)
	// Writing it without BEGIN is an AXI error too.
	_, err = h2c.WriteAt(last, shell.PRStreamAddr)
	wantPathErrno(t, err, "write", syscall.EIO)

	// A closed node refuses everything.
	h2c.Close()
	_, err = h2c.WriteAt(data[:4], 0)
	if !errors.Is(err, os.ErrClosed) {
		t.Errorf("write on a closed node: %v, want os.ErrClosed", err)
	}
}

func TestNodeDMATimeout(t *testing.T) {
	const timeout = 30 * time.Millisecond
	b, _ := newBoard(t, sim.Config{DDRSize: smallDDR, DMATimeout: timeout})
	c := b.Chip(1)
	h2c, c2h := openNode(t, c, "h2c_0"), openNode(t, c, "c2h_1")
	buf := make([]byte, 4096)

	c.StallDMA(true)
	start := time.Now()
	_, err := h2c.WriteAt(buf, 0)
	wantPathErrno(t, err, "write", syscall.ETIMEDOUT)
	if d := time.Since(start); d < timeout {
		t.Errorf("stalled h2c failed after %v, before the %v timeout", d, timeout)
	}
	start = time.Now()
	_, err = c2h.ReadAt(buf, 0)
	wantPathErrno(t, err, "read", syscall.ETIMEDOUT)
	if d := time.Since(start); d < timeout {
		t.Errorf("stalled c2h failed after %v, before the %v timeout", d, timeout)
	}
	// The other chip's engine is not stalled.
	if err := b.Chip(0).H2C(t.Context(), 0, buf, 0); err != nil {
		t.Errorf("chip 0 DMA while chip 1 is stalled: %v", err)
	}

	c.StallDMA(false)
	if _, err := h2c.WriteAt(buf, 0); err != nil {
		t.Errorf("h2c after the engine recovered: %v", err)
	}
	c.StallDMA(true)
	c.Heal()
	if _, err := c2h.ReadAt(buf, 0); err != nil {
		t.Errorf("c2h after Heal: %v", err)
	}
}

// notPending checks that no event is waiting on ev, through its poll.
func notPending(t *testing.T, ev *sim.Node, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if err := ev.WaitReadable(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("%s: WaitReadable = %v, want no event pending", what, err)
	}
}

func TestNodeEvents(t *testing.T) {
	b, _ := newBoard(t, sim.Config{DDRSize: smallDDR})
	c := b.Chip(0)
	ev := openNode(t, c, "events_5")
	buf := make([]byte, 4)

	c.Interrupt(5)
	if n, err := ev.Read(buf); n != 4 || err != nil || !bytes.Equal(buf, []byte{1, 0, 0, 0}) {
		t.Fatalf("events read: %d %x, %v; want 4 bytes 01000000", n, buf, err)
	}
	notPending(t, ev, "after the read cleared the flag")

	// Interrupts before a read coalesce into one event.
	for range 3 {
		c.Interrupt(5)
	}
	if _, err := ev.Read(buf); err != nil {
		t.Fatalf("read after 3 interrupts: %v", err)
	}
	notPending(t, ev, "after reading the coalesced event")

	// Lines are independent, and so are chips.
	c.Interrupt(6)
	b.Chip(1).Interrupt(5)
	notPending(t, ev, "events_5 of chip 0 after line 6 and chip 1 fired")
}

// TestNodeEventsReadBlocks checks that a read waits for the interrupt and
// nothing else, as the driver's does (it ignores O_NONBLOCK and deadlines).
func TestNodeEventsReadBlocks(t *testing.T) {
	b, _ := newBoard(t, sim.Config{DDRSize: smallDDR})
	c := b.Chip(1)
	ev := openNode(t, c, "events_9")
	done := make(chan error, 1)
	before := goroutinesIn(frameIRQWait)
	go func() {
		_, err := ev.Read(make([]byte, 4))
		done <- err
	}()
	waitBlocked(t, frameIRQWait, before)
	c.Interrupt(8)
	b.Chip(0).Interrupt(9)
	notYet(t, done, "read of events_9 after other lines fired")
	c.Interrupt(9)
	if err := result(t, done); err != nil {
		t.Fatalf("blocked read woken by the interrupt: %v", err)
	}
}

func TestNodeEventsCloseWakesRead(t *testing.T) {
	b, _ := newBoard(t, sim.Config{DDRSize: smallDDR})
	c := b.Chip(0)
	ev, err := c.Node("events_3")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	before := goroutinesIn(frameIRQWait)
	go func() {
		_, err := ev.Read(make([]byte, 4))
		done <- err
	}()
	waitBlocked(t, frameIRQWait, before)
	ev.Close()
	err = result(t, done)
	if !errors.Is(err, os.ErrClosed) {
		t.Fatalf("blocked read after Close: %v, want os.ErrClosed", err)
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		t.Errorf("%v is not a PathError", err)
	}
	// The event a closed node did not read stays for the next reader.
	c.Interrupt(3)
	if _, err := ev.Read(make([]byte, 4)); !errors.Is(err, os.ErrClosed) {
		t.Errorf("read on a closed node: %v", err)
	}
	ev2 := openNode(t, c, "events_3")
	if _, err := ev2.Read(make([]byte, 4)); err != nil {
		t.Errorf("new node did not see the pending event: %v", err)
	}
}

func TestNodeEventsBoardClose(t *testing.T) {
	b, _ := newBoard(t, sim.Config{DDRSize: smallDDR})
	ev := openNode(t, b.Chip(1), "events_0")
	done := make(chan error, 1)
	before := goroutinesIn(frameIRQWait)
	go func() {
		_, err := ev.Read(make([]byte, 4))
		done <- err
	}()
	waitBlocked(t, frameIRQWait, before)
	b.Close()
	wantPathErrno(t, result(t, done), "read", syscall.ENODEV)
}

func TestIRQMaskAndStatus(t *testing.T) {
	b, _ := newBoard(t, sim.Config{DDRSize: smallDDR})
	c := b.Chip(0)
	user := openNode(t, c, "user")
	ev5, ev6 := openNode(t, c, "events_5"), openNode(t, c, "events_6")
	buf := make([]byte, 4)

	if v := rd(t, c, shell.RegIRQMask); v != 0xffff {
		t.Fatalf("IRQ_MASK reset value %#x", v)
	}
	binary.LittleEndian.PutUint32(buf, 0xffff&^(1<<5))
	if _, err := user.WriteAt(buf, shell.RegIRQMask); err != nil {
		t.Fatal(err)
	}
	c.Interrupt(5)
	c.Interrupt(6)
	if v := rd(t, c, shell.RegIRQStatus); v != 1<<6 {
		t.Errorf("IRQ_STATUS %#x after interrupts on masked 5 and enabled 6, want %#x", v, 1<<6)
	}
	notPending(t, ev5, "masked line 5")
	if _, err := ev6.Read(buf); err != nil {
		t.Errorf("line 6: %v", err)
	}
	// Reading the event does not clear the latched status; writing 0 does
	// not either; writing 1 does (RW1C), bit by bit.
	c.Interrupt(7)
	if v := rd(t, c, shell.RegIRQStatus); v != 1<<6|1<<7 {
		t.Errorf("IRQ_STATUS %#x, want bits 6 and 7", v)
	}
	wr(t, c, shell.RegIRQStatus, 0)
	if v := rd(t, c, shell.RegIRQStatus); v != 1<<6|1<<7 {
		t.Errorf("IRQ_STATUS %#x after writing 0", v)
	}
	wr(t, c, shell.RegIRQStatus, 1<<6|1<<5)
	if v := rd(t, c, shell.RegIRQStatus); v != 1<<7 {
		t.Errorf("IRQ_STATUS %#x after clearing bit 6, want bit 7", v)
	}
	// Unmasking does not deliver what fired while masked.
	wr(t, c, shell.RegIRQMask, 0xffffffff)
	if v := rd(t, c, shell.RegIRQMask); v != 0xffff {
		t.Errorf("IRQ_MASK %#x after writing all ones, want the 16 lines", v)
	}
	wantFired(t, c, 5, false)
	c.Interrupt(5)
	wantFired(t, c, 5, true)
	// Interrupts on lines that do not exist are ignored.
	c.Interrupt(-1)
	c.Interrupt(shell.IRQLines)
	if v := rd(t, c, shell.RegIRQStatus); v != 1<<7|1<<5 {
		t.Errorf("IRQ_STATUS %#x", v)
	}
	if err := c.WaitIRQ(t.Context(), shell.IRQLines); err == nil {
		t.Error("WaitIRQ on line 16 succeeded")
	} else {
		wantSimErrno(t, err, syscall.ENODEV)
	}
}

func TestNodeWaitReadable(t *testing.T) {
	b, _ := newBoard(t, sim.Config{DDRSize: smallDDR})
	c := b.Chip(0)
	ev := openNode(t, c, "events_11")
	user := openNode(t, c, "user")
	wantPathErrno(t, user.WaitReadable(t.Context()), "poll", syscall.EINVAL)

	// Nothing pending: gives up with the context.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if err := ev.WaitReadable(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitReadable with nothing pending: %v", err)
	}
	// Woken by the interrupt, without consuming the event.
	done := make(chan error, 1)
	before := goroutinesIn("shell/sim.(*irqLine).ready(")
	go func() { done <- ev.WaitReadable(context.Background()) }()
	waitBlocked(t, "shell/sim.(*irqLine).ready(", before)
	c.Interrupt(11)
	if err := result(t, done); err != nil {
		t.Fatalf("WaitReadable: %v", err)
	}
	if err := ev.WaitReadable(t.Context()); err != nil {
		t.Errorf("WaitReadable with an event pending: %v", err)
	}
	if _, err := ev.Read(make([]byte, 4)); err != nil {
		t.Errorf("the event was consumed by WaitReadable: %v", err)
	}
	// Close wakes it.
	before = goroutinesIn("shell/sim.(*irqLine).ready(")
	go func() { done <- ev.WaitReadable(context.Background()) }()
	waitBlocked(t, "shell/sim.(*irqLine).ready(", before)
	ev.Close()
	if err := result(t, done); !errors.Is(err, os.ErrClosed) {
		t.Errorf("WaitReadable after Close: %v, want os.ErrClosed", err)
	}
}
