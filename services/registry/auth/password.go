package auth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/crypto/argon2"
)

// Params are argon2id's cost parameters and output sizes.
type Params struct {
	Memory  uint32 // KiB
	Time    uint32 // passes
	Threads uint8  // lanes (p)
	SaltLen uint32 // bytes
	KeyLen  uint32 // bytes
}

// DefaultParams are the production costs: 64 MiB, one pass, two lanes (the
// second recommended option of RFC 9106 §4 with the memory lowered for a
// shared server). One hash or verification takes about 35 ms wall time with
// its two lanes on the 2-core CI machine (BenchmarkHashDefault) and allocates
// 64 MiB: 16 at once already hold 1 GiB. Store bounds the hashes that run
// at once by memory (Limits.HashMemory); HashPassword and VerifyPassword
// called directly are not bounded.
var DefaultParams = Params{Memory: 64 * 1024, Time: 1, Threads: 2, SaltLen: 16, KeyLen: 32}

// Bounds accepted by ParseHash (and HashPassword). The encoded string comes
// from the database, so it is outside input: without bounds a corrupted or
// planted row could make one login allocate gigabytes.
const (
	MaxMemory  = 1 << 20 // KiB, 1 GiB
	MaxTime    = 16
	MinSaltLen = 8
	MaxSaltLen = 64
	MinKeyLen  = 16
	MaxKeyLen  = 64
	// maxEncodedLen bounds the whole string before any parsing.
	maxEncodedLen = 256
)

const phcPrefix = "$argon2id$v=19$"

var b64 = base64.RawStdEncoding.Strict()

// validate reports whether p is within the accepted bounds.
func (p Params) validate() error {
	switch {
	case p.Threads < 1:
		return fmt.Errorf("%w: argon2id: p must be at least 1", ErrInvalid)
	case p.Memory < 8*uint32(p.Threads) || p.Memory > MaxMemory:
		return fmt.Errorf("%w: argon2id: m must be in [8p, %d] KiB", ErrInvalid, MaxMemory)
	case p.Time < 1 || p.Time > MaxTime:
		return fmt.Errorf("%w: argon2id: t must be in [1, %d]", ErrInvalid, MaxTime)
	case p.SaltLen < MinSaltLen || p.SaltLen > MaxSaltLen:
		return fmt.Errorf("%w: argon2id: salt length must be in [%d, %d]", ErrInvalid, MinSaltLen, MaxSaltLen)
	case p.KeyLen < MinKeyLen || p.KeyLen > MaxKeyLen:
		return fmt.Errorf("%w: argon2id: key length must be in [%d, %d]", ErrInvalid, MinKeyLen, MaxKeyLen)
	}
	return nil
}

// HashPassword hashes password with argon2id under p and a fresh random salt,
// and returns the PHC-encoded string.
func HashPassword(password string, p Params) (string, error) {
	if err := p.validate(); err != nil {
		return "", err
	}
	salt := make([]byte, p.SaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("auth: salt: %w", err)
	}
	key := argon2.IDKey([]byte(password), salt, p.Time, p.Memory, p.Threads, p.KeyLen)
	return encodeHash(p, salt, key), nil
}

func encodeHash(p Params, salt, key []byte) string {
	return fmt.Sprintf("%sm=%d,t=%d,p=%d$%s$%s", phcPrefix, p.Memory, p.Time, p.Threads,
		b64.EncodeToString(salt), b64.EncodeToString(key))
}

// ParseHash parses a PHC-encoded argon2id string as HashPassword writes it:
// version 19, parameters in the order m, t, p as canonical decimals, salt and
// hash in unpadded standard base64. Anything else, and parameters outside the
// bounds above, is refused with an error wrapping ErrInvalid.
func ParseHash(encoded string) (p Params, salt, key []byte, err error) {
	bad := func(what string) (Params, []byte, []byte, error) {
		return Params{}, nil, nil, fmt.Errorf("%w: argon2id hash: %s", ErrInvalid, what)
	}
	if len(encoded) > maxEncodedLen {
		return bad("too long")
	}
	rest, ok := strings.CutPrefix(encoded, phcPrefix)
	if !ok {
		return bad("not $argon2id$v=19$")
	}
	fields := strings.Split(rest, "$")
	if len(fields) != 3 {
		return bad("want params$salt$hash")
	}
	kv := strings.Split(fields[0], ",")
	if len(kv) != 3 {
		return bad("want m=,t=,p=")
	}
	var vals [3]uint64
	for i, name := range []string{"m=", "t=", "p="} {
		s, ok := strings.CutPrefix(kv[i], name)
		if !ok {
			return bad("want m=,t=,p=")
		}
		// Canonical decimal only: no sign, no leading zeros, at most 10 digits.
		if s == "" || len(s) > 10 || (s[0] == '0' && len(s) > 1) || strings.TrimLeft(s, "0123456789") != "" {
			return bad("malformed " + name[:1])
		}
		v, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return bad("malformed " + name[:1])
		}
		vals[i] = v
	}
	if vals[2] > 255 {
		return bad("p out of range")
	}
	if len(fields[1]) > b64.EncodedLen(MaxSaltLen) || len(fields[2]) > b64.EncodedLen(MaxKeyLen) {
		return bad("salt or hash too long")
	}
	// The decoder skips CR and LF; re-encoding rejects those and any other
	// non-canonical form.
	salt, err = b64.DecodeString(fields[1])
	if err != nil || b64.EncodeToString(salt) != fields[1] {
		return bad("salt is not canonical base64")
	}
	key, err = b64.DecodeString(fields[2])
	if err != nil || b64.EncodeToString(key) != fields[2] {
		return bad("hash is not canonical base64")
	}
	p = Params{Memory: uint32(vals[0]), Time: uint32(vals[1]), Threads: uint8(vals[2]),
		SaltLen: uint32(len(salt)), KeyLen: uint32(len(key))}
	if err := p.validate(); err != nil {
		return Params{}, nil, nil, err
	}
	return p, salt, key, nil
}

// VerifyPassword reports whether password matches the encoded hash. The
// comparison is constant-time; a malformed hash is an error (wrapping
// ErrInvalid), never a match.
func VerifyPassword(password, encoded string) (bool, error) {
	p, salt, key, err := ParseHash(encoded)
	if err != nil {
		return false, err
	}
	return verify(password, p, salt, key), nil
}

// verify reports whether password hashes to key under p and salt, in
// constant time; it allocates p.Memory KiB.
func verify(password string, p Params, salt, key []byte) bool {
	got := argon2.IDKey([]byte(password), salt, p.Time, p.Memory, p.Threads, p.KeyLen)
	return subtle.ConstantTimeCompare(got, key) == 1
}

// NeedsRehash reports whether encoded was made with costs below want (or is
// unparsable), so that a successful login should store a fresh hash.
func NeedsRehash(encoded string, want Params) bool {
	p, _, _, err := ParseHash(encoded)
	if err != nil {
		return true
	}
	return p.Memory < want.Memory || p.Time < want.Time || p.Threads != want.Threads ||
		p.SaltLen < want.SaltLen || p.KeyLen < want.KeyLen
}
