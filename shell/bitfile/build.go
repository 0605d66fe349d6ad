package bitfile

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"

	"github.com/fpga-faas/faas/shell"
)

// Build returns a partial .bit file for part that loads frames into the PR
// region; see Encode.
func Build(h Header, part shell.Part, frames []byte) ([]byte, error) {
	var buf bytes.Buffer
	if n, err := dataLen(int64(len(frames))); err == nil {
		buf.Grow(int(n) + 256) // the data and a typical header
	}
	if err := Encode(&buf, h, part, bytes.NewReader(frames), int64(len(frames))); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Encode writes to w a partial .bit file for part that loads the size bytes
// read from frames into the PR region, streaming them so that images larger
// than memory can be built.
//
// The header is h with DataLen filled in, and Part set to part.Name if empty.
// h must mark a partial bitstream (PARTIAL=TRUE in Design) for part. Date and
// Time are written as given, so the output depends only on the arguments.
//
// The configuration data has the shape of an UltraScale+ partial bitstream,
// reduced to the packets the PR controller checks: 16 dummy words, the
// bus-width pattern, 2 dummy words and the sync word (the prologue Project
// X-Ray writes for UltraScale+); RCRC; the part's IDCODE; WCFG; FAR 0; the
// frames, zero-padded to whole words, as a type 1 write of no words to FDRI
// followed by type 2 writes; a CRC check of everything written since RCRC;
// DESYNC, and NOOPs to flush the pipeline.
func Encode(w io.Writer, h Header, part shell.Part, frames io.Reader, size int64) error {
	if size < 0 {
		return fmt.Errorf("bitfile: negative frame size %d", size)
	}
	if h.Part == "" {
		h.Part = part.Name
	}
	if !h.ForPart(part) {
		return fmt.Errorf("bitfile: header part %q is not %s", h.Part, part.Name)
	}
	if !h.Partial() {
		return fmt.Errorf("bitfile: design field %q does not mark a partial bitstream (PARTIAL=TRUE)", h.Design)
	}
	n, err := dataLen(size)
	if err != nil {
		return err
	}
	h.DataLen = uint32(n)
	hdr, err := h.MarshalBinary()
	if err != nil {
		return err
	}

	// Buffer up to 64 KiB, less for small files: the fuzzer builds many.
	e := &encoder{w: bufio.NewWriterSize(w, int(min(64<<10, int64(len(hdr))+n)))}
	e.bytes(hdr)
	e.words(prologueWords()...)
	e.write(regCMD, uint32(CmdRCRC))
	e.words(noopWord, noopWord)
	e.write(regIDCODE, part.IDCode)
	e.write(regCMD, uint32(CmdWCFG))
	e.write(regFAR, 0)
	e.words(type1Write(regFDRI, 0))
	e.frames(frames, size)
	e.check()
	e.write(regCMD, uint32(CmdDESYNC))
	for range flushNOOPs {
		e.words(noopWord)
	}
	if e.err != nil {
		return e.err
	}
	return e.w.Flush()
}

// flushNOOPs follow DESYNC so that the last command leaves the engine's
// pipeline.
const flushNOOPs = 16

// prologueWords are the words before the first command: dummy words, the bus
// width pattern, the sync word and a NOOP, as UltraScale+ bitstreams start.
func prologueWords() []uint32 {
	w := make([]uint32, 0, 22)
	for range 16 {
		w = append(w, dummyWord)
	}
	return append(w, busWidthWord, busWidthTest, dummyWord, dummyWord, syncWord, noopWord)
}

// fixedWords counts the words Encode writes besides the frames and their
// type 2 headers.
var fixedWords = len(prologueWords()) +
	2 + 2 + 2 + 2 + 2 + // RCRC, 2 NOOPs, IDCODE, WCFG, FAR
	1 + // type 1 FDRI
	2 + 2 + flushNOOPs // CRC, DESYNC, NOOPs

// dataLen returns the length of the configuration data of a bitstream with
// size bytes of frames.
func dataLen(size int64) (int64, error) {
	words := (size + 3) / 4
	packets := (words + maxType2Words - 1) / maxType2Words
	n := 4 * (int64(fixedWords) + packets + words)
	if n > math.MaxUint32 {
		return 0, fmt.Errorf("bitfile: %d bytes of frames do not fit the 32-bit length of a .bit file", size)
	}
	return n, nil
}

// encoder writes configuration words and keeps the running CRC the
// configuration engine will compute. The first error sticks.
type encoder struct {
	w   *bufio.Writer
	crc uint32
	err error
	buf [4]byte
}

func (e *encoder) bytes(b []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(b)
	}
}

func (e *encoder) words(ws ...uint32) {
	for _, w := range ws {
		binary.BigEndian.PutUint32(e.buf[:], w)
		e.bytes(e.buf[:])
	}
}

// write writes a type 1 packet of one word to r.
func (e *encoder) write(r register, v uint32) {
	e.words(type1Write(r, 1), v)
	e.crc = nextCRC(e.crc, r, v)
}

// check writes the running CRC to CRC, which checks and clears it.
func (e *encoder) check() {
	e.words(type1Write(regCRC, 1), e.crc)
	e.crc = 0
}

// frames copies size bytes from r, zero-padded to whole words, to FDRI in
// type 2 packets.
func (e *encoder) frames(r io.Reader, size int64) {
	src := io.MultiReader(&exactReader{r: r, n: size}, bytes.NewReader(make([]byte, (4-size%4)%4)))
	buf := make([]byte, min(64<<10, 4*((size+3)/4)))
	for words := (size + 3) / 4; words > 0 && e.err == nil; {
		n := min(words, maxType2Words)
		e.words(type2Write(int(n)))
		words -= n
		for left := 4 * n; left > 0 && e.err == nil; {
			b := buf[:min(left, int64(len(buf)))]
			if _, err := io.ReadFull(src, b); err != nil {
				e.err = fmt.Errorf("bitfile: reading frames: %w", err)
				return
			}
			e.crc = crcFDRI(e.crc, b)
			e.bytes(b)
			left -= int64(len(b))
		}
	}
}

// exactReader reads exactly n bytes from r: an early EOF is
// io.ErrUnexpectedEOF.
type exactReader struct {
	r io.Reader
	n int64
}

func (x *exactReader) Read(b []byte) (int, error) {
	if x.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(b)) > x.n {
		b = b[:x.n]
	}
	n, err := x.r.Read(b)
	x.n -= int64(n)
	if errors.Is(err, io.EOF) {
		if x.n > 0 {
			return n, io.ErrUnexpectedEOF
		}
		err = nil
	}
	return n, err
}

// RoleHeader is the .bit header of a role's partial bitstream for part, as
// Vivado writes it: the design field names the role (the simulator's role
// registry keys on it) and marks the file partial.
func RoleHeader(design string, part shell.Part) Header {
	return Header{
		Design: design + ";UserID=0XFFFFFFFF;Version=2024.1;PARTIAL=TRUE",
		Part:   part.Name,
		Date:   "2026/11/22",
		Time:   "00:00:00",
	}
}

// Simulated returns a partial bitstream of role design for part with
// frameBytes bytes of configuration frames: a fixed pseudo-random sequence
// seeded by the design name, so the same arguments give the same file, of
// the size a real role of that many frames has.
func Simulated(design string, part shell.Part, frameBytes int) ([]byte, error) {
	var seed [32]byte
	copy(seed[:], design)
	frames := make([]byte, frameBytes)
	rand.NewChaCha8(seed).Read(frames)
	return Build(RoleHeader(design, part), part, frames)
}
