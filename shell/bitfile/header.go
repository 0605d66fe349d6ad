package bitfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/fpga-faas/faas/shell"
)

// preamble opens every .bit file: a field of length 9 holding 0ff0 0ff0 0ff0
// 0ff0 00, then the length 1 of the key 'a' that follows it.
var preamble = [13]byte{0x00, 0x09, 0x0f, 0xf0, 0x0f, 0xf0, 0x0f, 0xf0, 0x0f, 0xf0, 0x00, 0x00, 0x01}

// Header is the header of a .bit file.
type Header struct {
	// Design is field 'a' as written: the design name, then options as
	// ";key=value" pairs, e.g. "loopback;UserID=0XFFFFFFFF;PARTIAL=TRUE".
	Design string
	Part   string // field 'b', e.g. "xcvu9p-flgb2104-2-i"; see ForPart
	Date   string // field 'c', e.g. "2024/01/31"
	Time   string // field 'd', e.g. "12:34:56"
	// DataLen is field 'e': the number of bytes of configuration data that
	// follow the header.
	DataLen uint32
}

// Option is one ";key=value" option of the design field.
type Option struct {
	Key, Value string
}

// DesignName returns the design name: the design field up to its first ';'.
func (h Header) DesignName() string {
	name, _, _ := strings.Cut(h.Design, ";")
	return name
}

// Options returns the options of the design field in the order written. An
// option without '=' has an empty value; empty options are skipped.
func (h Header) Options() []Option {
	_, rest, ok := strings.Cut(h.Design, ";")
	if !ok {
		return nil
	}
	var opts []Option
	for item := range strings.SplitSeq(rest, ";") {
		if item == "" {
			continue
		}
		k, v, _ := strings.Cut(item, "=")
		opts = append(opts, Option{Key: k, Value: v})
	}
	return opts
}

// Option returns the value of the first option whose key equals key, ignoring
// case (Vivado writes "PARTIAL", "UserID", "Version").
func (h Header) Option(key string) (string, bool) {
	for _, o := range h.Options() {
		if strings.EqualFold(o.Key, key) {
			return o.Value, true
		}
	}
	return "", false
}

// Partial reports whether the design field marks a partial bitstream
// (PARTIAL=TRUE, as Vivado writes it for the bitstreams of reconfigurable
// partitions).
func (h Header) Partial() bool {
	v, ok := h.Option("PARTIAL")
	return ok && strings.EqualFold(v, "TRUE")
}

// ForPart reports whether the part field names p. Tools spell parts
// differently: "xcvu9p-flgb2104-2-i", or "7a35tcpg236" for xc7a35tcpg236-1
// (no "xc", no speed grade). ForPart compares without case and without the
// "xc" prefix, and lets the field stop at any '-' of p's name, since the
// trailing package, speed grade and temperature range do not change the
// configuration data of a device.
func (h Header) ForPart(p shell.Part) bool {
	got := strings.TrimPrefix(strings.ToLower(h.Part), "xc")
	want := strings.TrimPrefix(strings.ToLower(p.Name), "xc")
	return got != "" && (got == want || strings.HasPrefix(want, got+"-"))
}

// MarshalBinary returns the header as it opens a .bit file. It fails if a
// string holds a NUL or is too long for its 16-bit length.
func (h Header) MarshalBinary() ([]byte, error) {
	fields := [...]struct {
		key   byte
		value string
	}{{'a', h.Design}, {'b', h.Part}, {'c', h.Date}, {'d', h.Time}}
	n := len(preamble) + 1 + 4
	for _, f := range fields {
		if strings.IndexByte(f.value, 0) >= 0 {
			return nil, fmt.Errorf("bitfile: field '%c' holds a NUL", f.key)
		}
		if len(f.value)+1 > math.MaxUint16 {
			return nil, fmt.Errorf("bitfile: field '%c' is %d bytes, more than a 16-bit length allows", f.key, len(f.value))
		}
		n += 3 + len(f.value) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, preamble[:]...)
	for _, f := range fields {
		b = append(b, f.key)
		b = binary.BigEndian.AppendUint16(b, uint16(len(f.value)+1))
		b = append(b, f.value...)
		b = append(b, 0)
	}
	b = append(b, 'e')
	b = binary.BigEndian.AppendUint32(b, h.DataLen)
	return b, nil
}

// ReadHeader reads a header from r with the default [Limits]. It reads up to
// and including the data length (field 'e') and no further, so the
// configuration data can be read from r next.
func ReadHeader(r io.Reader) (Header, error) {
	d := newHeaderDecoder(Limits{})
	var buf []byte
	var off int64
	for !d.done() {
		want := d.want()
		if cap(buf) < want {
			buf = make([]byte, want)
		}
		buf = buf[:want]
		n, err := io.ReadFull(r, buf)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return Header{}, d.truncated(off+int64(n), n)
		}
		if err != nil {
			return Header{}, fmt.Errorf("bitfile: reading header at offset %d: %w", off+int64(n), err)
		}
		if err := d.item(buf, off); err != nil {
			return Header{}, err
		}
		off += int64(want)
	}
	return d.h, nil
}

