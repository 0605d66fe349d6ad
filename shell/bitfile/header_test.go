package bitfile

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/shell"
)

// vivadoHeader is a header as Vivado writes it for a 7-series partial
// bitstream, spelled out byte by byte from the format rather than by
// MarshalBinary. Its part has no "xc" and no speed grade.
var vivadoHeader = []byte("" +
	"\x00\x09\x0f\xf0\x0f\xf0\x0f\xf0\x0f\xf0\x00\x00\x01" + // preamble, offsets 0–12
	"a\x00\x37" + "loopback;UserID=0XFFFFFFFF;Version=2024.1;PARTIAL=TRUE\x00" + // 13–70
	"b\x00\x0c" + "7a35tcpg236\x00" + // 71–85
	"c\x00\x0b" + "2024/01/31\x00" + // 86–99
	"d\x00\x09" + "12:34:56\x00" + // 100–111
	"e\x00\x21\x72\x8c") // 112–116: 2192012 bytes of configuration data

func TestReadHeaderVivado(t *testing.T) {
	r := bytes.NewReader(append(slices.Clip(vivadoHeader), 0xff, 0xff, 0xff, 0xff, 0xaa, 0x99, 0x55, 0x66))
	h, err := ReadHeader(r)
	if err != nil {
		t.Fatal(err)
	}
	want := Header{
		Design:  "loopback;UserID=0XFFFFFFFF;Version=2024.1;PARTIAL=TRUE",
		Part:    "7a35tcpg236",
		Date:    "2024/01/31",
		Time:    "12:34:56",
		DataLen: 2192012,
	}
	if h != want {
		t.Errorf("ReadHeader = %+v\nwant %+v", h, want)
	}
	if r.Len() != 8 {
		t.Errorf("ReadHeader left %d bytes to read, want the 8 after the header", r.Len())
	}
	if h.DesignName() != "loopback" || !h.Partial() {
		t.Errorf("DesignName %q, Partial %v", h.DesignName(), h.Partial())
	}
	if v, ok := h.Option("userid"); !ok || v != "0XFFFFFFFF" {
		t.Errorf(`Option("userid") = %q, %v`, v, ok)
	}
	if !h.ForPart(shell.Part{Name: "xc7a35tcpg236-1"}) {
		t.Errorf("part %q is not for xc7a35tcpg236-1", h.Part)
	}
	b, err := h.MarshalBinary()
	if err != nil || !bytes.Equal(b, vivadoHeader) {
		t.Errorf("MarshalBinary = %q, %v\nwant %q", b, err, vivadoHeader)
	}
}

func TestHeaderRoundTrip(t *testing.T) {
	for _, h := range []Header{
		{},
		{Design: "loopback;PARTIAL=TRUE", Part: "xcvu9p-flgb2104-2-i", Date: "2024/01/31", Time: "12:34:56", DataLen: 1 << 30},
		{Design: strings.Repeat("x", DefaultMaxField-1), Part: "é;=", DataLen: 7},
	} {
		b, err := h.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		got, err := ReadHeader(bytes.NewReader(b))
		if err != nil || got != h {
			t.Errorf("ReadHeader(MarshalBinary(%+v)) = %+v, %v", h, got, err)
		}
		p := NewParser(Limits{})
		if _, err := p.Write(b); err != nil {
			t.Fatal(err)
		}
		if got, ok := p.Header(); !ok || got != h {
			t.Errorf("Parser.Header() = %+v, %v; want %+v", got, ok, h)
		}
	}
}

func TestHeaderOptions(t *testing.T) {
	h := Header{Design: "alidnn;UserID=0X1;;flag;PARTIAL=true;Version=2024.1;userid=2"}
	if got := h.DesignName(); got != "alidnn" {
		t.Errorf("DesignName = %q", got)
	}
	want := []Option{{"UserID", "0X1"}, {"flag", ""}, {"PARTIAL", "true"}, {"Version", "2024.1"}, {"userid", "2"}}
	if got := h.Options(); !slices.Equal(got, want) {
		t.Errorf("Options = %q, want %q", got, want)
	}
	if v, ok := h.Option("USERID"); !ok || v != "0X1" {
		t.Errorf(`Option("USERID") = %q, %v; want the first, "0X1"`, v, ok)
	}
	if _, ok := h.Option("missing"); ok {
		t.Error(`Option("missing") found`)
	}
	if !h.Partial() {
		t.Error("PARTIAL=true is not partial")
	}
	for _, d := range []string{"x", "x;PARTIAL=FALSE", "x;PARTIAL", "x;NOTPARTIAL=TRUE"} {
		if (Header{Design: d}).Partial() {
			t.Errorf("%q is partial", d)
		}
	}
	if got := (Header{Design: "plain"}).Options(); got != nil {
		t.Errorf("Options of a bare name = %q", got)
	}
}

