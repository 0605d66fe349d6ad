package sim_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fpga-faas/faas/shell"
	"github.com/fpga-faas/faas/shell/bitfile"
	"github.com/fpga-faas/faas/shell/sim"
)

// The probe role: a tiny role model defined here so that the simulator's
// tests do not depend on a real role. Registers, from shell.RoleBase:
//
//	0x00 MAGIC    RO  the model's ID
//	0x04 SCRATCH  RW
//	0x08 CHIP     RO  Env.Chip()
//	0x0c RAISE    WO  Env.Raise(value)
//
// Tests reach the role's Env (for role DMA) through the roleLog its model
// records every instance in.
const (
	probeMagic   = 0x00
	probeScratch = 0x04
	probeChip    = 0x08
	probeRaise   = 0x0c
)

// Test role models.
const (
	alphaName    = "alpha"
	alphaID      = 0xa1fa0001
	alphaVersion = 1<<16 | 2
	betaName     = "beta"
	betaID       = 0xbe7a0002
	betaVersion  = 2<<16 | 0
	brokenName   = "broken" // New fails
	brokenID     = 0xb0b0b0b0
)

type probeRole struct {
	env    *sim.Env
	cfg    sim.RoleConfig
	id     uint32
	closed atomic.Bool

	mu      sync.Mutex
	scratch uint32
}

func (r *probeRole) ReadReg(off uint32) uint32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch off {
	case probeMagic:
		return r.id
	case probeScratch:
		return r.scratch
	case probeChip:
		return uint32(r.env.Chip())
	}
	return 0
}

func (r *probeRole) WriteReg(off uint32, v uint32) {
	switch off {
	case probeScratch:
		r.mu.Lock()
		r.scratch = v
		r.mu.Unlock()
	case probeRaise:
		r.env.Raise(int(v))
	}
}

func (r *probeRole) Close() {
	if r.closed.Swap(true) {
		panic("probe role closed twice")
	}
}

// roleLog records every probe role the simulator instantiates.
type roleLog struct {
	mu    sync.Mutex
	roles []*probeRole
}

func (l *roleLog) add(r *probeRole) {
	l.mu.Lock()
	l.roles = append(l.roles, r)
	l.mu.Unlock()
}

func (l *roleLog) all() []*probeRole {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*probeRole(nil), l.roles...)
}

// last returns the role instantiated last.
func (l *roleLog) last(t testing.TB) *probeRole {
	t.Helper()
	rs := l.all()
	if len(rs) == 0 {
		t.Fatal("no role was instantiated")
	}
	return rs[len(rs)-1]
}

// probeModel returns a model of the probe role that logs its instances.
func probeModel(log *roleLog, name string, id, version uint32) sim.RoleModel {
	return sim.RoleModel{
		Name: name, ID: id, Version: version,
		New: func(env *sim.Env, cfg sim.RoleConfig) (sim.Role, error) {
			r := &probeRole{env: env, cfg: cfg, id: id}
			log.add(r)
			return r, nil
		},
	}
}

var errBroken = errors.New("broken role refuses to start")

