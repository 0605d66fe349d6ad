package tracefile

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/agentapi/session"
)

// Record is one record of a trace; which fields are set depends on Kind.
type Record struct {
	Kind    Kind
	Addr    uint64 // alloc, free, write, read: the buffer's device address when recorded
	Off     uint64 // write, read
	Size    uint64 // alloc
	Data    []byte // write, read
	ID      uint64 // program
	Insns   []isa.Insn
	Job     uint64 // submit, done
	Program uint64 // submit
	NS      uint64 // submit, done: since the trace began
	Failed  bool   // done
	Stats   alidnn.Stats
}

// Trace is a whole trace, checked.
type Trace struct {
	Header  Header
	Records []Record
}

// Read reads and checks a trace of at most max bytes (DefaultMax if max
// is 0).
func Read(r io.Reader, max int64) (*Trace, error) {
	if max <= 0 {
		max = DefaultMax
	}
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrFormat, max)
	}
	return Parse(data)
}

// Parse checks and decodes a trace held in data. The records' Data alias
// data.
func Parse(data []byte) (*Trace, error) {
	bad := func(at int, format string, args ...any) error {
		return fmt.Errorf("%w: at byte %d: %s", ErrFormat, at, fmt.Sprintf(format, args...))
	}
	if len(data) < 16 || !bytes.Equal(data[:8], []byte(magic)) {
		return nil, bad(0, "not a trace (no FAASTRC magic)")
	}
	le := binary.LittleEndian
	if v := le.Uint32(data[8:]); v != Version {
		return nil, bad(8, "format version %d, this reader knows %d", v, Version)
	}
	hl := int(le.Uint32(data[12:]))
	if hl > maxHeader || 16+hl > len(data) {
		return nil, bad(12, "header of %d bytes", hl)
	}
	t := &Trace{}
	dec := json.NewDecoder(bytes.NewReader(data[16 : 16+hl]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t.Header); err != nil {
		return nil, bad(16, "header: %v", err)
	}
	at := 16 + hl
	for {
		if at+5 > len(data) {
			return nil, bad(at, "the trace ends without its checksum: it was cut short")
		}
		k, n := Kind(data[at]), int(le.Uint32(data[at+1:]))
		body := at + 5
		if n > MaxRecord || body+n > len(data) {
			return nil, bad(at, "record of %d bytes", n)
		}
		p := data[body : body+n]
		if k == kindTrailer {
			sum := sha256.Sum256(data[:body])
			if n != 32 || !bytes.Equal(p, sum[:]) {
				return nil, bad(at, "checksum mismatch: the trace was altered")
			}
			if body+n != len(data) {
				return nil, bad(body+n, "%d bytes after the checksum", len(data)-body-n)
			}
			return t, nil
		}
		rec, err := parseRecord(k, p)
		if err != nil {
			return nil, bad(at, "%v", err)
		}
		t.Records = append(t.Records, rec)
		at = body + n
	}
}

func parseRecord(k Kind, p []byte) (Record, error) {
	r := Record{Kind: k}
	fields := func(n int) ([]uint64, []byte, error) {
		if len(p) < 8*n {
			return nil, nil, fmt.Errorf("record kind %d of %d bytes", k, len(p))
		}
		v := make([]uint64, n)
		for i := range v {
			v[i] = binary.LittleEndian.Uint64(p[8*i:])
		}
		return v, p[8*n:], nil
	}
	exact := func(n int) ([]uint64, error) {
		v, rest, err := fields(n)
		if err == nil && len(rest) != 0 {
			err = fmt.Errorf("record kind %d of %d bytes", k, len(p))
		}
		return v, err
	}
	switch k {
	case KindAlloc:
		v, err := exact(2)
		if err != nil {
			return r, err
		}
		r.Addr, r.Size = v[0], v[1]
		if r.Size == 0 || r.Size > session.MaxBuffer {
			return r, fmt.Errorf("buffer of %d bytes", r.Size)
		}
	case KindFree:
		v, err := exact(1)
		if err != nil {
			return r, err
		}
		r.Addr = v[0]
	case KindWrite, KindRead:
		v, rest, err := fields(2)
		if err != nil {
			return r, err
		}
		r.Addr, r.Off, r.Data = v[0], v[1], rest
	case KindProgram:
		v, rest, err := fields(1)
		if err != nil {
			return r, err
		}
		r.ID = v[0]
		if r.Insns, err = session.DecodeProgram(rest); err != nil {
			return r, fmt.Errorf("program %d: %v", r.ID, err)
		}
	case KindFreeProgram:
		v, err := exact(1)
		if err != nil {
			return r, err
		}
		r.ID = v[0]
	case KindSubmit:
		v, err := exact(3)
		if err != nil {
			return r, err
		}
		r.Job, r.Program, r.NS = v[0], v[1], v[2]
	case KindDone:
		v, rest, err := fields(7)
		if err != nil {
			return r, err
		}
		if len(rest) != 1 || rest[0] > 1 || v[6] > 1<<32-1 {
			return r, fmt.Errorf("done record of job %d", v[0])
		}
		r.Job, r.NS, r.Failed = v[0], v[1], rest[0] == 1
		r.Stats = alidnn.Stats{Cycles: v[2], MACs: v[3], LoadBytes: v[4], StoreBytes: v[5], Insns: uint32(v[6])}
	default:
		return r, fmt.Errorf("record kind %d", k)
	}
	return r, nil
}
