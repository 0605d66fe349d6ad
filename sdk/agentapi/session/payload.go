package session

import (
	"encoding/binary"
	"fmt"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/agentapi"
)

var le = binary.LittleEndian

// Hello flags.
const (
	// HelloShm asks for the shared-memory path (unix socket only).
	HelloShm uint32 = 1
)

// Version is the protocol version a Hello carries. Version 2 added the
// profile of a job (stall cycles, queue wait, engine time) to completions.
const Version = 2

// Hello opens the session (OpHello).
type Hello struct {
	Version uint32
	Flags   uint32
}

func (h Hello) Marshal() []byte {
	b := le.AppendUint32(nil, h.Version)
	return le.AppendUint32(b, h.Flags)
}

func ParseHello(p []byte) (Hello, error) {
	if len(p) != 8 {
		return Hello{}, fmt.Errorf("%w: hello of %d bytes", ErrFrame, len(p))
	}
	return Hello{Version: le.Uint32(p), Flags: le.Uint32(p[4:])}, nil
}

// Setup answers Hello. With Shm set, the reply frame carries the control
// memfd (FlagFD) of ControlSize bytes and Entries ring entries.
type Setup struct {
	Shm         bool
	Entries     uint32 // ring entries; also the most jobs in flight
	ControlSize uint64
	Tenant      string // as the agent knows the caller, at most 255 bytes
}

func (s Setup) Marshal() []byte {
	var b []byte
	if s.Shm {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = le.AppendUint32(b, s.Entries)
	b = le.AppendUint64(b, s.ControlSize)
	t := s.Tenant
	if len(t) > 255 {
		t = t[:255]
	}
	b = append(b, byte(len(t)))
	return append(b, t...)
}

func ParseSetup(p []byte) (Setup, error) {
	if len(p) < 14 || p[0] > 1 || len(p) != 14+int(p[13]) {
		return Setup{}, fmt.Errorf("%w: setup of %d bytes", ErrFrame, len(p))
	}
	s := Setup{Shm: p[0] == 1, Entries: le.Uint32(p[1:]), ControlSize: le.Uint64(p[5:]), Tenant: string(p[14:])}
	if s.Entries == 0 || s.Entries > MaxEntries || s.Entries&(s.Entries-1) != 0 {
		return Setup{}, fmt.Errorf("%w: %d ring entries", ErrFrame, s.Entries)
	}
	if s.Shm && s.ControlSize != uint64(ControlSize(s.Entries)) {
		return Setup{}, fmt.Errorf("%w: control block of %d bytes for %d entries", ErrFrame, s.ControlSize, s.Entries)
	}
	return s, nil
}

// U64s encodes fixed fields; ParseU64s decodes exactly n of them.
func U64s(v ...uint64) []byte {
	b := make([]byte, 0, 8*len(v))
	for _, x := range v {
		b = le.AppendUint64(b, x)
	}
	return b
}

// ParseU64s decodes a payload of exactly n little-endian uint64s, or, with
// rest, at least n followed by the rest of the payload.
func ParseU64s(p []byte, n int, rest bool) ([]uint64, []byte, error) {
	if len(p) < 8*n || (!rest && len(p) != 8*n) {
		return nil, nil, fmt.Errorf("%w: payload of %d bytes, want %d fields", ErrFrame, len(p), n)
	}
	v := make([]uint64, n)
	for i := range v {
		v[i] = le.Uint64(p[8*i:])
	}
	return v, p[8*n:], nil
}

// AllocReply answers OpAlloc: the buffer's handle, device address and
// size. On the local path the frame carries the staging memfd, of
// Staging bytes (Size rounded up to a page).
type AllocReply struct {
	Handle, Addr, Size, Staging uint64
}

func (a AllocReply) Marshal() []byte { return U64s(a.Handle, a.Addr, a.Size, a.Staging) }

func ParseAllocReply(p []byte) (AllocReply, error) {
	v, _, err := ParseU64s(p, 4, false)
	if err != nil {
		return AllocReply{}, err
	}
	return AllocReply{Handle: v[0], Addr: v[1], Size: v[2], Staging: v[3]}, nil
}

// Sync directions.
const (
	ToDevice   = 0
	FromDevice = 1
)

// SyncRequest moves [Off, Off+Len) of a buffer between its staging memory
// and the device.
type SyncRequest struct {
	Handle, Off, Len uint64
	Dir              uint64 // ToDevice or FromDevice
}

func (s SyncRequest) Marshal() []byte { return U64s(s.Handle, s.Off, s.Len, s.Dir) }

func ParseSyncRequest(p []byte) (SyncRequest, error) {
	v, _, err := ParseU64s(p, 4, false)
	if err != nil {
		return SyncRequest{}, err
	}
	if v[3] > FromDevice {
		return SyncRequest{}, fmt.Errorf("%w: sync direction %d", ErrFrame, v[3])
	}
	if v[2] > MaxBuffer || v[1] > MaxBuffer {
		return SyncRequest{}, fmt.Errorf("%w: sync of %d bytes at %d", ErrFrame, v[2], v[1])
	}
	return SyncRequest{Handle: v[0], Off: v[1], Len: v[2], Dir: v[3]}, nil
}

// MaxBuffer bounds one buffer's size and every offset into it.
const MaxBuffer = 1 << 40

// EncodeProgram is the payload of OpProgram.
func EncodeProgram(insns []isa.Insn) ([]byte, error) {
	if len(insns) == 0 || len(insns) > MaxInsns {
		return nil, fmt.Errorf("session: program of %d instructions, want 1..%d", len(insns), MaxInsns)
	}
	return isa.EncodeProgram(insns)
}

// DecodeProgram decodes OpProgram's payload.
func DecodeProgram(p []byte) ([]isa.Insn, error) {
	if len(p) == 0 || len(p)%isa.InsnBytes != 0 || len(p)/isa.InsnBytes > MaxInsns {
		return nil, fmt.Errorf("%w: program of %d bytes", ErrFrame, len(p))
	}
	insns, err := isa.DecodeProgram(p)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFrame, err)
	}
	return insns, nil
}

