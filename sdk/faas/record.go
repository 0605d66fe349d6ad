package faas

import (
	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
)

// Recorder is told, in order, what a session does that a replay needs:
// buffers allocated and freed (by device address), bytes written to the
// device and read back from it, programs stored, jobs submitted and ended.
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
