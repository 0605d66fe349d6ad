package faas

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/faas/tracefile"
)

// Recorder is told, in order, what a session does that a replay needs:
// buffers allocated and freed (by device address), bytes written to the
// device and read back from it, programs stored and freed, jobs submitted
// and ended.
// Package sdk/faas/tracefile writes it to a trace file that `faas trace
// replay` re-runs. Calls come from the goroutines that use the Device,
// one at a time for a given buffer or job; a Recorder serialises them.
// The slices it is given are valid during the call only.
type Recorder interface {
	RecordAlloc(addr uint64, size int64)
	RecordFree(addr uint64)
	RecordWrite(addr uint64, off int64, p []byte)
	RecordRead(addr uint64, off int64, p []byte)
	RecordProgram(id uint64, insns []isa.Insn)
	RecordFreeProgram(id uint64)
	RecordSubmit(job, program uint64)
	RecordDone(job uint64, st alidnn.Stats, failed bool)
}

// Record makes the device tell r what it does from now on; call it before
// allocating buffers, as a replay needs every buffer a program names. nil
// stops recording.
func (d *Device) Record(r Recorder) {
	if r == nil {
		d.rec.Store(nil)
		return
	}
	d.rec.Store(&r)
}

// recorder returns the device's recorder, or nil.
func (d *Device) recorder() Recorder {
	if p := d.rec.Load(); p != nil {
		return *p
	}
	return nil
}

// TraceEnv names the environment variable that makes every session of the
// process record a trace (`faas trace record` sets it): the first session
// opened records to its value, a path, and later ones to PATH.2, PATH.3, ….
const TraceEnv = "FAAS_TRACE"

var traceSeq atomic.Int64

// traceTo records d, a session on slot d.slot, to a new trace file at path
// (numbered after the process's first).
func (c *Client) traceTo(ctx context.Context, d *Device, path string) error {
	if n := traceSeq.Add(1); n > 1 {
		path += "." + strconv.FormatInt(n, 10)
	}
	s, err := c.Slot(ctx, d.slot)
	if err != nil {
		return fmt.Errorf("faas: $%s: %w", TraceEnv, err)
	}
	h := tracefile.Header{Tenant: d.tenant, Slot: d.slot, BoardModel: s.BoardModel, Recorded: time.Now().UTC()}
	if s.Role != nil {
		h.Role, h.RoleVersion = s.Role.Name, s.Role.Version
	}
	if s.Image != nil {
		h.Image = s.Image.Ref
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("faas: $%s: %w", TraceEnv, err)
	}
	w, err := tracefile.NewWriter(f, h)
	if err != nil {
		f.Close()
		return fmt.Errorf("faas: $%s: %w", TraceEnv, err)
	}
	d.trace = w
	d.Record(w)
	return nil
}
