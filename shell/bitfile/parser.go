package bitfile

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"hash"
)

// syncWindow is how far into the configuration data the sync word must end.
// Vivado writes at most a few dozen bytes before it; a stream that goes on
// longer is not a bitstream, and the controller should say so early.
const syncWindow = 1024

// maxCommands bounds Result.Commands. Vivado writes a few dozen commands; a
// stream of millions of CMD writes must not grow memory without bound.
const maxCommands = 1024

// Result is what a complete, valid stream told the configuration engine.
type Result struct {
	Header Header
	// IDCode is the value written to IDCODE, 0 if none was. The engine
	// refuses a stream whose IDCODE is not its chip's.
	IDCode uint32
	// FrameBytes is the number of bytes written to FDRI.
	FrameBytes int64
	// FrameDigest is the SHA-256 of the bytes written to FDRI, in order.
	// Role models derive their behaviour from it.
	FrameDigest [32]byte
	// CRC is the value of the last passing CRC check.
	CRC uint32
	// Commands are the values written to CMD, in order.
	Commands []Command
}

// Parser validates a .bit file pushed to it in chunks of any size, as the PR
// controller receives it over DMA. It holds no more than one header field and
// one word of the file at a time.
//
// Write reports the first problem as soon as its bytes arrive; after an error,
// every Write and Close returns that error again.
type Parser struct {
	off int64 // offset in the file of the next byte
	err error // first error; sticky

	// Header.
	hd  *headerDecoder
	buf []byte // the part of the header item received so far

	// Configuration data.
	dataStart int64  // offset of the configuration data
	dataEnd   int64  // offset just past it
	synced    bool   // seen the sync word
	hunted    int    // bytes of configuration data searched for the sync word
	shift     uint32 // the last four bytes searched
	part      [4]byte
	npart     int // bytes of the current word in part
	scratch   [4]byte

	// Packets.
	at       int64    // offset of the current packet's header
	reg      register // register the current packet writes
	left     uint32   // data words still to come in the current packet
	type1Reg register // register of the last type 1 write, for type 2
	type1    bool     // seen a type 1 write
	desynced bool

	// Configuration engine.
	crc       uint32
	checks    int   // passing CRC checks
	unchecked int64 // offset of the first FDRI word not yet covered by a check, or -1
	lastCheck uint32
	idcode    uint32
	hasID     bool
	frames    int64
	digest    hash.Hash
	commands  []Command
}

// NewParser returns a parser that enforces the given limits.
func NewParser(l Limits) *Parser {
	return &Parser{hd: newHeaderDecoder(l), unchecked: -1, digest: sha256.New()}
}

// Header returns the header once it has been received in full.
func (p *Parser) Header() (Header, bool) {
	if !p.hd.done() {
		return Header{}, false
	}
	return p.hd.h, true
}

// Write consumes the next chunk of the file. On error, n is the number of
// bytes of b before the first byte at fault.
func (p *Parser) Write(b []byte) (n int, err error) {
	if p.err != nil {
		return 0, p.err
	}
	start, total := p.off, len(b)
	defer func() {
		if err != nil {
			p.err = err
			n = 0
			var e *Error
			if errors.As(err, &e) && e.Offset > start {
				n = int(min(e.Offset-start, int64(total)))
			}
		}
	}()
	if !p.hd.done() {
		k, err := p.writeHeader(b)
		if err != nil {
			return 0, err
		}
		b = b[k:]
	}
	if len(b) == 0 {
		return total, nil
	}
	over := int64(len(b)) - (p.dataEnd - p.off)
	if over > 0 {
		b = b[:len(b)-int(over)]
	}
	if err := p.writeData(b); err != nil {
		return 0, err
	}
	if over > 0 {
		return 0, errorf(ErrOverflow, p.off, "configuration data", "the header declares %d bytes of configuration data, and the file goes on", p.hd.h.DataLen)
	}
	return total, nil
}

// writeHeader feeds header items to the decoder and returns how many bytes
// of b it took.
func (p *Parser) writeHeader(b []byte) (int, error) {
	n := 0
	for !p.hd.done() && n < len(b) {
		want := p.hd.want()
		k := min(want-len(p.buf), len(b)-n)
		p.buf = append(p.buf, b[n:n+k]...)
		n += k
		p.off += int64(k)
		if len(p.buf) < want {
			break
		}
		if err := p.hd.item(p.buf, p.off-int64(want)); err != nil {
			return n, err
		}
		p.buf = p.buf[:0]
	}
	if p.hd.done() {
		p.buf = nil
		p.dataStart = p.off
		p.dataEnd = p.off + int64(p.hd.h.DataLen)
	}
	return n, nil
}