func TestForPart(t *testing.T) {
	vu9p := shell.PartVU9P // xcvu9p-flgb2104-2-i
	for part, want := range map[string]bool{
		"xcvu9p-flgb2104-2-i":  true,
		"vu9p-flgb2104-2-i":    true,
		"XCVU9P-FLGB2104-2-I":  true,
		"xcvu9p-flgb2104-2":    true,
		"vu9p-flgb2104":        true,
		"xcvu9p":               true,
		"":                     false,
		"xc":                   false,
		"vu9":                  false,
		"vu9p-flgb":            false,
		"xcvu9p-flgb2104-2-e":  false,
		"xcvu13p-flgb2104-2-i": false,
		"xcku15p-ffve1517-2-e": false,
		"vu9p-flgb2104-2-i-x":  false,
	} {
		if got := (Header{Part: part}).ForPart(vu9p); got != want {
			t.Errorf("part %q ForPart(%s) = %v, want %v", part, vu9p.Name, got, want)
		}
	}
}

func TestMarshalBinaryRejects(t *testing.T) {
	for name, h := range map[string]Header{
		"NUL in design": {Design: "a\x00b"},
		"NUL in time":   {Time: "\x00"},
		"part too long": {Part: strings.Repeat("p", 65535)},
	} {
		if _, err := h.MarshalBinary(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := (Header{Part: strings.Repeat("p", 65534)}).MarshalBinary(); err != nil {
		t.Errorf("longest part: %v", err)
	}
}

// patch returns a copy of b with b[off:] overwritten by s.
func patch(b []byte, off int, s string) []byte {
	c := slices.Clone(b)
	copy(c[off:], s)
	return c
}

func TestReadHeaderErrors(t *testing.T) {
	h := vivadoHeader
	long := Header{Part: strings.Repeat("p", 2000)}
	longBytes, _ := long.MarshalBinary()
	big := patch(h, 113, "\x40\x00\x00\x01")
	for _, tc := range []struct {
		name string
		in   []byte
		kind error
		msg  string
	}{
		{"bad preamble", patch(h, 5, "\xf1"), ErrHeader, "bitfile: preamble at offset 5: byte 0xf1, want 0xf0"},
		{"bad length of a's key", patch(h, 12, "\x02"), ErrHeader, "bitfile: preamble at offset 12: byte 0x02, want 0x01"},
		{"unknown key", patch(h, 71, "z"), ErrHeader, "bitfile: field 'b' at offset 71: key 'z', want 'b'"},
		{"keys out of order", patch(h, 86, "d"), ErrHeader, "bitfile: field 'c' at offset 86: key 'd', want 'c'"},
		{"zero length", patch(h, 87, "\x00\x00"), ErrHeader, "bitfile: field 'c' at offset 87: length 0, want at least 1 for the NUL"},
		{"no NUL", patch(h, 85, "6"), ErrHeader, "bitfile: field 'b' at offset 85: byte 0x36, want the NUL that ends the string"},
		{"NUL inside", patch(h, 80, "\x00"), ErrHeader, "bitfile: field 'b' at offset 80: NUL inside the string"},
		{"field over limit", longBytes, ErrHeader, "bitfile: field 'b' at offset 18: length 2001 exceeds limit 1024"},
		{"data over limit", big, ErrHeader, "bitfile: field 'e' at offset 113: length 1073741825 exceeds limit 1073741824"},
		{"empty", nil, ErrTruncated, "bitfile: preamble at offset 0: file ends before the preamble"},
		{"inside preamble", h[:7], ErrTruncated, "bitfile: preamble at offset 7: file ends after 7 of the 13 bytes of the preamble"},
		{"before a key", h[:71], ErrTruncated, "bitfile: field 'b' at offset 71: file ends before the key"},
		{"inside a length", h[:73], ErrTruncated, "bitfile: field 'b' at offset 73: file ends after 1 of the 2 bytes of the length"},
		{"inside a string", h[:80], ErrTruncated, "bitfile: field 'b' at offset 80: file ends after 6 of the 12 bytes of the string"},
		{"inside data length", h[:115], ErrTruncated, "bitfile: field 'e' at offset 115: file ends after 2 of the 4 bytes of the data length"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadHeader(bytes.NewReader(tc.in))
			if !errors.Is(err, tc.kind) || err.Error() != tc.msg {
				t.Errorf("ReadHeader: %v\nwant %v: %s", err, tc.kind, tc.msg)
			}
			// The push parser says the same, whatever the chunking.
			for _, chunk := range []int{1, 5, len(tc.in) + 1} {
				_, perr := parse(tc.in, chunk, Limits{})
				if perr == nil || perr.Error() != tc.msg {
					t.Errorf("Parser in chunks of %d: %v", chunk, perr)
				}
			}
		})
	}
}

func TestReadHeaderReadError(t *testing.T) {
	boom := errors.New("boom")
	_, err := ReadHeader(io.MultiReader(bytes.NewReader(vivadoHeader[:20]), errReader{boom}))
	if !errors.Is(err, boom) {
		t.Errorf("ReadHeader = %v, want the reader's error", err)
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func TestParserLimits(t *testing.T) {
	_, err := parse(vivadoHeader, 3, Limits{MaxField: 12, MaxData: 1000})
	want := "bitfile: field 'a' at offset 14: length 55 exceeds limit 12"
	if !errors.Is(err, ErrHeader) || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
	_, err = parse(vivadoHeader, 3, Limits{MaxField: 55, MaxData: 1000})
	want = "bitfile: field 'e' at offset 113: length 2192012 exceeds limit 1000"
	if !errors.Is(err, ErrHeader) || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}