// ErrorPayload is an OpError's payload.
type ErrorPayload struct {
	Code    agentapi.Code
	Message string
}

// Limits of an error's texts; longer ones are cut.
const (
	maxCode    = 64
	maxMessage = 4096
)

func (e ErrorPayload) Marshal() []byte {
	c, m := cut(string(e.Code), maxCode), cut(e.Message, maxMessage)
	b := append([]byte{byte(len(c))}, c...)
	b = le.AppendUint16(b, uint16(len(m)))
	return append(b, m...)
}

func ParseError(p []byte) (ErrorPayload, error) {
	if len(p) < 1 || int(p[0]) > maxCode || len(p) < 3+int(p[0]) {
		return ErrorPayload{}, fmt.Errorf("%w: error of %d bytes", ErrFrame, len(p))
	}
	c := string(p[1 : 1+p[0]])
	rest := p[1+p[0]:]
	n := int(le.Uint16(rest))
	if n > maxMessage || len(rest) != 2+n {
		return ErrorPayload{}, fmt.Errorf("%w: error message of %d bytes", ErrFrame, len(rest))
	}
	return ErrorPayload{Code: agentapi.Code(c), Message: string(rest[2:])}, nil
}

func cut(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// Completion kinds.
const (
	Done        = 0 // the job ran to its last FINISH
	EngineFault = 1 // the engine stopped it: Cause and PC
	Failed      = 2 // it did not run or was cut short: Code and Message
)

// Completion is the end of a job, on the completion ring or in an
// OpCompletion frame: always CompletionSize bytes.
type Completion struct {
	Job   uint64
	Kind  uint8
	Cause alidnn.Cause
	PC    uint32
	Stats alidnn.Stats
	// QueueNS is how long the job waited from its submission to the
	// engine's start (its turn, and any SRAM scrub before it); EngineNS
	// the host time the engine ran it. Not for Failed.
	QueueNS, EngineNS uint64
	Code              agentapi.Code // Failed: at most 24 bytes
	Message           string        // Failed: at most 30 bytes, cut
}

// CompletionSize is the encoded size of a Completion.
const CompletionSize = 128

const (
	maxCompCode = 24
	maxCompMsg  = 30
)

// Put encodes c into b[:CompletionSize].
func (c *Completion) Put(b []byte) {
	b = b[:CompletionSize]
	clear(b)
	le.PutUint64(b, c.Job)
	b[8], b[9] = c.Kind, byte(c.Cause)
	le.PutUint32(b[12:], c.PC)
	s := &c.Stats
	le.PutUint32(b[16:], s.JobID)
	le.PutUint32(b[20:], s.Insns)
	le.PutUint64(b[24:], s.Cycles)
	le.PutUint64(b[32:], s.MACs)
	le.PutUint64(b[40:], s.LoadBytes)
	le.PutUint64(b[48:], s.StoreBytes)
	le.PutUint32(b[56:], s.BusyLoad)
	le.PutUint32(b[60:], s.BusyCompute)
	le.PutUint32(b[64:], s.BusyStore)
	le.PutUint32(b[68:], uint32(s.ClockMHz))
	// The tail is a failure's code and message, or the profile of a job
	// that ran.
	if c.Kind == Failed {
		code, msg := cut(string(c.Code), maxCompCode), cut(c.Message, maxCompMsg)
		b[72] = byte(len(code))
		copy(b[73:], code)
		b[97] = byte(len(msg))
		copy(b[98:], msg)
		return
	}
	le.PutUint32(b[72:], s.StallLoad)
	le.PutUint32(b[76:], s.StallCompute)
	le.PutUint32(b[80:], s.StallStore)
	le.PutUint64(b[84:], c.QueueNS)
	le.PutUint64(b[92:], c.EngineNS)
}

// profileEnd is where the profile tail of a Done or EngineFault
// completion ends; the bytes after it are zero.
const profileEnd = 100

// Marshal returns c encoded.
func (c *Completion) Marshal() []byte {
	b := make([]byte, CompletionSize)
	c.Put(b)
	return b
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// ParseCompletion decodes CompletionSize bytes.
func ParseCompletion(b []byte) (Completion, error) {
	if len(b) != CompletionSize {
		return Completion{}, fmt.Errorf("%w: completion of %d bytes", ErrFrame, len(b))
	}
	c := Completion{Job: le.Uint64(b), Kind: b[8], Cause: alidnn.Cause(b[9]), PC: le.Uint32(b[12:])}
	if c.Kind > Failed || b[10] != 0 || b[11] != 0 {
		return Completion{}, fmt.Errorf("%w: completion fields", ErrFrame)
	}
	c.Stats = alidnn.Stats{JobID: le.Uint32(b[16:]), Insns: le.Uint32(b[20:]), Cycles: le.Uint64(b[24:]),
		MACs: le.Uint64(b[32:]), LoadBytes: le.Uint64(b[40:]), StoreBytes: le.Uint64(b[48:]),
		BusyLoad: le.Uint32(b[56:]), BusyCompute: le.Uint32(b[60:]), BusyStore: le.Uint32(b[64:]),
		ClockMHz: int(le.Uint32(b[68:]))}
	if c.Kind != Failed {
		if !allZero(b[profileEnd:]) {
			return Completion{}, fmt.Errorf("%w: completion fields", ErrFrame)
		}
		c.Stats.StallLoad, c.Stats.StallCompute, c.Stats.StallStore = le.Uint32(b[72:]), le.Uint32(b[76:]), le.Uint32(b[80:])
		c.QueueNS, c.EngineNS = le.Uint64(b[84:]), le.Uint64(b[92:])
		return c, nil
	}
	if b[72] > maxCompCode || b[97] > maxCompMsg {
		return Completion{}, fmt.Errorf("%w: completion fields", ErrFrame)
	}
	c.Code = agentapi.Code(b[73 : 73+b[72]])
	c.Message = string(b[98 : 98+b[97]])
	return c, nil
}

// SubmitEntry is a job: run program Prog as job Job. It is the payload of
// OpSubmit and an entry of the submission ring (SubmitSize bytes).
type SubmitEntry struct {
	Prog, Job uint64
}

// SubmitSize is the encoded size of a SubmitEntry.
const SubmitSize = 16

func ParseSubmit(p []byte) (SubmitEntry, error) {
	v, _, err := ParseU64s(p, 2, false)
	if err != nil {
		return SubmitEntry{}, err
	}
	return SubmitEntry{Prog: v[0], Job: v[1]}, nil
}