// writeData consumes configuration data, all of which lies within DataLen.
func (p *Parser) writeData(b []byte) error {
	if !p.synced {
		k, err := p.hunt(b)
		if err != nil {
			return err
		}
		b = b[k:]
	}
	for len(b) > 0 {
		switch {
		case p.npart > 0 || len(b) < 4:
			k := copy(p.part[p.npart:], b)
			p.npart += k
			p.off += int64(k)
			b = b[k:]
			if p.npart < 4 {
				return nil
			}
			p.npart = 0
			if err := p.word(binary.BigEndian.Uint32(p.part[:]), p.off-4); err != nil {
				return err
			}
		case p.left > 0 && p.reg == regFDRI && !p.desynced:
			// Frame data in bulk: the hot path.
			k := int(min(uint64(p.left), uint64(len(b)/4))) * 4
			p.writeFrames(b[:k], p.off)
			p.left -= uint32(k / 4)
			p.off += int64(k)
			b = b[k:]
		default:
			if err := p.word(binary.BigEndian.Uint32(b), p.off); err != nil {
				return err
			}
			p.off += 4
			b = b[4:]
		}
	}
	return nil
}

// hunt searches b for the end of the sync word, as the configuration engine
// does, whatever the alignment, and returns how many bytes it took.
func (p *Parser) hunt(b []byte) (int, error) {
	for i, c := range b {
		p.shift = p.shift<<8 | uint32(c)
		p.hunted++
		if p.hunted >= 4 && p.shift == syncWord {
			p.synced = true
			p.off += int64(i + 1)
			return i + 1, nil
		}
		if p.hunted == syncWindow {
			p.off += int64(i + 1)
			return i + 1, errorf(ErrNoSync, p.dataStart, "configuration data",
				"no sync word 0x%08X in its first %d bytes", uint32(syncWord), syncWindow)
		}
	}
	p.off += int64(len(b))
	return len(b), nil
}

// word consumes one word after the sync word; at is its offset.
func (p *Parser) word(w uint32, at int64) error {
	if p.desynced {
		if p.left > 0 {
			return errorf(ErrPacket, at, "write to "+p.reg.String(), "data after DESYNC")
		}
		if w != noopWord {
			return errorf(ErrPacket, at, "packet header", "0x%08X after DESYNC, only NOOPs may follow", w)
		}
	}
	if p.left > 0 {
		p.left--
		return p.write(p.reg, w, at)
	}
	p.at = at
	switch w >> 29 {
	case type1:
		op := w >> 27 & 3
		r := w >> 13 & 0x3fff
		switch op {
		case opNOOP:
			if w != noopWord {
				return errorf(ErrPacket, at, "packet header", "NOOP 0x%08X with fields set, want 0x%08X", w, uint32(noopWord))
			}
			return nil
		case opRead:
			return errorf(ErrPacket, at, "packet header", "read packet 0x%08X: the PR port has no readback path", w)
		case opWrite:
		default:
			return errorf(ErrPacket, at, "packet header", "reserved opcode in 0x%08X", w)
		}
		if r > 0x1f || !register(r).known() {
			return errorf(ErrPacket, at, "packet header", "write to unknown register 0x%X", r)
		}
		if !register(r).writable() {
			return errorf(ErrPacket, at, "packet header", "write to read-only register %v", register(r))
		}
		if w>>11&3 != 0 {
			return errorf(ErrPacket, at, "packet header", "reserved bits 12:11 set in 0x%08X", w)
		}
		p.reg, p.left = register(r), w&maxType1Words
		p.type1Reg, p.type1 = p.reg, true
	case type2:
		if w>>27&3 != opWrite {
			return errorf(ErrPacket, at, "packet header", "type 2 packet 0x%08X is not a write", w)
		}
		if !p.type1 {
			return errorf(ErrPacket, at, "packet header", "type 2 packet without a type 1 write before it")
		}
		p.reg, p.left = p.type1Reg, w&maxType2Words
	default:
		return errorf(ErrPacket, at, "packet header", "0x%08X is not a type 1 or type 2 packet", w)
	}
	return nil
}

