package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
)

// KeyID identifies a recipient public key: the SHA-256 of its PKIX (DER
// SubjectPublicKeyInfo) encoding, so that
// `openssl pkey -pubin -outform DER | sha256sum` computes the same value.
type KeyID [32]byte

func (id KeyID) String() string { return hex.EncodeToString(id[:]) }

// PublicKeyID returns the KeyID of an X25519 public key.
func PublicKeyID(pub *ecdh.PublicKey) (KeyID, error) {
	if pub == nil || pub.Curve() != ecdh.X25519() {
		return KeyID{}, errors.New("seal: recipient is not an X25519 key")
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return KeyID{}, err
	}
	return sha256.Sum256(der), nil
}

// WrappedKey is a DataKey encrypted to one X25519 recipient.
type WrappedKey struct {
	Recipient  KeyID    // PublicKeyID of the recipient
	Ephemeral  [32]byte // sender's ephemeral X25519 public key
	Ciphertext [48]byte // AES-256-GCM of the 32-byte data key, 16-byte tag appended
}

const (
	wrapMagic   = "FAASWKEY"
	wrapVersion = 1
	// WrappedKeySize is the length of a marshaled WrappedKey.
	WrappedKeySize = 8 + 1 + 32 + 32 + 48
	wrapInfo       = "faas-seal/v1 key-wrap"
)

// MarshalBinary encodes w as WrappedKeySize bytes (see FORMAT.md).
func (w WrappedKey) MarshalBinary() ([]byte, error) {
	b := make([]byte, 0, WrappedKeySize)
	b = append(b, wrapPrefix(&w)...)
	return append(b, w.Ciphertext[:]...), nil
}

// UnmarshalBinary decodes the encoding produced by MarshalBinary.
func (w *WrappedKey) UnmarshalBinary(b []byte) error {
	if len(b) != WrappedKeySize {
		return formatErr("wrapped key", 0, "length %d, want %d", len(b), WrappedKeySize)
	}
	if string(b[:8]) != wrapMagic {
		return formatErr("wrapped key magic", 0, "not a wrapped key")
	}
	if b[8] != wrapVersion {
		return formatErr("wrapped key version", 8, "unsupported version %d", b[8])
	}
	copy(w.Recipient[:], b[9:41])
	copy(w.Ephemeral[:], b[41:73])
	copy(w.Ciphertext[:], b[73:])
	return nil
}

// wrapPrefix is the encoding of everything but the ciphertext. It is the
// AEAD's additional data, binding the recipient and the ephemeral key.
func wrapPrefix(w *WrappedKey) []byte {
	b := make([]byte, 0, 73)
	b = append(b, wrapMagic...)
	b = append(b, wrapVersion)
	b = append(b, w.Recipient[:]...)
	return append(b, w.Ephemeral[:]...)
}

// wrapAEAD derives the key-encryption AEAD from the ECDH shared secret,
// salted with both public keys so the KEK is specific to this exchange.
func wrapAEAD(shared, ephemeral, recipient []byte) cipher.AEAD {
	salt := append(append([]byte{}, ephemeral...), recipient...)
	kek, err := hkdf.Key(sha256.New, shared, salt, wrapInfo, 32)
	if err != nil {
		panic(err) // unreachable
	}
	b, err := aes.NewCipher(kek)
	if err != nil {
		panic(err) // unreachable
	}
	g, err := cipher.NewGCM(b)
	if err != nil {
		panic(err) // unreachable
	}
	return g
}

// The KEK is fresh for every wrap (new ephemeral key), so a fixed nonce is
// safe: each key encrypts exactly one message.
var zeroNonce [12]byte

// WrapKey encrypts key to recipient, an X25519 public key.
func WrapKey(recipient *ecdh.PublicKey, key DataKey) (WrappedKey, error) {
	id, err := PublicKeyID(recipient)
	if err != nil {
		return WrappedKey{}, err
	}
	eph, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		return WrappedKey{}, err
	}
	shared, err := eph.ECDH(recipient)
	if err != nil {
		return WrappedKey{}, fmt.Errorf("seal: bad recipient key: %w", err)
	}
	w := WrappedKey{Recipient: id}
	copy(w.Ephemeral[:], eph.PublicKey().Bytes())
	g := wrapAEAD(shared, w.Ephemeral[:], recipient.Bytes())
	g.Seal(w.Ciphertext[:0], zeroNonce[:], key[:], wrapPrefix(&w))
	return w, nil
}

