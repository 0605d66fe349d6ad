package sessions_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	alidnnmodel "github.com/fpga-faas/faas/bitstreams/alidnn/model"
	"github.com/fpga-faas/faas/services/agent/device"
	devsim "github.com/fpga-faas/faas/services/agent/device/sim"
	"github.com/fpga-faas/faas/services/agent/sessions"
	"github.com/fpga-faas/faas/shell/sim"
)

// ddrSize is the simulated chip's DDR: small, so zeroing a region is quick.
const ddrSize = 64 << 20

// newChip powers up a simulated board and programs the AliDNN engine into
// chip 0 through the shell's partial-reconfiguration path.
func newChip(tb testing.TB) *device.Chip {
	tb.Helper()
	roles, err := sim.NewRegistry(alidnnmodel.Model)
	if err != nil {
		tb.Fatal(err)
	}
	sb, err := sim.NewBoard(sim.Config{Roles: roles, DDRSize: ddrSize})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { sb.Close() })
	b, err := devsim.Open(sb)
	if err != nil {
		tb.Fatal(err)
	}
	chip := b.Chips[0]
	bit, err := alidnn.Bitstream(chip.Part(), 64<<10)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := chip.Program(context.Background(), bytes.NewReader(bit), nil); err != nil {
		tb.Fatal(err)
	}
	return chip
}

// newEngine returns an engine on a fresh chip with its scheduler running
// until the test ends.
func newEngine(tb testing.TB, cfg sessions.Config) (*sessions.Engine, *device.Chip) {
	tb.Helper()
	chip := newChip(tb)
	cfg.Chip = chip
	if cfg.Limit == 0 {
		cfg.DDRSize = chip.DDRSize()
	}
	e, err := sessions.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("Run: %v", err)
		}
	})
	return e, chip
}

func open(tb testing.TB, e *sessions.Engine, tenant string) *sessions.Session {
	tb.Helper()
	s, err := e.Open(tenant)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func alloc(tb testing.TB, s *sessions.Session, n uint64) sessions.Buffer {
	tb.Helper()
	b, err := s.Alloc(n)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func program(tb testing.TB, s *sessions.Session, insns []isa.Insn) sessions.Handle {
	tb.Helper()
	p, err := s.Program(context.Background(), insns)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

func asm(tb testing.TB, src string) []isa.Insn {
	tb.Helper()
	p, err := isa.Assemble(src)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

var finishOnly = []isa.Insn{{Op: isa.OpFinish, JobID: 7}}

// next receives the session's next completion.
func next(tb testing.TB, s *sessions.Session) sessions.Completion {
	tb.Helper()
	select {
	case c, ok := <-s.Completions():
		if !ok {
			tb.Fatal("completions closed")
		}
		return c
	case <-time.After(10 * time.Second):
		tb.Fatal("no completion in 10 s")
	}
	return sessions.Completion{}
}

// run submits p as job id and waits for its completion.
func run(tb testing.TB, s *sessions.Session, p sessions.Handle, id uint64) sessions.Completion {
	tb.Helper()
	if err := s.Submit(p, id); err != nil {
		tb.Fatal(err)
	}
	c := next(tb, s)
	if c.Job != id {
		tb.Fatalf("completion of job %d, want %d", c.Job, id)
	}
	return c
}

func i32s(b []byte) []int32 {
	out := make([]int32, len(b)/4)
	for k := range out {
		out[k] = int32(binary.LittleEndian.Uint32(b[4*k:]))
	}
	return out
}

func le32(vs ...int32) []byte {
	b := make([]byte, 4*len(vs))
	for k, v := range vs {
		binary.LittleEndian.PutUint32(b[4*k:], uint32(v))
	}
	return b
}

func isEngineError(err error, cause alidnn.Cause) bool {
	var ee *alidnn.EngineError
	return errors.As(err, &ee) && ee.Cause == cause
}