// Limits bound what a parser accepts, so that a hostile header cannot make
// it buffer or wait for more than the caller wants.
type Limits struct {
	// MaxField is the largest length of a string field (a–d), in bytes with
	// its NUL; 0 means DefaultMaxField.
	MaxField int
	// MaxData is the largest length of configuration data (field 'e'); 0
	// means DefaultMaxData.
	MaxData uint32
}

// Default limits.
const (
	DefaultMaxField = 1024
	DefaultMaxData  = 1 << 30
)

func (l Limits) withDefaults() Limits {
	if l.MaxField <= 0 {
		l.MaxField = DefaultMaxField
	}
	if l.MaxData == 0 {
		l.MaxData = DefaultMaxData
	}
	return l
}

// headerDecoder decodes a header one item at a time: want says how many bytes
// the next item is, and item must then be given exactly that many. Both the
// push parser and ReadHeader drive it, so they agree byte for byte.
type headerDecoder struct {
	lim   Limits
	h     Header
	state headerState
	key   byte // the field being read, 'a' to 'e'
	n     int  // size of the next item
}

type headerState uint8

const (
	statePreamble headerState = iota
	stateKey                  // one byte: the key of the next field
	stateLength               // two bytes: the length of a string field
	stateString               // the string and its NUL
	stateDataLen              // four bytes: the length of the configuration data
	stateDone
)

func newHeaderDecoder(l Limits) *headerDecoder {
	// The preamble ends with the length, 1, of the key 'a' that follows it.
	return &headerDecoder{lim: l.withDefaults(), state: statePreamble, key: 'a', n: len(preamble)}
}

func (d *headerDecoder) want() int  { return d.n }
func (d *headerDecoder) done() bool { return d.state == stateDone }

// field names the part of the header being read, for errors.
func (d *headerDecoder) field() string {
	if d.state == statePreamble {
		return "preamble"
	}
	return fmt.Sprintf("field '%c'", d.key)
}

// item consumes the next item, b, which starts at offset off of the file.
func (d *headerDecoder) item(b []byte, off int64) error {
	switch d.state {
	case statePreamble:
		for i := range b {
			if b[i] != preamble[i] {
				return errorf(ErrHeader, off+int64(i), d.field(), "byte 0x%02x, want 0x%02x", b[i], preamble[i])
			}
		}
		d.state, d.n = stateKey, 1
	case stateKey:
		if b[0] != d.key {
			return errorf(ErrHeader, off, d.field(), "key %q, want %q", rune(b[0]), rune(d.key))
		}
		if d.key == 'e' {
			d.state, d.n = stateDataLen, 4
		} else {
			d.state, d.n = stateLength, 2
		}
	case stateLength:
		n := int(binary.BigEndian.Uint16(b))
		if n == 0 {
			return errorf(ErrHeader, off, d.field(), "length 0, want at least 1 for the NUL")
		}
		if n > d.lim.MaxField {
			return errorf(ErrHeader, off, d.field(), "length %d exceeds limit %d", n, d.lim.MaxField)
		}
		d.state, d.n = stateString, n
	case stateString:
		switch i := bytes.IndexByte(b, 0); {
		case i < 0:
			return errorf(ErrHeader, off+int64(len(b))-1, d.field(), "byte 0x%02x, want the NUL that ends the string", b[len(b)-1])
		case i < len(b)-1:
			return errorf(ErrHeader, off+int64(i), d.field(), "NUL inside the string")
		}
		s := string(b[:len(b)-1])
		switch d.key {
		case 'a':
			d.h.Design = s
		case 'b':
			d.h.Part = s
		case 'c':
			d.h.Date = s
		case 'd':
			d.h.Time = s
		}
		d.key++
		d.state, d.n = stateKey, 1
	case stateDataLen:
		n := binary.BigEndian.Uint32(b)
		if n > d.lim.MaxData {
			return errorf(ErrHeader, off, d.field(), "length %d exceeds limit %d", n, d.lim.MaxData)
		}
		d.h.DataLen = n
		d.state, d.n = stateDone, 0
	}
	return nil
}

// truncated is the error for a file that ends at offset off, got bytes into
// the next item.
func (d *headerDecoder) truncated(off int64, got int) error {
	what := map[headerState]string{
		statePreamble: "preamble",
		stateKey:      "key",
		stateLength:   "length",
		stateString:   "string",
		stateDataLen:  "data length",
	}[d.state]
	if got == 0 {
		return errorf(ErrTruncated, off, d.field(), "file ends before the %s", what)
	}
	return errorf(ErrTruncated, off, d.field(), "file ends after %d of the %d bytes of the %s", got, d.n, what)
}