// UnwrapKey decrypts w with the recipient's private key. Every failure,
// including a WrappedKey addressed to another recipient, matches ErrKey.
func UnwrapKey(priv *ecdh.PrivateKey, w WrappedKey) (DataKey, error) {
	if priv == nil || priv.Curve() != ecdh.X25519() {
		return DataKey{}, fmt.Errorf("%w: not an X25519 private key", ErrKey)
	}
	pub := priv.PublicKey()
	id, err := PublicKeyID(pub)
	if err != nil {
		return DataKey{}, fmt.Errorf("%w: %w", ErrKey, err)
	}
	if id != w.Recipient {
		return DataKey{}, fmt.Errorf("%w: wrapped for recipient %s, not %s", ErrKey, w.Recipient, id)
	}
	eph, err := ecdh.X25519().NewPublicKey(w.Ephemeral[:])
	if err != nil {
		return DataKey{}, fmt.Errorf("%w: %w", ErrKey, err)
	}
	shared, err := priv.ECDH(eph) // rejects low-order points (all-zero output)
	if err != nil {
		return DataKey{}, fmt.Errorf("%w: %w", ErrKey, err)
	}
	g := wrapAEAD(shared, w.Ephemeral[:], pub.Bytes())
	var k DataKey
	if _, err := g.Open(k[:0], zeroNonce[:], w.Ciphertext[:], wrapPrefix(&w)); err != nil {
		return DataKey{}, fmt.Errorf("%w: wrapped key does not authenticate", ErrKey)
	}
	return k, nil
}

// MarshalPrivateKeyPEM encodes an X25519 private key as a PKCS #8
// "PRIVATE KEY" PEM block.
func MarshalPrivateKeyPEM(priv *ecdh.PrivateKey) ([]byte, error) {
	if priv == nil || priv.Curve() != ecdh.X25519() {
		return nil, errors.New("seal: not an X25519 private key")
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// ParsePrivateKeyPEM decodes the first PEM block of data, which must be a
// PKCS #8 "PRIVATE KEY" holding an X25519 key.
func ParsePrivateKeyPEM(data []byte) (*ecdh.PrivateKey, error) {
	b, _ := pem.Decode(data)
	if b == nil || b.Type != "PRIVATE KEY" {
		return nil, formatErr("PEM", 0, `no "PRIVATE KEY" block`)
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	priv, ok := k.(*ecdh.PrivateKey)
	if !ok || priv.Curve() != ecdh.X25519() {
		return nil, formatErr("PEM", 0, "%T is not an X25519 private key", k)
	}
	return priv, nil
}

// MarshalPublicKeyPEM encodes an X25519 public key as a PKIX "PUBLIC KEY" PEM
// block.
func MarshalPublicKeyPEM(pub *ecdh.PublicKey) ([]byte, error) {
	if pub == nil || pub.Curve() != ecdh.X25519() {
		return nil, errors.New("seal: not an X25519 public key")
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// ParsePublicKeyPEM decodes the first PEM block of data, which must be a PKIX
// "PUBLIC KEY" holding an X25519 key.
func ParsePublicKeyPEM(data []byte) (*ecdh.PublicKey, error) {
	b, _ := pem.Decode(data)
	if b == nil || b.Type != "PUBLIC KEY" {
		return nil, formatErr("PEM", 0, `no "PUBLIC KEY" block`)
	}
	k, err := x509.ParsePKIXPublicKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	pub, ok := k.(*ecdh.PublicKey)
	if !ok || pub.Curve() != ecdh.X25519() {
		return nil, formatErr("PEM", 0, "%T is not an X25519 public key", k)
	}
	return pub, nil
}
