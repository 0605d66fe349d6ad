package session

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
)

// Protocol is the value of the Upgrade header.
const Protocol = "faas-session/1"

// Limits of a frame.
const (
	HeaderSize = 16
	// MaxData is the most payload bytes one OpWrite or OpRead moves.
	MaxData = 16 << 20
	// MaxPayload bounds any frame's payload: MaxData plus room for the
	// request's fields.
	MaxPayload = MaxData + 64
	// MaxInsns is the longest program one OpProgram frame carries.
	MaxInsns = MaxData / 16
)

// Op is a frame's operation.
type Op uint8

// Ops.
const (
	OpHello      Op = 1  // client → agent: Hello
	OpAlloc      Op = 2  // AllocRequest → AllocReply
	OpFree       Op = 3  // HandleRequest → empty
	OpWrite      Op = 4  // WriteRequest (with data) → empty
	OpRead       Op = 5  // RangeRequest → data
	OpSync       Op = 6  // SyncRequest → empty; local path only
	OpProgram    Op = 7  // encoded instructions → HandleRequest
	OpSubmit     Op = 8  // SubmitEntry; no reply, a Completion follows
	OpCompletion Op = 9  // agent → client: Completion
	OpDoorbell   Op = 10 // either way, empty: "look at your ring"
	OpClose      Op = 11 // → empty; then the agent closes the connection
	OpReply      Op = 12 // agent → client: success of request id
	OpError      Op = 13 // agent → client: ErrorPayload for request id
	OpCancel     Op = 14 // job id → empty; the job's completion follows
	opMax        Op = 15
)

var opNames = [...]string{"", "hello", "alloc", "free", "write", "read", "sync", "program", "submit",
	"completion", "doorbell", "close", "reply", "error", "cancel"}

func (o Op) String() string {
	if o > 0 && o < opMax {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Frame flags.
const (
	// FlagFD: one file descriptor travels with this frame (SCM_RIGHTS on
	// the first byte of its header).
	FlagFD   uint8 = 1
	flagMask       = FlagFD
)

// Errors of decoding.
var (
	ErrFrame   = errors.New("session: malformed frame")
	ErrTooLong = errors.New("session: frame payload too long")
)

// Frame is one message.
type Frame struct {
	Op      Op
	Flags   uint8
	ID      uint64 // request id; 0 for completions and doorbells
	Payload []byte
}

// AppendHeader appends the header of f (with payload length n) to b.
func AppendHeader(b []byte, op Op, flags uint8, id uint64, n int) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	b = append(b, byte(op), flags, 0, 0)
	return binary.LittleEndian.AppendUint64(b, id)
}

// Marshal returns f's header and payload as one slice.
func (f *Frame) Marshal() []byte {
	b := make([]byte, 0, HeaderSize+len(f.Payload))
	b = AppendHeader(b, f.Op, f.Flags, f.ID, len(f.Payload))
	return append(b, f.Payload...)
}

// coalesceMax is the largest frame WriteFrame sends in a single Write.
const coalesceMax = 64 << 10

// WriteFrame writes one frame to w, its payload the concatenation of parts.
// A frame of up to 64 KiB goes out in one Write, assembled in *scratch
// (kept for the next call; the caller serialises calls, as it must for
// frames not to interleave): on TLS, which has no writev, a header written
// on its own costs its own record and system call, which doubled a remote
// job's round trip. Larger frames are written as net.Buffers, a writev
// where the connection has one.
func WriteFrame(w io.Writer, scratch *[]byte, op Op, id uint64, parts ...[]byte) error {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if HeaderSize+n <= coalesceMax {
		b := AppendHeader((*scratch)[:0], op, 0, id, n)
		for _, p := range parts {
			b = append(b, p...)
		}
		*scratch = b
		_, err := w.Write(b)
		return err
	}
	bufs := make(net.Buffers, 0, 1+len(parts))
	bufs = append(bufs, AppendHeader(make([]byte, 0, HeaderSize), op, 0, id, n))
	bufs = append(bufs, parts...)
	_, err := bufs.WriteTo(w)
	return err
}

// ParseHeader decodes a frame header; it checks the op, the flags and the
// length against max.
func ParseHeader(h []byte, max int) (op Op, flags uint8, id uint64, n int, err error) {
	if len(h) < HeaderSize {
		return 0, 0, 0, 0, fmt.Errorf("%w: header of %d bytes", ErrFrame, len(h))
	}
	n64 := binary.LittleEndian.Uint32(h)
	op, flags = Op(h[4]), h[5]
	id = binary.LittleEndian.Uint64(h[8:])
	switch {
	case op == 0 || op >= opMax:
		return 0, 0, 0, 0, fmt.Errorf("%w: unknown op %d", ErrFrame, h[4])
	case flags&^flagMask != 0 || h[6] != 0 || h[7] != 0:
		return 0, 0, 0, 0, fmt.Errorf("%w: reserved bits set", ErrFrame)
	case uint64(n64) > uint64(max):
		return 0, 0, 0, 0, fmt.Errorf("%w: %d bytes, at most %d", ErrTooLong, n64, max)
	}
	return op, flags, id, int(n64), nil
}

// ReadFrame reads one frame of at most max payload bytes from r.
func ReadFrame(r io.Reader, max int) (Frame, error) {
	var h [HeaderSize]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return Frame{}, err
	}
	op, flags, id, n, err := ParseHeader(h[:], max)
	if err != nil {
		return Frame{}, err
	}
	f := Frame{Op: op, Flags: flags, ID: id}
	if n > 0 {
		f.Payload = make([]byte, n)
		if _, err := io.ReadFull(r, f.Payload); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return Frame{}, err
		}
	}
	return f, nil
}