// write does what the configuration engine does with data written to r; at
// is the data word's offset.
func (p *Parser) write(r register, data uint32, at int64) error {
	switch r {
	case regCRC:
		if data != p.crc {
			return errorf(ErrCRC, at, "write to CRC", "the bitstream expects CRC 0x%08X, the running CRC is 0x%08X", data, p.crc)
		}
		p.checks++
		p.lastCheck = data
		p.unchecked = -1
		p.crc = 0
		return nil
	case regFDRI:
		binary.BigEndian.PutUint32(p.scratch[:], data)
		p.writeFrames(p.scratch[:], at)
		return nil
	case regIDCODE:
		if p.hasID && data != p.idcode {
			return errorf(ErrPacket, at, "write to IDCODE", "IDCODE 0x%08X after IDCODE 0x%08X", data, p.idcode)
		}
		p.idcode, p.hasID = data, true
	case regCMD:
		cmd := Command(data)
		if !cmd.known() {
			return errorf(ErrPacket, at, "write to CMD", "unknown command %d", data)
		}
		if len(p.commands) == maxCommands {
			return errorf(ErrPacket, at, "write to CMD", "more than %d commands", maxCommands)
		}
		p.commands = append(p.commands, cmd)
		switch cmd {
		case CmdRCRC:
			// Clearing the CRC discards what it covered.
			if p.unchecked >= 0 {
				return errorf(ErrNoCRC, at, "write to CMD", "RCRC discards the CRC of the frame data written from offset %d, which no check covered", p.unchecked)
			}
		case CmdDESYNC:
			if p.checks == 0 {
				return errorf(ErrNoCRC, at, "write to CMD", "DESYNC without any CRC check")
			}
			if p.unchecked >= 0 {
				return errorf(ErrNoCRC, at, "write to CMD", "DESYNC before a CRC check covers the frame data written from offset %d", p.unchecked)
			}
			p.desynced = true
		}
	}
	p.crc = nextCRC(p.crc, r, data)
	return nil
}

// writeFrames writes b, a whole number of words starting at offset at, to
// FDRI.
func (p *Parser) writeFrames(b []byte, at int64) {
	if len(b) == 0 {
		return
	}
	if p.unchecked < 0 {
		p.unchecked = at
	}
	p.frames += int64(len(b))
	// Hash and CRC the same block while it is in cache.
	const block = 16 << 10
	for len(b) > 0 {
		k := min(len(b), block)
		p.digest.Write(b[:k])
		p.crc = crcFDRI(p.crc, b[:k])
		b = b[k:]
	}
}

// errClosed is returned by a Write or Close after a successful Close.
var errClosed = errors.New("bitfile: parser closed")

// Close ends the stream. It returns what the stream configured if the file
// was complete and valid, and otherwise the reason it was not.
func (p *Parser) Close() (Result, error) {
	if p.err != nil {
		return Result{}, p.err
	}
	var err error
	switch {
	case !p.hd.done():
		err = p.hd.truncated(p.off, len(p.buf))
	case p.off < p.dataEnd:
		err = errorf(ErrTruncated, p.off, "configuration data", "file ends %d bytes into the %d bytes the header declares",
			p.off-p.dataStart, p.hd.h.DataLen)
	case !p.synced:
		err = errorf(ErrNoSync, p.off, "configuration data", "no sync word 0x%08X in its %d bytes", uint32(syncWord), p.hd.h.DataLen)
	case p.npart > 0:
		err = errorf(ErrTruncated, p.off-int64(p.npart), "configuration data", "ends with %d bytes of a 4-byte word", p.npart)
	case p.left > 0:
		err = errorf(ErrTruncated, p.at, "packet", "configuration data ends %d words short of the end of this write to %v", p.left, p.reg)
	case !p.desynced:
		err = errorf(ErrTruncated, p.off, "configuration data", "ends without DESYNC")
	}
	if err != nil {
		p.err = err
		return Result{}, err
	}
	p.err = errClosed
	r := Result{
		Header:     p.hd.h,
		IDCode:     p.idcode,
		FrameBytes: p.frames,
		CRC:        p.lastCheck,
		Commands:   p.commands,
	}
	p.digest.Sum(r.FrameDigest[:0])
	return r, nil
}
