package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
)

// Format constants. See FORMAT.md.
const (
	// Version is the only format version this package reads and writes.
	Version = 1

	// HeaderSize is the length in bytes of an encoded [Header].
	HeaderSize = 156

	// TagSize is the length of the AES-GCM tag that follows each chunk.
	TagSize = 16

	// MinChunkSize, MaxChunkSize and DefaultChunkSize bound the plaintext
	// size of a chunk, which is always a power of two.
	MinChunkSize     = 4 << 10
	MaxChunkSize     = 64 << 20
	DefaultChunkSize = 1 << 20

	// MaxSize is the largest plaintext that can be sealed (4 GiB).
	MaxSize = 4 << 30
)

const magic = "FAASSEAL"

// Offsets of the header fields.
const (
	offMagic     = 0
	offVersion   = 8
	offChunkLog  = 9
	offReserved  = 10
	offKeyID     = 12
	offSize      = 44
	offChunks    = 52
	offDigest    = 60
	offSeed      = 92
	offTag       = 124
	minChunkLog  = 12
	maxChunkLog  = 26
	kdfHeaderMAC = "faas-seal/v1 header-mac"
	kdfChunkKey  = "faas-seal/v1 chunk-key"
	kdfNonceBase = "faas-seal/v1 chunk-nonce"
)

// Error categories, matched with errors.Is.
var (
	// ErrFormat means the input is not a well-formed sealed blob or wrapped
	// key. It is detectable without the key.
	ErrFormat = errors.New("seal: malformed input")

	// ErrAuth means authentication failed: wrong data key, tampered header or
	// chunk, reordered, duplicated, missing or truncated chunks, or a
	// plaintext digest mismatch.
	ErrAuth = errors.New("seal: authentication failed")

	// ErrKey means a wrapped key could not be unwrapped: wrong recipient,
	// wrong private key, or a tampered wrapped key.
	ErrKey = errors.New("seal: cannot unwrap key")
)

// FormatError describes a malformed field. It matches [ErrFormat].
type FormatError struct {
	Field  string // name of the offending field, as in FORMAT.md
	Offset int64  // byte offset of the field within the blob
	Reason string
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("seal: malformed %s at offset %d: %s", e.Field, e.Offset, e.Reason)
}

// Is reports whether target is ErrFormat.
func (e *FormatError) Is(target error) bool { return target == ErrFormat }

func formatErr(field string, off int64, format string, args ...any) error {
	return &FormatError{Field: field, Offset: off, Reason: fmt.Sprintf(format, args...)}
}

// DataKey is the secret that seals one layer. It must be random and never
// reused across unrelated layers; per-blob keys are derived from it and the
// header's fresh seed, so reuse is safe but unnecessary.
type DataKey [32]byte

// NewDataKey returns a fresh random DataKey.
func NewDataKey() DataKey {
	var k DataKey
	rand.Read(k[:]) // never fails since Go 1.24
	return k
}

// Header is the decoded, authenticated header of a sealed blob.
type Header struct {
	Version    uint8
	ChunkSize  int      // plaintext bytes per chunk; the last may be shorter
	KeyID      [32]byte // opaque identifier of the data key, chosen by the sealer
	Size       int64    // plaintext length
	ChunkCount int64    // max(1, ceil(Size/ChunkSize))
	Digest     [32]byte // SHA-256 of the plaintext
	Seed       [32]byte // random per blob; salts the key derivation
	Tag        [32]byte // HMAC-SHA256 of the preceding header bytes
}

// SealedSize returns the total length of the sealed blob: header plus chunks.
func (h Header) SealedSize() int64 {
	return HeaderSize + h.Size + h.ChunkCount*TagSize
}

// chunkLen returns the plaintext length of chunk i.
func (h Header) chunkLen(i int64) int {
	if i < h.ChunkCount-1 {
		return h.ChunkSize
	}
	return int(h.Size - (h.ChunkCount-1)*int64(h.ChunkSize))
}

// chunkCount is the number of chunks for size bytes: at least one, so that
// even an empty plaintext has a final chunk whose absence is detectable.
func chunkCount(size int64, chunkSize int) int64 {
	if size == 0 {
		return 1
	}
	return (size + int64(chunkSize) - 1) / int64(chunkSize)
}

// marshal encodes h. The Tag field is written as is.
func (h Header) marshal() []byte {
	b := make([]byte, HeaderSize)
	copy(b[offMagic:], magic)
	b[offVersion] = h.Version
	b[offChunkLog] = uint8(bits.TrailingZeros(uint(h.ChunkSize)))
	copy(b[offKeyID:], h.KeyID[:])
	binary.BigEndian.PutUint64(b[offSize:], uint64(h.Size))
	binary.BigEndian.PutUint64(b[offChunks:], uint64(h.ChunkCount))
	copy(b[offDigest:], h.Digest[:])
	copy(b[offSeed:], h.Seed[:])
	copy(b[offTag:], h.Tag[:])
	return b
}

