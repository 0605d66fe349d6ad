package bitfile

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/fpga-faas/faas/shell"
)

var testPart = shell.PartVU9P

func testHeader() Header {
	return Header{
		Design: "loopback;UserID=0XFFFFFFFF;Version=2024.1;PARTIAL=TRUE",
		Part:   testPart.Name,
		Date:   "2024/01/31",
		Time:   "12:34:56",
	}
}

func randomFrames(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func build(t testing.TB, frames []byte) []byte {
	t.Helper()
	f, err := Build(testHeader(), testPart, frames)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// parse feeds b to a new parser in chunks of the given size, then closes it.
func parse(b []byte, chunk int, l Limits) (Result, error) {
	r, _, err := parseCount(b, chunk, l)
	return r, err
}

// parseCount is parse that also returns how many bytes Write accepted.
func parseCount(b []byte, chunk int, l Limits) (Result, int64, error) {
	p := NewParser(l)
	var accepted int64
	for len(b) > 0 {
		k := min(chunk, len(b))
		n, err := p.Write(b[:k])
		accepted += int64(n)
		if err != nil {
			return Result{}, accepted, err
		}
		if n != k {
			return Result{}, accepted, fmt.Errorf("Write took %d of %d bytes without an error", n, k)
		}
		b = b[k:]
	}
	r, err := p.Close()
	return r, accepted, err
}

// headerLen returns the length of the header of file f.
func headerLen(t testing.TB, f []byte) int {
	t.Helper()
	h, err := ReadHeader(bytes.NewReader(f))
	if err != nil {
		t.Fatal(err)
	}
	return len(f) - int(h.DataLen)
}

// reframe returns f with its configuration data replaced by data and
// DataLen to match.
func reframe(t testing.TB, f, data []byte) []byte {
	t.Helper()
	h, err := ReadHeader(bytes.NewReader(f))
	if err != nil {
		t.Fatal(err)
	}
	h.DataLen = uint32(len(data))
	b, err := h.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return append(b, data...)
}

func be32(w uint32) []byte { return binary.BigEndian.AppendUint32(nil, w) }

func TestParserBuildRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 4, 4097, 100 << 10} {
		frames := randomFrames(n, uint64(n))
		f := build(t, frames)
		r, err := parse(f, len(f), Limits{})
		if err != nil {
			t.Fatalf("%d bytes of frames: %v", n, err)
		}
		padded := append(slices.Clone(frames), make([]byte, (4-n%4)%4)...)
		want := Result{
			Header:      testHeader(),
			IDCode:      testPart.IDCode,
			FrameBytes:  int64(len(padded)),
			FrameDigest: sha256.Sum256(padded),
			CRC:         r.CRC,
			Commands:    []Command{CmdRCRC, CmdWCFG, CmdDESYNC},
		}
		want.Header.DataLen = uint32(len(f) - headerLen(t, f))
		if !reflect.DeepEqual(r, want) {
			t.Errorf("%d bytes of frames: Result %+v\nwant %+v", n, r, want)
		}
		// The CRC check is the word after the last CRC packet header.
		crcAt := len(f) - 4*(flushNOOPs+2+1)
		if got := binary.BigEndian.Uint32(f[crcAt:]); got != r.CRC || !bytes.Equal(f[crcAt-4:crcAt], be32(type1Write(regCRC, 1))) {
			t.Errorf("%d bytes of frames: Result.CRC %#x, file has %#x", n, r.CRC, got)
		}
	}
}

func TestParserChunking(t *testing.T) {
	f := build(t, randomFrames(50<<10+3, 1))
	want, err := parse(f, len(f), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for _, chunk := range []int{1, 3, 4, 5, 4096, len(f) - 1} {
		got, err := parse(f, chunk, Limits{})
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("chunks of %d: %+v, %v\nwant %+v", chunk, got, err, want)
		}
	}
	// Chunks of random sizes.
	rng := rand.New(rand.NewPCG(5, 6))
	p := NewParser(Limits{})
	for b := f; len(b) > 0; {
		k := min(1+rng.IntN(700), len(b))
		if _, err := p.Write(b[:k]); err != nil {
			t.Fatal(err)
		}
		b = b[k:]
	}
	if got, err := p.Close(); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("random chunks: %+v, %v", got, err)
	}
}

func TestParserHeaderAvailableEarly(t *testing.T) {
	f := build(t, randomFrames(100, 2))
	p := NewParser(Limits{})
	hl := headerLen(t, f)
	if _, err := p.Write(f[:hl-1]); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Header(); ok {
		t.Error("Header complete one byte early")
	}
	if _, err := p.Write(f[hl-1 : hl]); err != nil {
		t.Fatal(err)
	}
	if h, ok := p.Header(); !ok || h.Design != testHeader().Design {
		t.Errorf("Header() = %+v, %v after the header", h, ok)
	}
}

// Each category of error, from one specific corruption of a valid file.
func TestParserErrorCategories(t *testing.T) {
	frames := randomFrames(4096+2, 3)
	f := build(t, frames)
	hl := headerLen(t, f)
	data := f[hl:]
	framesAt := hl + bytes.Index(data, be32(type1Write(regFDRI, 0))) + 8
	crcAt := len(f) - 4*(flushNOOPs+2+1)  // the CRC value
	desyncAt := len(f) - 4*(flushNOOPs+2) // the DESYNC packet header
	syncAt := hl + bytes.Index(data, be32(syncWord))

	small := build(t, randomFrames(16, 4))
	smallHL := headerLen(t, small)

	flipped := slices.Clone(f)
	flipped[framesAt+100] ^= 0x08

	noSync := reframe(t, f, slices.Concat(data[:syncAt-hl], data[syncAt-hl+4:]))
	noSyncSmall := reframe(t, small, slices.Concat(small[smallHL:smallHL+4*20], small[smallHL+4*21:]))

	garbage := patch(f, syncAt+4, "\xde\xad\xbe\xef")

	noCRC := reframe(t, f, slices.Concat(data[:crcAt-4-hl], data[crcAt+4-hl:]))

	for _, tc := range []struct {
		name string
		in   []byte
		kind error
		off  int64 // offset the error names
	}{
		{"wrong preamble", patch(f, 3, "\x0e"), ErrHeader, 3},
		{"flipped frame bit", flipped, ErrCRC, int64(crcAt)},
		{"cut in the header", f[:40], ErrTruncated, 40},
		{"cut in the frames", f[:framesAt+1001], ErrTruncated, int64(framesAt + 1001)},
		{"cut by a byte", f[:len(f)-1], ErrTruncated, int64(len(f) - 1)},
		{"sync word removed", noSync, ErrNoSync, int64(hl)},
		{"sync word removed, short data", noSyncSmall, ErrNoSync, int64(len(noSyncSmall))},
		{"bytes appended", append(slices.Clone(f), 0x20, 0, 0, 0), ErrOverflow, int64(len(f))},
		{"garbage after sync", garbage, ErrPacket, int64(syncAt + 4)},
		{"CRC write removed", noCRC, ErrNoCRC, int64(desyncAt - 8 + 4)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(tc.in, len(tc.in), Limits{})
			var e *Error
			if !errors.Is(err, tc.kind) || !errors.As(err, &e) || e.Offset != tc.off {
				t.Fatalf("got %v, want %v at offset %d", err, tc.kind, tc.off)
			}
			for _, other := range []error{ErrHeader, ErrNoSync, ErrTruncated, ErrOverflow, ErrPacket, ErrCRC, ErrNoCRC} {
				if other != tc.kind && errors.Is(err, other) {
					t.Errorf("%v is also %v", err, other)
				}
			}
			// The same error, word for word, however the file arrives.
			for _, chunk := range []int{1, 3, 4096} {
				if _, err2 := parse(tc.in, chunk, Limits{}); err2 == nil || err2.Error() != err.Error() {
					t.Errorf("chunks of %d: %v\nwhole file: %v", chunk, err2, err)
				}
			}
		})
	}
}

func TestParserWriteCountsBytesBeforeTheFault(t *testing.T) {
	f := build(t, randomFrames(10000, 5))
	crcAt := len(f) - 4*(flushNOOPs+2+1)
	f[crcAt] ^= 1
	for _, chunk := range []int{1, 3, 4096, len(f)} {
		_, accepted, err := parseCount(f, chunk, Limits{})
		// Bytes of the word at fault that arrived in earlier chunks were
		// accepted then.
		last := (crcAt + 3) / chunk * chunk // start of the failing chunk
		if want := int64(max(crcAt, last)); !errors.Is(err, ErrCRC) || accepted != want {
			t.Errorf("chunks of %d: accepted %d bytes, %v; want %d, a CRC error", chunk, accepted, err, want)
		}
	}
}

func TestParserErrorsStick(t *testing.T) {
	f := build(t, nil)
	p := NewParser(Limits{})
	_, err := p.Write(patch(f, 0, "\x01"))
	if !errors.Is(err, ErrHeader) {
		t.Fatalf("Write = %v", err)
	}
	if n, err2 := p.Write(f); n != 0 || err2 != err {
		t.Errorf("Write after an error = %d, %v; want 0, %v", n, err2, err)
	}
	if _, err2 := p.Close(); err2 != err {
		t.Errorf("Close after an error = %v, want %v", err2, err)
	}

	p = NewParser(Limits{})
	if _, err := p.Write(f); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Write([]byte{0}); err == nil {
		t.Error("Write after Close succeeded")
	}
}

// config assembles configuration data and keeps the running CRC the
// configuration engine will compute for it.
type config struct {
	words []uint32
	crc   uint32
}

func newConfig() *config {
	return &config{words: []uint32{dummyWord, busWidthWord, busWidthTest, dummyWord, syncWord}}
}

func (c *config) raw(ws ...uint32) *config {
	c.words = append(c.words, ws...)
	return c
}

// write is a type 1 write of vs to r.
func (c *config) write(r register, vs ...uint32) *config {
	c.raw(type1Write(r, len(vs)))
	for _, v := range vs {
		c.raw(v)
		c.crc = nextCRC(c.crc, r, v)
	}
	return c
}

// type2 is a type 2 write of vs to FDRI.
func (c *config) type2(vs ...uint32) *config {
	c.raw(type2Write(len(vs)))
	for _, v := range vs {
		c.raw(v)
		c.crc = nextCRC(c.crc, regFDRI, v)
	}
	return c
}

// check writes the correct CRC.
func (c *config) check() *config {
	c.raw(type1Write(regCRC, 1), c.crc)
	c.crc = 0
	return c
}

func (c *config) cmd(cmds ...Command) *config {
	for _, cmd := range cmds {
		c.write(regCMD, uint32(cmd))
	}
	return c
}

func (c *config) file() []byte {
	var data []byte
	for _, w := range c.words {
		data = binary.BigEndian.AppendUint32(data, w)
	}
	h := testHeader()
	h.DataLen = uint32(len(data))
	b, err := h.MarshalBinary()
	if err != nil {
		panic(err)
	}
	return append(b, data...)
}

func TestParserConfigurationRules(t *testing.T) {
	const id = 0x14b31093
	// start writes what every case shares: RCRC, IDCODE, WCFG.
	start := func() *config { return newConfig().cmd(CmdRCRC).write(regIDCODE, id).cmd(CmdWCFG) }
	for _, tc := range []struct {
		name string
		cfg  *config
		kind error // nil: valid
	}{
		{"minimal", start().write(regFDRI, 1, 2, 3).check().cmd(CmdDESYNC), nil},
		{"type 2 frames", start().write(regFDRI).type2(1, 2, 3).check().cmd(CmdDESYNC), nil},
		{"type 2 after a NOOP", start().write(regFDRI).raw(noopWord).type2(7).check().cmd(CmdDESYNC), nil},
		{"two checks", start().write(regFDRI, 1).check().write(regFDRI, 2).check().cmd(CmdDESYNC), nil},
		{"writes after the last check", start().write(regFDRI, 1).check().cmd(CmdSTART).write(regCTL0, 0).cmd(CmdDESYNC), nil},
		// The CRC rule spelled out: RCRC clears; IDCODE, CMD and FDRI
		// count; LOUT does not.
		{"CRC rule", start().write(regFDRI, 1).write(regLOUT, 5).
			raw(type1Write(regCRC, 1), crcWord(crcWord(crcWord(0, regIDCODE, id), regCMD, uint32(CmdWCFG)), regFDRI, 1)).
			cmd(CmdDESYNC), nil},
		{"NOOPs after DESYNC", start().check().cmd(CmdDESYNC).raw(noopWord, noopWord), nil},
		{"no frames", start().check().cmd(CmdDESYNC), nil},

		{"no check", start().write(regFDRI, 1).cmd(CmdDESYNC), ErrNoCRC},
		{"no check, no frames", start().cmd(CmdDESYNC), ErrNoCRC},
		{"frames after the last check", start().write(regFDRI, 1).check().write(regFDRI, 2).cmd(CmdDESYNC), ErrNoCRC},
		{"RCRC discards frames", start().write(regFDRI, 1).cmd(CmdRCRC).check().cmd(CmdDESYNC), ErrNoCRC},
		{"wrong CRC", start().write(regFDRI, 1).raw(type1Write(regCRC, 1), 0x12345678).cmd(CmdDESYNC), ErrCRC},

		{"read packet", start().raw(0x28006001), ErrPacket},
		{"reserved opcode", start().raw(0x38008001, 0), ErrPacket},
		{"unknown register", start().raw(0x30000000|0x13<<13|1, 0), ErrPacket},
		{"register beyond 5 bits", start().raw(0x30000000|0x24<<13|1, 0), ErrPacket},
		{"read-only register", start().write(regSTAT, 0), ErrPacket},
		{"reserved bits", start().raw(type1Write(regCMD, 1)|1<<11, 0), ErrPacket},
		{"NOOP with a count", start().raw(noopWord | 1), ErrPacket},
		{"type 2 first", newConfig().raw(type2Write(1), 0), ErrPacket},
		{"type 2 read", start().raw(0x48000001, 0), ErrPacket},
		{"type 0", start().raw(0), ErrPacket},
		{"dummy word after sync", start().raw(dummyWord), ErrPacket},
		{"unknown command", start().write(regCMD, 14), ErrPacket},
		{"command beyond the list", start().write(regCMD, 20), ErrPacket},
		{"second IDCODE differs", start().write(regIDCODE, id+1), ErrPacket},
		{"data after DESYNC in its packet", start().check().write(regCMD, uint32(CmdDESYNC), uint32(CmdNULL)), ErrPacket},
		{"packet after DESYNC", start().check().cmd(CmdDESYNC).write(regFAR, 0), ErrPacket},
		{"too many commands", start().cmd(slices.Repeat([]Command{CmdNULL}, maxCommands)...), ErrPacket},

		{"no DESYNC", start().write(regFDRI, 1).check(), ErrTruncated},
		{"inside a packet", start().raw(type1Write(regFDRI, 3), 1, 2), ErrTruncated},
		{"inside a type 2 packet", start().write(regFDRI).raw(type2Write(3), 1), ErrTruncated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.cfg.file()
			_, err := parse(f, len(f), Limits{})
			if tc.kind == nil && err != nil || !errors.Is(err, tc.kind) {
				t.Fatalf("got %v, want %v", err, tc.kind)
			}
			if err != nil {
				t.Log(err)
			}
		})
	}
}

// The configuration engine finds the sync word at any byte offset and counts
// words from there.
func TestParserUnalignedSync(t *testing.T) {
	f := newConfig().cmd(CmdRCRC).check().cmd(CmdDESYNC).file()
	hl := headerLen(t, f)
	f = reframe(t, f, slices.Concat([]byte{0xff}, f[hl:]))
	if _, err := parse(f, 3, Limits{}); err != nil {
		t.Error(err)
	}
}

func TestParserPartialWordAtEnd(t *testing.T) {
	f := newConfig().cmd(CmdRCRC).check().cmd(CmdDESYNC).file()
	f = reframe(t, f, append(f[headerLen(t, f):], 0x20, 0))
	_, err := parse(f, 1, Limits{})
	if !errors.Is(err, ErrTruncated) {
		t.Errorf("got %v, want ErrTruncated", err)
	}
}

func TestParserResultOfConfig(t *testing.T) {
	f := newConfig().cmd(CmdRCRC).write(regIDCODE, 0xabc).cmd(CmdWCFG).write(regFDRI, 0x01020304, 0x05060708).
		check().cmd(CmdSTART).cmd(CmdDESYNC).raw(noopWord).file()
	r, err := parse(f, 5, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if r.IDCode != 0xabc || r.FrameBytes != 8 || r.FrameDigest != sha256.Sum256([]byte{1, 2, 3, 4, 5, 6, 7, 8}) {
		t.Errorf("Result = %+v", r)
	}
	if want := []Command{CmdRCRC, CmdWCFG, CmdSTART, CmdDESYNC}; !slices.Equal(r.Commands, want) {
		t.Errorf("Commands = %v, want %v", r.Commands, want)
	}
}

func TestEncodeStreamsLikeBuild(t *testing.T) {
	frames := randomFrames(70<<10+1, 7)
	want := build(t, frames)
	var got bytes.Buffer
	if err := Encode(&got, testHeader(), testPart, &oneByteReader{bytes.NewReader(frames)}, int64(len(frames))); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Error("Encode and Build differ")
	}
	err := Encode(&got, testHeader(), testPart, bytes.NewReader(frames[:100]), 101)
	if err == nil {
		t.Error("Encode with too few frame bytes succeeded")
	}
}

type oneByteReader struct{ r *bytes.Reader }

func (o *oneByteReader) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	return o.r.Read(b[:1])
}

func TestBuildHeader(t *testing.T) {
	h := testHeader()
	h.Part = ""
	f, err := Build(h, testPart, []byte{1})
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadHeader(bytes.NewReader(f))
	if err != nil || got.Part != testPart.Name || int(got.DataLen) != len(f)-headerLen(t, f) {
		t.Errorf("header %+v, %v", got, err)
	}
	h = testHeader()
	h.Part = "vu9p-flgb2104" // accepted spelling, written as given
	if f, err := Build(h, testPart, nil); err != nil {
		t.Error(err)
	} else if got, _ := ReadHeader(bytes.NewReader(f)); got.Part != h.Part {
		t.Errorf("part written as %q, want %q", got.Part, h.Part)
	}

	for name, h := range map[string]Header{
		"not partial": {Design: "loopback", Part: testPart.Name},
		"other part":  {Design: "loopback;PARTIAL=TRUE", Part: shell.PartKU15P.Name},
		"NUL":         {Design: "loopback;PARTIAL=TRUE", Date: "\x00"},
	} {
		if _, err := Build(h, testPart, nil); err == nil {
			t.Errorf("%s: Build succeeded", name)
		}
	}
}

func TestDataLen(t *testing.T) {
	fixed := int64(4 * fixedWords)
	for _, tc := range []struct {
		size int64
		want int64
	}{
		{0, fixed},
		{1, fixed + 4 + 4},
		{4 * maxType2Words, fixed + 4 + 4*maxType2Words},
		{4*maxType2Words + 1, fixed + 8 + 4*maxType2Words + 4},
	} {
		if got, err := dataLen(tc.size); err != nil || got != tc.want {
			t.Errorf("dataLen(%d) = %d, %v; want %d", tc.size, got, err, tc.want)
		}
	}
	if _, err := dataLen(1 << 32); err == nil {
		t.Error("dataLen(4 GiB) fits")
	}
}

func BenchmarkParser(b *testing.B) {
	f := build(b, randomFrames(32<<20, 8))
	for _, chunk := range []int{4 << 10, 64 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("chunk=%dKiB", chunk>>10), func(b *testing.B) {
			b.SetBytes(int64(len(f)))
			for b.Loop() {
				if _, err := parse(f, chunk, Limits{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSHA256 is the parser's floor: it must hash every frame byte, so it
// cannot beat SHA-256 over the same file.
func BenchmarkSHA256(b *testing.B) {
	f := build(b, randomFrames(32<<20, 8))
	b.SetBytes(int64(len(f)))
	for b.Loop() {
		sha256.Sum256(f)
	}
}

func TestCommandString(t *testing.T) {
	for c, want := range map[Command]string{CmdDESYNC: "DESYNC", CmdBSPIREAD: "BSPI_READ", 14: "Command(14)", 1000: "Command(1000)"} {
		if got := c.String(); got != want {
			t.Errorf("Command(%d).String() = %q, want %q", uint32(c), got, want)
		}
	}
}

func TestParserFileSize(t *testing.T) {
	f := build(t, randomFrames(10, 11))
	p := NewParser(Limits{})
	if _, ok := p.FileSize(); ok {
		t.Error("FileSize known before the header")
	}
	if _, err := p.Write(f[:headerLen(t, f)]); err != nil {
		t.Fatal(err)
	}
	if n, ok := p.FileSize(); !ok || n != int64(len(f)) {
		t.Errorf("FileSize() = %d, %v; want %d", n, ok, len(f))
	}
}
