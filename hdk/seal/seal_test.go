package seal

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"
)

func randBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)}).Read(b)
	return b
}

func mustSeal(t testing.TB, pt []byte, key DataKey, cs int) ([]byte, Header) {
	t.Helper()
	var buf bytes.Buffer
	h, err := Seal(&buf, bytes.NewReader(pt), key, Options{ChunkSize: cs})
	if err != nil {
		t.Fatalf("Seal(%d bytes, chunk %d): %v", len(pt), cs, err)
	}
	return buf.Bytes(), h
}

// decoder is one of the ways to open a blob.
type decoder struct {
	name string
	open func(blob []byte, key DataKey) ([]byte, error)
}

var decoders = []decoder{
	{"stream", func(blob []byte, key DataKey) ([]byte, error) {
		r, err := NewReader(bytes.NewReader(blob), key)
		if err != nil {
			return nil, err
		}
		return io.ReadAll(r)
	}},
	{"unseal1", unsealWith(1)},
	{"unseal4", unsealWith(4)},
}

func unsealWith(workers int) func([]byte, DataKey) ([]byte, error) {
	return func(blob []byte, key DataKey) ([]byte, error) {
		var out bytes.Buffer
		_, err := Unseal(context.Background(), &out, bytes.NewReader(blob), key, workers)
		return out.Bytes(), err
	}
}

// mustReject checks that every decoder refuses blob with ErrAuth or ErrFormat
// and that whatever plaintext they released before failing is a prefix of
// the genuine plaintext pt, i.e. was verified.
func mustReject(t *testing.T, what string, blob []byte, key DataKey, pt []byte) {
	t.Helper()
	for _, d := range decoders {
		got, err := d.open(blob, key)
		if err == nil {
			t.Fatalf("%s: %s: accepted a bad blob", what, d.name)
		}
		if !errors.Is(err, ErrAuth) && !errors.Is(err, ErrFormat) {
			t.Fatalf("%s: %s: error %v is neither ErrAuth nor ErrFormat", what, d.name, err)
		}
		if !bytes.HasPrefix(pt, got) {
			t.Fatalf("%s: %s: released %d bytes of unverified plaintext", what, d.name, len(got))
		}
	}
}