// MarshalBinary returns the HeaderSize-byte encoding of h.
func (h Header) MarshalBinary() ([]byte, error) { return h.marshal(), nil }

// ParseHeader reads and checks the structure of a header from r without the
// key: every field is in range and consistent with the others. It does not
// authenticate the header; only [NewReader] and [Unseal] can.
func ParseHeader(r io.Reader) (Header, error) {
	b := make([]byte, HeaderSize)
	if n, err := io.ReadFull(r, b); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return Header{}, formatErr("header", int64(n), "truncated: got %d of %d bytes", n, HeaderSize)
		}
		return Header{}, err
	}
	return parseHeader(b)
}

func parseHeader(b []byte) (Header, error) {
	var h Header
	if string(b[offMagic:offVersion]) != magic {
		return h, formatErr("magic", offMagic, "not a sealed blob")
	}
	if h.Version = b[offVersion]; h.Version != Version {
		return h, formatErr("version", offVersion, "unsupported version %d", h.Version)
	}
	lg := b[offChunkLog]
	if lg < minChunkLog || lg > maxChunkLog {
		return h, formatErr("chunk size", offChunkLog, "exponent %d outside [%d, %d]", lg, minChunkLog, maxChunkLog)
	}
	h.ChunkSize = 1 << lg
	if b[offReserved] != 0 || b[offReserved+1] != 0 {
		return h, formatErr("reserved", offReserved, "must be zero")
	}
	copy(h.KeyID[:], b[offKeyID:])
	size := binary.BigEndian.Uint64(b[offSize:])
	if size > MaxSize {
		return h, formatErr("size", offSize, "%d exceeds maximum %d", size, int64(MaxSize))
	}
	h.Size = int64(size)
	count := binary.BigEndian.Uint64(b[offChunks:])
	if want := chunkCount(h.Size, h.ChunkSize); count != uint64(want) {
		return h, formatErr("chunk count", offChunks, "%d, want %d for size %d and chunk size %d", count, want, h.Size, h.ChunkSize)
	}
	h.ChunkCount = int64(count)
	copy(h.Digest[:], b[offDigest:])
	copy(h.Seed[:], b[offSeed:])
	copy(h.Tag[:], b[offTag:])
	return h, nil
}

// keys holds what is derived from a DataKey and one header.
type keys struct {
	chunkKey   []byte
	nonceBase  [12]byte
	headerHash [32]byte // SHA-256 of the full encoded header, tag included
}

// deriveKeys derives the blob keys from key and h.Seed and returns them with
// the header MAC key.
func deriveKeys(key DataKey, h *Header) (k *keys, macKey []byte) {
	prk, err := hkdf.Extract(sha256.New, key[:], h.Seed[:])
	if err != nil {
		panic(err) // unreachable: HMAC-SHA256 accepts any key
	}
	expand := func(info string, n int) []byte {
		out, err := hkdf.Expand(sha256.New, prk, info, n)
		if err != nil {
			panic(err) // unreachable: n is far below 255*32
		}
		return out
	}
	k = &keys{chunkKey: expand(kdfChunkKey, 32)}
	copy(k.nonceBase[:], expand(kdfNonceBase, 12))
	return k, expand(kdfHeaderMAC, 32)
}

func headerMAC(macKey, encoded []byte) []byte {
	m := hmac.New(sha256.New, macKey)
	m.Write(encoded[:offTag])
	return m.Sum(nil)
}

// authenticate verifies h's tag under key and returns the chunk keys.
func authenticate(key DataKey, h *Header) (*keys, error) {
	k, macKey := deriveKeys(key, h)
	enc := h.marshal()
	if !hmac.Equal(headerMAC(macKey, enc), h.Tag[:]) {
		return nil, fmt.Errorf("%w: header tag mismatch (wrong key or tampered header)", ErrAuth)
	}
	k.headerHash = sha256.Sum256(enc)
	return k, nil
}

func (k *keys) aead() cipher.AEAD {
	b, err := aes.NewCipher(k.chunkKey)
	if err != nil {
		panic(err) // unreachable: the key is 32 bytes
	}
	g, err := cipher.NewGCM(b)
	if err != nil {
		panic(err) // unreachable: standard nonce and tag sizes
	}
	return g
}

// nonce returns the nonce of chunk i: the derived base XOR (last || 0 0 0 || i).
// Distinct (i, last) pairs give distinct nonces under a per-blob key.
func (k *keys) nonce(i int64, last bool) []byte {
	var n [12]byte
	if last {
		n[0] = 1
	}
	binary.BigEndian.PutUint64(n[4:], uint64(i))
	for j := range n {
		n[j] ^= k.nonceBase[j]
	}
	return n[:]
}

// aad returns the additional data of chunk i: header hash || i || last.
func (k *keys) aad(i int64, last bool) []byte {
	a := make([]byte, 32+8+1)
	copy(a, k.headerHash[:])
	binary.BigEndian.PutUint64(a[32:], uint64(i))
	if last {
		a[40] = 1
	}
	return a
}
