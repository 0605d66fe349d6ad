package seal

import (
	"bytes"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"testing"
)

func newX25519(t *testing.T) *ecdh.PrivateKey {
	t.Helper()
	k, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestWrapRoundTrip(t *testing.T) {
	priv := newX25519(t)
	key := NewDataKey()
	w, err := WrapKey(priv.PublicKey(), key)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := PublicKeyID(priv.PublicKey())
	if w.Recipient != id {
		t.Fatal("recipient id not set")
	}
	enc, _ := w.MarshalBinary()
	if len(enc) != WrappedKeySize {
		t.Fatalf("encoding is %d bytes", len(enc))
	}
	var w2 WrappedKey
	if err := w2.UnmarshalBinary(enc); err != nil || w2 != w {
		t.Fatalf("UnmarshalBinary: %v", err)
	}
	got, err := UnwrapKey(priv, w2)
	if err != nil || got != key {
		t.Fatalf("UnwrapKey: %v", err)
	}
	w3, _ := WrapKey(priv.PublicKey(), key)
	if w3 == w {
		t.Fatal("two wraps are identical: ephemeral key reused")
	}
}

func TestUnwrapFailures(t *testing.T) {
	priv, other := newX25519(t), newX25519(t)
	w, err := WrapKey(priv.PublicKey(), NewDataKey())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := UnwrapKey(other, w); !errors.Is(err, ErrKey) {
		t.Errorf("wrong recipient: %v", err)
	}
	// Claiming to be for the other recipient does not help it.
	forged := w
	forged.Recipient, _ = PublicKeyID(other.PublicKey())
	if _, err := UnwrapKey(other, forged); !errors.Is(err, ErrKey) {
		t.Errorf("forged recipient: %v", err)
	}
	lowOrder := w
	lowOrder.Ephemeral = [32]byte{}
	if _, err := UnwrapKey(priv, lowOrder); !errors.Is(err, ErrKey) {
		t.Errorf("low-order ephemeral: %v", err)
	}
	if _, err := UnwrapKey(nil, w); !errors.Is(err, ErrKey) {
		t.Errorf("nil key: %v", err)
	}
	p256, _ := ecdh.P256().GenerateKey(rand.Reader)
	if _, err := UnwrapKey(p256, w); !errors.Is(err, ErrKey) {
		t.Errorf("P-256 key: %v", err)
	}
	if _, err := WrapKey(p256.PublicKey(), DataKey{}); err == nil {
		t.Error("WrapKey accepted a P-256 recipient")
	}

	enc, _ := w.MarshalBinary()
	for i := range enc {
		for _, mask := range []byte{0x01, 0x80} {
			bad := bytes.Clone(enc)
			bad[i] ^= mask
			var bw WrappedKey
			if err := bw.UnmarshalBinary(bad); err != nil {
				if !errors.Is(err, ErrFormat) {
					t.Fatalf("byte %d: %v", i, err)
				}
				continue
			}
			if _, err := UnwrapKey(priv, bw); !errors.Is(err, ErrKey) {
				t.Fatalf("byte %d ^ %#x: unwrap gave %v", i, mask, err)
			}
		}
	}
	var bw WrappedKey
	for _, n := range []int{0, WrappedKeySize - 1, WrappedKeySize + 1} {
		if err := bw.UnmarshalBinary(make([]byte, n)); !errors.Is(err, ErrFormat) {
			t.Errorf("length %d: %v", n, err)
		}
	}
}

func TestPEM(t *testing.T) {
	priv := newX25519(t)
	pp, err := MarshalPrivateKeyPEM(priv)
	if err != nil {
		t.Fatal(err)
	}
	priv2, err := ParsePrivateKeyPEM(pp)
	if err != nil || !priv2.Equal(priv) {
		t.Fatalf("private key round trip: %v", err)
	}
	pub, err := MarshalPublicKeyPEM(priv.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	pub2, err := ParsePublicKeyPEM(pub)
	if err != nil || !pub2.Equal(priv.PublicKey()) {
		t.Fatalf("public key round trip: %v", err)
	}
	// The key id is the SHA-256 of the DER in the PEM block.
	b, _ := pem.Decode(pub)
	if id, _ := PublicKeyID(pub2); id != sha256.Sum256(b.Bytes) {
		t.Error("PublicKeyID is not SHA-256 of the PKIX DER")
	}

	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(ec)
	spki, _ := x509.MarshalPKIXPublicKey(&ec.PublicKey)
	for name, err := range map[string]error{
		"ecdsa private":  second(ParsePrivateKeyPEM(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))),
		"ecdsa public":   second(ParsePublicKeyPEM(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: spki}))),
		"garbage der":    second(ParsePrivateKeyPEM(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2}}))),
		"public as priv": second(ParsePrivateKeyPEM(pub)),
		"priv as public": second(ParsePublicKeyPEM(pp)),
		"not pem":        second(ParsePublicKeyPEM([]byte("hello"))),
	} {
		if !errors.Is(err, ErrFormat) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }
