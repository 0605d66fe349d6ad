package bitfile

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

var categories = []error{ErrHeader, ErrNoSync, ErrTruncated, ErrOverflow, ErrPacket, ErrCRC, ErrNoCRC}

// checkCategory fails unless err is an *Error of exactly one category.
func checkCategory(t *testing.T, err error) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("%v (%T) is not an *Error", err, err)
	}
	n := 0
	for _, c := range categories {
		if errors.Is(err, c) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%v is in %d categories", err, n)
	}
}

// chunked parses b in chunks whose sizes derive from b itself, so that the
// fuzzer explores chunkings along with contents.
func chunked(b []byte) (Result, error) {
	seed := uint64(crc32.ChecksumIEEE(b))
	rng := rand.New(rand.NewPCG(seed, uint64(len(b))))
	p := NewParser(Limits{})
	for len(b) > 0 {
		k := 1 + rng.IntN(1024)
		if rng.IntN(4) == 0 {
			k = 1 + rng.IntN(8) // split words and header items
		}
		k = min(k, len(b))
		n, err := p.Write(b[:k])
		if err != nil {
			return Result{}, err
		}
		if n != k {
			panic("Write took part of a chunk without an error")
		}
		b = b[k:]
	}
	return p.Close()
}

func fuzzSeeds() [][]byte {
	valid, _ := Build(testHeader(), testPart, []byte("frames of the loopback role"))
	bigger, _ := Build(testHeader(), testPart, bytes.Repeat([]byte{0xa5, 0x5a, 0, 0xff}, 300))
	badCRC := slices.Clone(valid)
	badCRC[len(badCRC)-4*(flushNOOPs+2+1)] ^= 0x80
	badPreamble := slices.Clone(valid)
	badPreamble[2] = 0
	return [][]byte{
		valid,
		bigger,
		valid[:30],   // truncated header
		badPreamble,  // bad preamble
		badCRC,       // bad CRC
		vivadoHeader, // a Vivado header, no data
		append(slices.Clone(valid), 0x20, 0, 0, 0), // overflow
		newConfig().cmd(CmdRCRC).write(regFDRI).type2(1, 2).check().cmd(CmdDESYNC).raw(noopWord).file(),
		newConfig().cmd(CmdRCRC).write(regFDRI, 1).cmd(CmdDESYNC).file(), // no CRC check
	}
}

func FuzzParser(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// The data as a file: the same verdict, whatever the chunking.
		whole, errWhole := parse(b, len(b)+1, Limits{})
		part, errPart := chunked(b)
		bytewise, errByte := parse(b, 1, Limits{})
		if errWhole != nil {
			checkCategory(t, errWhole)
			if errPart == nil || errPart.Error() != errWhole.Error() || errByte == nil || errByte.Error() != errWhole.Error() {
				t.Fatalf("whole: %v\nchunked: %v\nbyte by byte: %v", errWhole, errPart, errByte)
			}
		} else if errPart != nil || errByte != nil || !reflect.DeepEqual(whole, part) || !reflect.DeepEqual(whole, bytewise) {
			t.Fatalf("whole: %+v\nchunked: %+v, %v\nbyte by byte: %+v, %v", whole, part, errPart, bytewise, errByte)
		}

		// The data as frames: Build's output parses back, whatever the
		// chunking.
		h := testHeader()
		file, err := Build(h, testPart, b)
		if err != nil {
			t.Fatal(err)
		}
		r, err := chunked(file)
		if err != nil {
			t.Fatal(err)
		}
		padded := append(slices.Clone(b), make([]byte, (4-len(b)%4)%4)...)
		h.DataLen = r.Header.DataLen
		if r.Header != h || r.FrameDigest != sha256.Sum256(padded) || r.FrameBytes != int64(len(padded)) || r.IDCode != testPart.IDCode {
			t.Fatalf("Build(%q) parses to %+v", b, r)
		}
	})
}

func FuzzReadHeader(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		h, err := ReadHeader(r)
		p := NewParser(Limits{})
		_, perr := p.Write(b)
		if err != nil {
			checkCategory(t, err)
			if !errors.Is(err, ErrHeader) && !errors.Is(err, ErrTruncated) {
				t.Fatalf("header error %v is neither ErrHeader nor ErrTruncated", err)
			}
			if errors.Is(err, ErrTruncated) {
				_, perr = p.Close()
			}
			if perr == nil || perr.Error() != err.Error() {
				t.Fatalf("ReadHeader: %v\nParser: %v", err, perr)
			}
			return
		}
		// A header read is a header written: the bytes consumed are
		// exactly MarshalBinary's.
		n := len(b) - r.Len()
		m, err := h.MarshalBinary()
		if err != nil || !bytes.Equal(m, b[:n]) {
			t.Fatalf("header %+v: MarshalBinary = %q, %v\nread %q", h, m, err, b[:n])
		}
		if ph, ok := p.Header(); !ok || ph != h {
			t.Fatalf("Parser.Header() = %+v, %v; ReadHeader %+v", ph, ok, h)
		}
	})
}