// testRegistry holds alpha, beta and broken.
func testRegistry(t testing.TB, log *roleLog) *sim.Registry {
	t.Helper()
	r, err := sim.NewRegistry(
		probeModel(log, alphaName, alphaID, alphaVersion),
		probeModel(log, betaName, betaID, betaVersion),
		sim.RoleModel{Name: brokenName, ID: brokenID, Version: 1 << 16,
			New: func(*sim.Env, sim.RoleConfig) (sim.Role, error) { return nil, errBroken }},
	)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// smallDDR keeps test boards cheap; DDR is sparse anyway.
const smallDDR = 64 << 20

// newBoard powers up a board closed at the end of the test. A nil Roles gets
// the test registry, logging into the returned log.
func newBoard(t testing.TB, cfg sim.Config) (*sim.Board, *roleLog) {
	t.Helper()
	log := &roleLog{}
	if cfg.Roles == nil {
		cfg.Roles = testRegistry(t, log)
	}
	b, err := sim.NewBoard(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, log
}

// frames returns n bytes of deterministic, non-trivial frame data.
func frames(n int, seed byte) []byte {
	f := make([]byte, n)
	x := uint32(seed)*2654435761 + 1
	for i := range f {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		f[i] = byte(x)
	}
	return f
}

// header is the .bit header of a partial bitstream for design name on part,
// with extra ";key=value" options.
func header(name string, part shell.Part, opts ...string) bitfile.Header {
	design := name
	for _, o := range opts {
		design += ";" + o
	}
	return bitfile.Header{Design: design + ";PARTIAL=TRUE", Part: part.Name, Date: "2026/11/22", Time: "12:34:56"}
}

// bitstream builds a valid partial bitstream of design name for part.
func bitstream(t testing.TB, name string, part shell.Part, frameBytes int, opts ...string) []byte {
	t.Helper()
	bit, err := bitfile.Build(header(name, part, opts...), part, frames(frameBytes, byte(len(name))))
	if err != nil {
		t.Fatal(err)
	}
	return bit
}

// bitstreamRem builds a valid bitstream whose length modulo 4 is rem, by
// padding an option of the design field.
func bitstreamRem(t testing.TB, name string, part shell.Part, frameBytes, rem int) []byte {
	t.Helper()
	for k := range 4 {
		bit := bitstream(t, name, part, frameBytes, "Pad="+strings.Repeat("x", k))
		if len(bit)%4 == rem {
			return bit
		}
	}
	t.Fatalf("no bitstream of length %% 4 == %d", rem)
	return nil
}

// rd and wr access the user BAR and fail the test on error.
func rd(t testing.TB, c *sim.Chip, off uint64) uint32 {
	t.Helper()
	v, err := c.ReadUser(off)
	if err != nil {
		t.Fatalf("chip %d: read %#x: %v", c.Index(), off, err)
	}
	return v
}

func wr(t testing.TB, c *sim.Chip, off uint64, v uint32) {
	t.Helper()
	if err := c.WriteUser(off, v); err != nil {
		t.Fatalf("chip %d: write %#x: %v", c.Index(), off, err)
	}
}

func rd64(t testing.TB, c *sim.Chip, off uint64) uint64 {
	t.Helper()
	return uint64(rd(t, c, off)) | uint64(rd(t, c, off+4))<<32
}

func wr64(t testing.TB, c *sim.Chip, off uint64, v uint64) {
	t.Helper()
	wr(t, c, off, uint32(v))
	wr(t, c, off+4, uint32(v>>32))
}

// words reads n consecutive registers as little-endian bytes.
func words(t testing.TB, c *sim.Chip, off uint64, n int) []byte {
	t.Helper()
	var b []byte
	for i := range n {
		v := rd(t, c, off+4*uint64(i))
		b = append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
	}
	return b
}

// prStatus reads PR_STATUS.
func prStatus(t testing.TB, c *sim.Chip) (uint32, shell.PRCause) {
	t.Helper()
	return shell.PRStatus(rd(t, c, shell.RegPRStatus))
}

// prBegin decouples the region and begins a stream.
func prBegin(t testing.TB, c *sim.Chip) {
	t.Helper()
	wr(t, c, shell.RegPRControl, shell.PRDecouple)
	wr(t, c, shell.RegPRControl, shell.PRDecouple|shell.PRBegin)
}

// prSend streams data to the PR port in chunks of chunk bytes (0: one
// chunk), padding the last chunk with zeros to the DMA alignment.
func prSend(t testing.TB, c *sim.Chip, data []byte, chunk int) {
	t.Helper()
	if chunk <= 0 {
		chunk = max(len(data), 1)
	}
	for off := 0; off < len(data); off += chunk {
		p := data[off:min(off+chunk, len(data))]
		if pad := len(p) % shell.DMAAlign; pad != 0 {
			p = append(append([]byte(nil), p...), make([]byte, shell.DMAAlign-pad)...)
		}
		if err := c.H2C(context.Background(), 0, p, shell.PRStreamAddr); err != nil {
			t.Fatalf("chip %d: streaming at byte %d: %v", c.Index(), off, err)
		}
	}
}

// prEnd ends the stream and waits for the controller to leave busy.
func prEnd(t testing.TB, c *sim.Chip) (uint32, shell.PRCause) {
	t.Helper()
	wr(t, c, shell.RegPRControl, shell.PRDecouple|shell.PREnd)
	deadline := time.Now().Add(time.Minute)
	for {
		state, cause := prStatus(t, c)
		if state != shell.PRBusy {
			return state, cause
		}
		if time.Now().After(deadline) {
			t.Fatal("PR controller still busy a minute after END")
		}
		time.Sleep(time.Millisecond)
	}
}

// program runs the whole PR protocol with the given chunking and recouples;
// it returns the final state and cause.
func program(t testing.TB, c *sim.Chip, bit []byte, chunk int) (uint32, shell.PRCause) {
	t.Helper()
	prBegin(t, c)
	prSend(t, c, bit, chunk)
	state, cause := prEnd(t, c)
	wr(t, c, shell.RegPRControl, 0)
	return state, cause
}

// mustProgram programs bit and fails the test unless it loads.
func mustProgram(t testing.TB, c *sim.Chip, bit []byte) {
	t.Helper()
	if state, cause := program(t, c, bit, 0); state != shell.PRDone {
		t.Fatalf("chip %d: PR state %d cause %v (%v), want done", c.Index(), state, cause, c.PRError())
	}
}

// fired reports, without blocking, whether IRQ line has an event pending,
// and consumes it.
func fired(c *sim.Chip, line int) bool {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return c.WaitIRQ(ctx, line) == nil
}

// drainIRQs consumes every pending event of the chip.
func drainIRQs(c *sim.Chip) {
	for l := range shell.IRQLines {
		fired(c, l)
	}
}

// wantFired fails the test unless line has an event pending (consuming it).
func wantFired(t testing.TB, c *sim.Chip, line int, want bool) {
	t.Helper()
	if got := fired(c, line); got != want {
		t.Errorf("chip %d: IRQ %d pending = %v, want %v", c.Index(), line, got, want)
	}
}

// wantPathErrno fails the test unless err is an *fs.PathError for op
// wrapping exactly the errno want.
func wantPathErrno(t testing.TB, err error, op string, want syscall.Errno) {
	t.Helper()
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T), want *fs.PathError with %v", err, err, want)
	}
	if pe.Op != op {
		t.Errorf("PathError op %q, want %q (%v)", pe.Op, op, err)
	}
	if got, ok := pe.Err.(syscall.Errno); !ok || got != want {
		t.Errorf("PathError wraps %v (%T), want errno %v (%d)", pe.Err, pe.Err, want, int(want))
	}
}

