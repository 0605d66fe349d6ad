package seal

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"sync"
	"testing"
)

// benchSize is the size of a typical partial bitstream layer.
const benchSize = 76 << 20

var benchBlob = sync.OnceValues(func() ([]byte, DataKey) {
	key := NewDataKey()
	var buf bytes.Buffer
	if _, err := Seal(&buf, bytes.NewReader(randBytes(benchSize, 76)), key, Options{}); err != nil {
		panic(err)
	}
	return buf.Bytes(), key
})

func BenchmarkUnseal(b *testing.B) {
	blob, key := benchBlob()
	for _, workers := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			b.SetBytes(benchSize)
			for b.Loop() {
				if _, err := Unseal(context.Background(), io.Discard, bytes.NewReader(blob), key, workers); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkReader(b *testing.B) {
	blob, key := benchBlob()
	b.SetBytes(benchSize)
	for b.Loop() {
		r, err := NewReader(bytes.NewReader(blob), key)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFloor is the serial lower bound of decryption in one goroutine:
// AES-256-GCM open of every chunk plus SHA-256 of the plaintext, with no I/O,
// copying or pipelining. Unseal on two cores should beat it.
func BenchmarkFloor(b *testing.B) {
	blob, key := benchBlob()
	h, err := ParseHeader(bytes.NewReader(blob))
	if err != nil {
		b.Fatal(err)
	}
	k, err := authenticate(key, &h)
	if err != nil {
		b.Fatal(err)
	}
	aead := k.aead()
	out := make([]byte, h.ChunkSize)
	b.SetBytes(benchSize)
	for b.Loop() {
		d := sha256.New()
		off := HeaderSize
		for i := range h.ChunkCount {
			n := h.chunkLen(i) + TagSize
			last := i == h.ChunkCount-1
			pt, err := aead.Open(out[:0], k.nonce(i, last), blob[off:off+n], k.aad(i, last))
			if err != nil {
				b.Fatal(err)
			}
			d.Write(pt)
			off += n
		}
		if !bytes.Equal(d.Sum(nil), h.Digest[:]) {
			b.Fatal("digest mismatch")
		}
	}
}

func BenchmarkSeal(b *testing.B) {
	pt := randBytes(benchSize, 76)
	key := NewDataKey()
	b.SetBytes(benchSize)
	for b.Loop() {
		if _, err := Seal(io.Discard, bytes.NewReader(pt), key, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
