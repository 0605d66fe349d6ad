package bitfile

import (
	"errors"
	"fmt"
)

// Categories of malformed files. Every error of this package about a file's
// content is an [*Error] wrapping exactly one of them, so callers can tell
// them apart with errors.Is.
var (
	// ErrHeader: the header is malformed (preamble, keys, lengths,
	// terminators) or exceeds the parser's [Limits].
	ErrHeader = errors.New("bitfile: malformed header")
	// ErrNoSync: the configuration data holds no sync word within its first
	// 1 KiB.
	ErrNoSync = errors.New("bitfile: no sync word")
	// ErrTruncated: the stream ended before the file did: inside the header,
	// before the declared length of configuration data, inside a packet, or
	// before DESYNC.
	ErrTruncated = errors.New("bitfile: truncated")
	// ErrOverflow: the stream holds more bytes than the header declares.
	ErrOverflow = errors.New("bitfile: data beyond the declared length")
	// ErrPacket: after the sync word, a packet is malformed or names an
	// unknown or read-only register, a read, an unknown command, or comes
	// after DESYNC.
	ErrPacket = errors.New("bitfile: malformed packet")
	// ErrCRC: a write to the CRC register does not match the running CRC.
	ErrCRC = errors.New("bitfile: CRC mismatch")
	// ErrNoCRC: the stream desynchronises without having checked the CRC of
	// everything it wrote to the frames.
	ErrNoCRC = errors.New("bitfile: frames not protected by a CRC check")
)

// Error locates and explains why a file was rejected.
type Error struct {
	Err    error  // the category, one of the Err* variables
	Offset int64  // offset in the file of the first byte at fault
	Field  string // what was being read, e.g. "preamble", "field 'b'", "write to CRC"
	Detail string // what is wrong with it
}

func (e *Error) Error() string {
	return fmt.Sprintf("bitfile: %s at offset %d: %s", e.Field, e.Offset, e.Detail)
}

// Unwrap returns the category.
func (e *Error) Unwrap() error { return e.Err }

func errorf(kind error, off int64, field, format string, args ...any) *Error {
	return &Error{Err: kind, Offset: off, Field: field, Detail: fmt.Sprintf(format, args...)}
}