// wantSimErrno fails the test unless err is a *sim.Error with errno want.
func wantSimErrno(t testing.TB, err error, want syscall.Errno) {
	t.Helper()
	var se *sim.Error
	if !errors.As(err, &se) || se.Errno != want || !errors.Is(err, want) {
		t.Fatalf("error %v (%T), want *sim.Error with %v", err, err, want)
	}
}

// goroutinesIn counts goroutines with frame on their stack.
func goroutinesIn(frame string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	return bytes.Count(buf, []byte(frame))
}

// Frames of the simulator a blocked call waits in.
const (
	frameIRQWait  = "shell/sim.(*irqLine).wait("
	frameCheckDMA = "shell/sim.(*Chip).checkDMA("
)

// waitBlocked waits until more than before goroutines wait in frame: the
// call the test started is blocked there.
func waitBlocked(t testing.TB, frame string, before int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for goroutinesIn(frame) <= before {
		if time.Now().After(deadline) {
			t.Fatalf("no goroutine blocked in %s", frame)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// result waits for a result from ch, failing the test after a minute.
func result[T any](t testing.TB, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatal("call did not return")
		panic("unreachable")
	}
}

// notYet fails the test if ch already has a value.
func notYet[T any](t testing.TB, ch <-chan T, what string) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("%s returned early: %v", what, v)
	default:
	}
}