func TestRoundTrip(t *testing.T) {
	key := NewDataKey()
	for _, cs := range []int{MinChunkSize, DefaultChunkSize} {
		sizes := []int{0, 1, cs - 1, cs, cs + 1, 3*cs + 7}
		if cs == DefaultChunkSize {
			sizes = append(sizes, 5<<20+12345)
		}
		for _, size := range sizes {
			t.Run(fmt.Sprintf("chunk=%d/size=%d", cs, size), func(t *testing.T) {
				pt := randBytes(size, uint64(size))
				opts := Options{ChunkSize: cs, KeyID: sha256.Sum256([]byte("id"))}
				var buf bytes.Buffer
				h, err := Seal(&buf, bytes.NewReader(pt), key, opts)
				if err != nil {
					t.Fatal(err)
				}
				blob := buf.Bytes()
				if int64(len(blob)) != h.SealedSize() {
					t.Fatalf("blob is %d bytes, SealedSize %d", len(blob), h.SealedSize())
				}
				if h.Size != int64(size) || h.ChunkSize != cs || h.Digest != sha256.Sum256(pt) || h.KeyID != opts.KeyID {
					t.Fatalf("bad header %+v", h)
				}
				ph, err := ParseHeader(bytes.NewReader(blob))
				if err != nil || ph != h {
					t.Fatalf("ParseHeader = %+v, %v; want %+v", ph, err, h)
				}
				for _, d := range decoders {
					got, err := d.open(blob, key)
					if err != nil || !bytes.Equal(got, pt) {
						t.Fatalf("%s: %d bytes, %v", d.name, len(got), err)
					}
				}
				r, err := NewReader(iotest.HalfReader(bytes.NewReader(blob)), key)
				if err != nil {
					t.Fatal(err)
				}
				if r.Header() != h {
					t.Fatal("Reader.Header differs")
				}
				if err := iotest.TestReader(r, pt); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

func TestSealSources(t *testing.T) {
	key := NewDataKey()
	pt := randBytes(3*MinChunkSize+5, 1)

	// A plain io.Reader is buffered.
	var buf bytes.Buffer
	if _, err := Seal(&buf, iotest.OneByteReader(bytes.NewReader(pt)), key, Options{ChunkSize: MinChunkSize}); err != nil {
		t.Fatal(err)
	}
	if got, err := decoders[0].open(buf.Bytes(), key); err != nil || !bytes.Equal(got, pt) {
		t.Fatalf("plain reader: %v", err)
	}

	// A seeker is sealed from its current offset.
	src := bytes.NewReader(append([]byte("skip"), pt...))
	src.Seek(4, io.SeekStart)
	buf.Reset()
	if _, err := Seal(&buf, src, key, Options{ChunkSize: MinChunkSize}); err != nil {
		t.Fatal(err)
	}
	if got, err := decoders[0].open(buf.Bytes(), key); err != nil || !bytes.Equal(got, pt) {
		t.Fatalf("seeker at offset: %v", err)
	}
}

func TestSealOptions(t *testing.T) {
	for _, cs := range []int{-1, 1, MinChunkSize / 2, MinChunkSize + 1, 3 << 20, MaxChunkSize * 2} {
		if _, err := Seal(io.Discard, bytes.NewReader(nil), DataKey{}, Options{ChunkSize: cs}); err == nil {
			t.Errorf("chunk size %d accepted", cs)
		}
	}
	h, err := Seal(io.Discard, bytes.NewReader(nil), DataKey{}, Options{ChunkSize: MaxChunkSize})
	if err != nil || h.ChunkSize != MaxChunkSize {
		t.Errorf("max chunk size: %+v, %v", h, err)
	}
	h, err = Seal(io.Discard, bytes.NewReader(nil), DataKey{}, Options{})
	if err != nil || h.ChunkSize != DefaultChunkSize || h.ChunkCount != 1 {
		t.Errorf("default: %+v, %v", h, err)
	}
}

// A small multi-chunk blob with a short last chunk, used by the tamper tests.
func tamperFixture(t *testing.T) (blob []byte, pt []byte, key DataKey, h Header) {
	key = NewDataKey()
	pt = randBytes(4*MinChunkSize+100, 7)
	blob, h = mustSeal(t, pt, key, MinChunkSize)
	return blob, pt, key, h
}

// chunkBounds returns the offsets [start, end) of chunk i in the blob.
func chunkBounds(h Header, i int) (int, int) {
	start := HeaderSize + i*(h.ChunkSize+TagSize)
	return start, start + h.chunkLen(int64(i)) + TagSize
}

func TestTamperHeader(t *testing.T) {
	blob, pt, key, _ := tamperFixture(t)
	for off := range HeaderSize {
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			bad := bytes.Clone(blob)
			bad[off] ^= mask
			mustReject(t, fmt.Sprintf("header byte %d ^ %#x", off, mask), bad, key, pt)
			if _, err := ParseHeader(bytes.NewReader(bad)); err != nil && !errors.Is(err, ErrFormat) {
				t.Fatalf("ParseHeader: %v is not ErrFormat", err)
			}
		}
	}
}

func TestTamperChunks(t *testing.T) {
	blob, pt, key, h := tamperFixture(t)
	rng := rand.New(rand.NewPCG(1, 2))
	cases := 0
	for i := range int(h.ChunkCount) {
		start, end := chunkBounds(h, i)
		offs := []int{start, end - TagSize - 1, end - TagSize, end - 1} // edges, and the tag
		for range 60 {
			offs = append(offs, start+rng.IntN(end-start))
		}
		for _, off := range offs {
			bad := bytes.Clone(blob)
			bad[off] ^= byte(1 + rng.IntN(255))
			mustReject(t, fmt.Sprintf("chunk %d byte %d", i, off), bad, key, pt)
			// The stream releases exactly the chunks before the tampered one.
			r, err := NewReader(bytes.NewReader(bad), key)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(r)
			if !errors.Is(err, ErrAuth) || len(got) != i*h.ChunkSize {
				t.Fatalf("chunk %d tampered: released %d bytes, %v", i, len(got), err)
			}
			cases++
		}
	}
	t.Logf("%d chunk tamper cases", cases)
}

func TestChunkSurgery(t *testing.T) {
	blob, pt, key, h := tamperFixture(t)
	chunk := func(i int) []byte { s, e := chunkBounds(h, i); return blob[s:e] }
	join := func(idx ...int) []byte {
		b := bytes.Clone(blob[:HeaderSize])
		for _, i := range idx {
			b = append(b, chunk(i)...)
		}
		return b
	}
	if !bytes.Equal(join(0, 1, 2, 3, 4), blob) {
		t.Fatal("fixture layout is not as expected")
	}
	for name, bad := range map[string][]byte{
		"swap 0 1":             join(1, 0, 2, 3, 4),
		"swap 2 3":             join(0, 1, 3, 2, 4),
		"swap 3 last":          join(0, 1, 2, 4, 3),
		"duplicate 1":          join(0, 1, 1, 2, 3, 4),
		"duplicate 1 drop 2":   join(0, 1, 1, 3, 4),
		"duplicate last":       join(0, 1, 2, 3, 4, 4),
		"drop last":            join(0, 1, 2, 3),
		"drop middle":          join(0, 1, 3, 4),
		"only header":          join(),
		"append byte":          append(bytes.Clone(blob), 0),
		"append chunk":         append(bytes.Clone(blob), chunk(1)...),
		"append 1 KiB of zero": append(bytes.Clone(blob), make([]byte, 1024)...),
	} {
		mustReject(t, name, bad, key, pt)
	}
}

func TestTruncate(t *testing.T) {
	blob, pt, key, _ := tamperFixture(t)
	for n := range len(blob) {
		mustReject(t, fmt.Sprintf("truncated to %d", n), blob[:n], key, pt)
	}
}

func TestWrongKey(t *testing.T) {
	blob, pt, key, _ := tamperFixture(t)
	other := key
	other[31] ^= 1
	for _, k := range []DataKey{other, NewDataKey(), {}} {
		mustReject(t, "wrong key", blob, k, pt)
	}
}

// Two seals of the same plaintext under the same key use different seeds,
// so their chunks do not mix.
func TestSplice(t *testing.T) {
	key := NewDataKey()
	pt := randBytes(3*MinChunkSize, 3)
	a, h := mustSeal(t, pt, key, MinChunkSize)
	b, _ := mustSeal(t, pt, key, MinChunkSize)
	if bytes.Equal(a, b) {
		t.Fatal("two seals are identical")
	}
	s, _ := chunkBounds(h, 1)
	e, _ := chunkBounds(h, 2)
	mixed := append(append(bytes.Clone(a[:s]), b[s:e]...), a[e:]...)
	mustReject(t, "spliced chunk", mixed, key, pt)
	mustReject(t, "spliced header", append(bytes.Clone(b[:HeaderSize]), a[HeaderSize:]...), key, pt)
}

// sealHeader seals pt under a header that mutate may make dishonest while
// keeping every MAC and tag valid: an insider's forgery.
func sealHeader(pt []byte, key DataKey, cs int, mutate func(*Header)) []byte {
	h := Header{Version: Version, ChunkSize: cs, Size: int64(len(pt)), ChunkCount: chunkCount(int64(len(pt)), cs), Digest: sha256.Sum256(pt)}
	mutate(&h)
	k, macKey := deriveKeys(key, &h)
	copy(h.Tag[:], headerMAC(macKey, h.marshal()))
	enc := h.marshal()
	k.headerHash = sha256.Sum256(enc)
	aead := k.aead()
	out := enc
	for i := int64(0); i < h.ChunkCount && i*int64(cs) <= int64(len(pt)); i++ {
		lo := min(i*int64(cs), int64(len(pt)))
		hi := min(lo+int64(cs), int64(len(pt)))
		last := i == h.ChunkCount-1
		out = aead.Seal(out, k.nonce(i, last), pt[lo:hi], k.aad(i, last))
	}
	return out
}

func TestDigestMismatch(t *testing.T) {
	key := NewDataKey()
	pt := randBytes(3*MinChunkSize+1, 9)
	if got, err := decoders[0].open(sealHeader(pt, key, MinChunkSize, func(*Header) {}), key); err != nil || !bytes.Equal(got, pt) {
		t.Fatalf("sealHeader is not a faithful seal: %v", err)
	}
	bad := sealHeader(pt, key, MinChunkSize, func(h *Header) { h.Digest[0] ^= 1 })
	mustReject(t, "digest mismatch", bad, key, pt)
	// The last chunk is withheld until the digest is checked.
	for _, d := range decoders {
		got, err := d.open(bad, key)
		if !errors.Is(err, ErrAuth) || len(got) != 3*MinChunkSize {
			t.Fatalf("%s: released %d bytes, %v", d.name, len(got), err)
		}
	}
}

// The last-chunk flag is bound: a blob whose chunks were all sealed as
// non-final fails even though the count is right.
func TestLastFlag(t *testing.T) {
	key := NewDataKey()
	pt := randBytes(2*MinChunkSize, 4)
	blob, h := mustSeal(t, pt, key, MinChunkSize)
	k, err := authenticate(key, &h)
	if err != nil {
		t.Fatal(err)
	}
	s, e := chunkBounds(h, 1)
	bad := append(bytes.Clone(blob[:s]), k.aead().Seal(nil, k.nonce(1, false), pt[MinChunkSize:], k.aad(1, false))...)
	if len(bad) != e {
		t.Fatal("length mismatch")
	}
	mustReject(t, "last chunk sealed as non-final", bad, key, pt)
}

func TestParseHeaderErrors(t *testing.T) {
	blob, _ := mustSeal(t, []byte("hello"), DataKey{}, MinChunkSize)
	set := func(off int, v ...byte) []byte { b := bytes.Clone(blob[:HeaderSize]); copy(b[off:], v); return b }
	for _, tc := range []struct {
		field string
		in    []byte
	}{
		{"header", nil},
		{"header", blob[:HeaderSize-1]},
		{"magic", set(0, 'X')},
		{"version", set(offVersion, 2)},
		{"chunk size", set(offChunkLog, 11)},
		{"chunk size", set(offChunkLog, 27)},
		{"reserved", set(offReserved+1, 1)},
		{"size", set(offSize, 0, 0, 0, 1, 0, 0, 0, 1)},
		{"chunk count", set(offChunks+7, 2)},
		{"chunk count", set(offChunks+7, 0)},
	} {
		_, err := ParseHeader(bytes.NewReader(tc.in))
		var fe *FormatError
		if !errors.As(err, &fe) || !errors.Is(err, ErrFormat) || fe.Field != tc.field {
			t.Errorf("%s: got %v", tc.field, err)
		}
	}
	if _, err := ParseHeader(iotest.ErrReader(io.ErrClosedPipe)); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("I/O error not passed through: %v", err)
	}
}

// A chunk count of zero, or a size beyond MaxSize, is refused even with a
// valid tag.
func TestHeaderLimits(t *testing.T) {
	key := NewDataKey()
	for name, mutate := range map[string]func(*Header){
		"zero chunks": func(h *Header) { h.ChunkCount = 0 },
		"too large":   func(h *Header) { h.Size = MaxSize + 1; h.ChunkCount = chunkCount(h.Size, h.ChunkSize) },
	} {
		bad := sealHeader(nil, key, MinChunkSize, mutate)
		for _, d := range decoders {
			if _, err := d.open(bad, key); !errors.Is(err, ErrFormat) {
				t.Errorf("%s: %s: %v", name, d.name, err)
			}
		}
	}
}

type errWriter struct{ n int }

var errWrite = errors.New("write failed")

func (w *errWriter) Write(p []byte) (int, error) {
	if w.n--; w.n < 0 {
		return 0, errWrite
	}
	return len(p), nil
}

func TestUnsealErrors(t *testing.T) {
	key := NewDataKey()
	pt := randBytes(20*MinChunkSize, 5)
	blob, _ := mustSeal(t, pt, key, MinChunkSize)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Unseal(ctx, io.Discard, bytes.NewReader(blob), key, 2); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled context: %v", err)
	}
	if _, err := Unseal(context.Background(), &errWriter{n: 3}, bytes.NewReader(blob), key, 2); !errors.Is(err, errWrite) {
		t.Errorf("write error: %v", err)
	}
	src := io.MultiReader(bytes.NewReader(blob[:len(blob)/2]), iotest.ErrReader(io.ErrClosedPipe))
	if _, err := Unseal(context.Background(), io.Discard, src, key, 2); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("read error: %v", err)
	}
	// Cancel mid-stream from the writer.
	ctx, cancel = context.WithCancel(context.Background())
	w := writerFunc(func(p []byte) (int, error) { cancel(); return len(p), nil })
	if _, err := Unseal(ctx, w, bytes.NewReader(blob), key, 3); !errors.Is(err, context.Canceled) {
		t.Errorf("mid-stream cancel: %v", err)
	}
	// workers < 1 means GOMAXPROCS.
	var out bytes.Buffer
	if _, err := Unseal(context.Background(), &out, bytes.NewReader(blob), key, 0); err != nil || !bytes.Equal(out.Bytes(), pt) {
		t.Errorf("workers=0: %v", err)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
