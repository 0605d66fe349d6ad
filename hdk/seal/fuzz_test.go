package seal

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"testing"
)

// fuzzKey is the fixed key of FuzzOpen; the blobs in testdata/fuzz/FuzzOpen
// were sealed with it.
var fuzzKey = DataKey(sha256.Sum256([]byte("faas-seal fuzz key")))

func FuzzParseHeader(f *testing.F) {
	blob, _ := mustSeal(f, []byte("seed"), fuzzKey, MinChunkSize)
	f.Add(blob[:HeaderSize])
	f.Add(blob[:HeaderSize-1])
	f.Add([]byte(magic))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := ParseHeader(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v is not ErrFormat", err)
			}
			return
		}
		if enc := h.marshal(); !bytes.Equal(enc, data[:HeaderSize]) {
			t.Fatal("parsed header does not re-encode to its input")
		}
		if h.SealedSize() < HeaderSize+TagSize || h.ChunkCount != chunkCount(h.Size, h.ChunkSize) {
			t.Fatalf("inconsistent header accepted: %+v", h)
		}
	})
}

func FuzzOpen(f *testing.F) {
	for _, size := range []int{0, 1, 100, MinChunkSize, MinChunkSize + 1, 2*MinChunkSize + 3} {
		blob, _ := mustSeal(f, randBytes(size, uint64(size)), fuzzKey, MinChunkSize)
		f.Add(blob)
	}
	f.Add([]byte("FAASSEAL"))
	f.Fuzz(func(t *testing.T, blob []byte) {
		r, err := NewReader(bytes.NewReader(blob), fuzzKey)
		var got []byte
		if err == nil {
			got, err = io.ReadAll(r)
		}
		var par bytes.Buffer
		h, perr := Unseal(context.Background(), &par, bytes.NewReader(blob), fuzzKey, 2)
		if (err == nil) != (perr == nil) {
			t.Fatalf("stream and parallel disagree: %v vs %v", err, perr)
		}
		if err != nil {
			for _, e := range []error{err, perr} {
				if !errors.Is(e, ErrAuth) && !errors.Is(e, ErrFormat) {
					t.Fatalf("error %v is neither ErrAuth nor ErrFormat", e)
				}
			}
			if !bytes.HasPrefix(par.Bytes(), got) && !bytes.HasPrefix(got, par.Bytes()) {
				t.Fatal("stream and parallel released different plaintext")
			}
			return
		}
		if !bytes.Equal(got, par.Bytes()) {
			t.Fatal("stream and parallel plaintext differ")
		}
		// Anything that opens must be exactly what Seal makes of its
		// plaintext with the same seed: a genuine seal, bit for bit.
		var again bytes.Buffer
		if _, err := seal(&again, bytes.NewReader(got), fuzzKey, Options{ChunkSize: h.ChunkSize, KeyID: h.KeyID}, h.Seed); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again.Bytes(), blob) {
			t.Fatal("opened a blob that is not a genuine seal")
		}
	})
}
