package seal

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
)

// Options configure [Seal].
type Options struct {
	// ChunkSize is the plaintext size of a chunk: a power of two between
	// MinChunkSize and MaxChunkSize. Zero means DefaultChunkSize.
	ChunkSize int

	// KeyID is stored in the header verbatim so that a holder of the blob
	// can tell which data key to ask for. Seal does not interpret it.
	KeyID [32]byte
}

// Seal encrypts the plaintext read from r under key and writes the sealed
// blob to w, returning its header.
//
// The header carries the plaintext's length and digest and is bound into
// every chunk, so Seal must know both before writing the first byte. If r is
// an io.ReadSeeker, Seal reads it twice (hashing, then encrypting from the
// same starting offset) in constant memory and fails if the two passes
// disagree; otherwise it buffers r in memory, up to MaxSize bytes.
func Seal(w io.Writer, r io.Reader, key DataKey, opts Options) (Header, error) {
	var seed [32]byte
	rand.Read(seed[:])
	return seal(w, r, key, opts, seed)
}

// seal is Seal with a given seed. Sealing is deterministic given the seed,
// which the tests use to check that anything that opens is a genuine seal.
func seal(w io.Writer, r io.Reader, key DataKey, opts Options, seed [32]byte) (Header, error) {
	cs := opts.ChunkSize
	if cs == 0 {
		cs = DefaultChunkSize
	}
	if cs < MinChunkSize || cs > MaxChunkSize || cs&(cs-1) != 0 {
		return Header{}, fmt.Errorf("seal: chunk size %d is not a power of two in [%d, %d]", cs, MinChunkSize, MaxChunkSize)
	}

	rs, ok := r.(io.ReadSeeker)
	if !ok {
		b, err := io.ReadAll(io.LimitReader(r, MaxSize+1))
		if err != nil {
			return Header{}, err
		}
		rs = bytes.NewReader(b)
	}
	start, err := rs.Seek(0, io.SeekCurrent)
	if err != nil {
		return Header{}, err
	}
	d := sha256.New()
	size, err := io.Copy(d, io.LimitReader(rs, MaxSize+1))
	if err != nil {
		return Header{}, err
	}
	if size > MaxSize {
		return Header{}, fmt.Errorf("seal: plaintext exceeds %d bytes", int64(MaxSize))
	}
	if _, err := rs.Seek(start, io.SeekStart); err != nil {
		return Header{}, err
	}

	h := Header{
		Version:    Version,
		ChunkSize:  cs,
		KeyID:      opts.KeyID,
		Size:       size,
		ChunkCount: chunkCount(size, cs),
		Seed:       seed,
	}
	d.Sum(h.Digest[:0])
	k, macKey := deriveKeys(key, &h)
	copy(h.Tag[:], headerMAC(macKey, h.marshal()))
	enc := h.marshal()
	k.headerHash = sha256.Sum256(enc)
	if _, err := w.Write(enc); err != nil {
		return Header{}, err
	}

	aead := k.aead()
	buf := make([]byte, cs+TagSize)
	d.Reset()
	for i := int64(0); i < h.ChunkCount; i++ {
		last := i == h.ChunkCount-1
		p := buf[:h.chunkLen(i)]
		if _, err := io.ReadFull(rs, p); err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				err = errors.New("seal: input shrank between passes")
			}
			return Header{}, err
		}
		d.Write(p)
		if last && !hmac.Equal(d.Sum(nil), h.Digest[:]) {
			return Header{}, errors.New("seal: input changed between passes")
		}
		if _, err := w.Write(aead.Seal(p[:0], k.nonce(i, last), p, k.aad(i, last))); err != nil {
			return Header{}, err
		}
	}
	return h, nil
}
