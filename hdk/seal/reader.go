package seal

import (
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
)

// Reader decrypts a sealed blob as a stream. See [NewReader].
type Reader struct {
	src  io.Reader
	h    Header
	k    *keys
	aead cipher.AEAD
	d    hash.Hash

	buf  []byte // ciphertext of the current chunk, decrypted in place
	out  []byte // verified plaintext not yet returned
	next int64  // index of the next chunk to read
	err  error  // sticky; io.EOF once everything has been verified
}

// NewReader reads and authenticates the header of the sealed blob in src and
// returns a Reader of its plaintext.
//
// Read only ever returns plaintext from chunks that have passed
// authentication, but a chunk being authentic does not make the stream
// complete: truncation, a missing last chunk or a digest mismatch can only be
// detected later. The plaintext is final only once Read returns io.EOF; any
// other error means everything read so far must be discarded. Before the last
// chunk is released, Reader also checks the plaintext digest and that src
// holds no trailing bytes.
func NewReader(src io.Reader, key DataKey) (*Reader, error) {
	h, err := ParseHeader(src)
	if err != nil {
		return nil, err
	}
	k, err := authenticate(key, &h)
	if err != nil {
		return nil, err
	}
	return &Reader{
		src:  src,
		h:    h,
		k:    k,
		aead: k.aead(),
		d:    sha256.New(),
		buf:  make([]byte, h.chunkLen(0)+TagSize),
	}, nil
}

// Header returns the blob's authenticated header.
func (r *Reader) Header() Header { return r.h }

// Read implements io.Reader.
func (r *Reader) Read(p []byte) (int, error) {
	for len(r.out) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		r.out, r.err = r.nextChunk()
	}
	n := copy(p, r.out)
	r.out = r.out[n:]
	return n, nil
}

func (r *Reader) nextChunk() ([]byte, error) {
	if r.next == r.h.ChunkCount {
		return nil, io.EOF
	}
	i := r.next
	r.next++
	ct := r.buf[:r.h.chunkLen(i)+TagSize]
	if _, err := io.ReadFull(r.src, ct); err != nil {
		return nil, readErr(i, err)
	}
	last := i == r.h.ChunkCount-1
	pt, err := r.aead.Open(ct[:0], r.k.nonce(i, last), ct, r.k.aad(i, last))
	if err != nil {
		return nil, fmt.Errorf("%w: chunk %d", ErrAuth, i)
	}
	r.d.Write(pt)
	if last {
		if err := finish(r.d, &r.h, r.src); err != nil {
			return nil, err
		}
	}
	return pt, nil
}

// readErr classifies an error from reading chunk i.
func readErr(i int64, err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return fmt.Errorf("%w: blob truncated in chunk %d: %w", ErrAuth, i, io.ErrUnexpectedEOF)
	}
	return err
}

// finish runs the end-of-stream checks, after the last chunk has been
// authenticated but before it is released.
func finish(d hash.Hash, h *Header, src io.Reader) error {
	if !hmac.Equal(d.Sum(nil), h.Digest[:]) {
		return fmt.Errorf("%w: plaintext digest mismatch", ErrAuth)
	}
	return checkTrailing(h, src)
}

// checkTrailing reports an error if src has bytes after the last chunk.
func checkTrailing(h *Header, src io.Reader) error {
	var b [1]byte
	for {
		n, err := src.Read(b[:])
		if n > 0 {
			return formatErr("trailing data", h.SealedSize(), "bytes after the last chunk")
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
