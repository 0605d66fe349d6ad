// Package tracefile is the file format of session traces: what a tenant's
// program did on a slot — buffers, the bytes written to the device and
// read back, programs, jobs — recorded through a faas.Recorder so that
// `faas trace replay` can run it again on any compatible slot and check
// that every result is bit-identical.
//
// # Format
//
// A trace is a stream of little-endian records after a fixed start:
//
//	magic    8 bytes  "FAASTRC\x00"
//	version  uint32   1
//	header   uint32 length, then JSON (Header)
//	records  each: kind uint8, length uint32, payload
//	trailer  kind 0xff, length 32, the SHA-256 of every byte before it
//
// Payloads (u64 is a little-endian uint64):
//
//	alloc    addr u64, size u64
//	free     addr u64
//	write    addr u64, offset u64, bytes
//	read     addr u64, offset u64, bytes (what the program read back)
//	program  id u64, then the instructions as sdk/agentapi/session encodes them
//	free-program  id u64 (kind 8: a stored program freed)
//	submit   job u64, program u64, ns since the trace began u64
//	done     job u64, ns u64, failed u8, then the engine's counters (cycles,
//	         MACs, bytes loaded and stored, instructions: u64 each)
//
// A reader refuses another magic or version, a record past MaxRecord, a
// file past its limit, and a file whose trailer is missing or does not
// match: a trace that was cut or altered is not replayed.
package tracefile

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/agentapi/session"
)

// Version is the format version this package writes and reads.
const Version = 1

const magic = "FAASTRC\x00"

// Limits.
const (
	MaxRecord  = session.MaxBuffer + 64 // a write or read of a whole buffer
	maxHeader  = 64 << 10
	DefaultMax = 4 << 30 // Read's default limit on a file
)

// Kind is a record's kind.
type Kind uint8

// Record kinds.
const (
	KindAlloc   Kind = 1
	KindFree    Kind = 2
	KindWrite   Kind = 3
	KindRead    Kind = 4
	KindProgram Kind = 5
	KindSubmit  Kind = 6
	KindDone    Kind = 7
	// KindFreeProgram: a stored program freed (its ID); traces before it
	// never free one.
	KindFreeProgram Kind = 8
	kindTrailer     Kind = 0xff
)

// ErrFormat is wrapped by every error about a trace's contents.
var ErrFormat = errors.New("tracefile: bad trace")

// Header describes where a trace was recorded.
type Header struct {
	Tenant      string    `json:"tenant"`
	Slot        int       `json:"slot"`
	BoardModel  string    `json:"board_model"`
	Role        string    `json:"role"`         // the slot's role name, e.g. "alidnn"
	RoleVersion string    `json:"role_version"` // major.minor
	Image       string    `json:"image,omitempty"`
	Recorded    time.Time `json:"recorded"`
}

// Writer records a session into a trace: it is a faas.Recorder. Close
// writes the trailer; a trace without it does not replay.
type Writer struct {
	mu    sync.Mutex
	w     *bufio.Writer
	c     io.Closer // closed by Close, if not nil
	h     hash.Hash
	start time.Time
	err   error
	buf   []byte
}

// NewWriter starts a trace on w with header h. If w is an io.Closer, Close
// closes it.
func NewWriter(w io.Writer, h Header) (*Writer, error) {
	hb, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	t := &Writer{w: bufio.NewWriterSize(w, 1<<20), h: sha256.New(), start: time.Now()}
	if c, ok := w.(io.Closer); ok {
		t.c = c
	}
	b := append([]byte(magic), 0, 0, 0, 0, 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(b[8:], Version)
	binary.LittleEndian.PutUint32(b[12:], uint32(len(hb)))
	t.put(append(b, hb...))
	return t, t.err
}

func (t *Writer) put(b []byte) {
	if t.err != nil {
		return
	}
	t.h.Write(b)
	_, t.err = t.w.Write(b)
}

// record writes one record: its fixed fields, then data.
func (t *Writer) record(k Kind, data []byte, fields ...uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 8*len(fields) + len(data)
	if n > MaxRecord {
		t.err = fmt.Errorf("tracefile: a %d-byte record", n)
		return
	}
	b := append(t.buf[:0], byte(k), 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(b[1:], uint32(n))
	for _, f := range fields {
		b = binary.LittleEndian.AppendUint64(b, f)
	}
	t.buf = b
	t.put(b)
	t.put(data)
}

func (t *Writer) ns() uint64 { return uint64(time.Since(t.start)) }

func (t *Writer) RecordAlloc(addr uint64, size int64) { t.record(KindAlloc, nil, addr, uint64(size)) }
func (t *Writer) RecordFree(addr uint64)              { t.record(KindFree, nil, addr) }
func (t *Writer) RecordWrite(addr uint64, off int64, p []byte) {
	t.record(KindWrite, p, addr, uint64(off))
}
func (t *Writer) RecordRead(addr uint64, off int64, p []byte) {
	t.record(KindRead, p, addr, uint64(off))
}
func (t *Writer) RecordProgram(id uint64, insns []isa.Insn) {
	b, err := session.EncodeProgram(insns)
	if err != nil {
		t.mu.Lock()
		t.err = fmt.Errorf("tracefile: program %d: %w", id, err)
		t.mu.Unlock()
		return
	}
	t.record(KindProgram, b, id)
}
func (t *Writer) RecordFreeProgram(id uint64)      { t.record(KindFreeProgram, nil, id) }
func (t *Writer) RecordSubmit(job, program uint64) { t.record(KindSubmit, nil, job, program, t.ns()) }
func (t *Writer) RecordDone(job uint64, st alidnn.Stats, failed bool) {
	f := []byte{0}
	if failed {
		f[0] = 1
	}
	t.record(KindDone, f, job, t.ns(), st.Cycles, st.MACs, st.LoadBytes, st.StoreBytes, uint64(st.Insns))
}

// Err returns the first error of the writer, if any: a recording that
// failed (a full disk) is not a trace.
func (t *Writer) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// Close writes the trailer and flushes the trace.
func (t *Writer) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err == nil {
		b := []byte{byte(kindTrailer), 32, 0, 0, 0}
		t.put(b)
		sum := t.h.Sum(nil)
		if t.err == nil {
			_, t.err = t.w.Write(sum)
		}
	}
	if t.err == nil {
		t.err = t.w.Flush()
	}
	if t.c != nil {
		if err := t.c.Close(); t.err == nil {
			t.err = err
		}
	}
	return t.err
}
